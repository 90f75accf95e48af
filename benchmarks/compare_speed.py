"""What the judge's output checks cost on a 64 MiB float32 pair: today's NumPy path on the
host against the torch path where the tensors are (`onsite.judge.compare`, issue 50).

For one float32 output of ``--mib`` MiB and its reference, on ``--device`` (``cuda`` where
there is one, else ``cpu``), medians of ``--repeat`` runs, in seconds, each check through
the NumPy path (``host=True``: a host copy, float64 NumPy) and the torch path (the default
for tensors), with the ratio:

- ``compare equal``: :func:`compare.compare` of an output equal to its reference;
- ``compare near``: an output within the tolerance everywhere (float32 noise of 1e-6);
- ``compare one off``: one value outside the tolerance, in the last slice (the message
  names it: both passes and the first-index search);
- ``compare all zero``: an all-zero output (every value outside);
- ``compare NaN ref``: a reference with one NaN reproduced by the output (the general rules);
- ``mutation check``: :func:`compare.mutated_input` of an unchanged input;
- ``NaN/Inf count``: :func:`compare.nonfinite` of the output (the overflow check).

Both paths must give the same message; the script stops if they do not.

    python benchmarks/compare_speed.py [--mib 64] [--repeat 5] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import timeit


def main() -> None:
    import torch

    from accelopt_core.onsite.judge import compare

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    default = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default)
    args = parser.parse_args()

    n = args.mib * 2**20 // 4
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(n, generator=gen).to(args.device)
    near = ref + (torch.randn(n, generator=gen) * 1e-6).to(args.device)
    off = ref.clone()
    off[-5] += 1.0
    nan_ref = ref.clone()
    nan_ref[n // 3] = float("nan")
    same, nan_same, zero = ref.clone(), nan_ref.clone(), torch.zeros_like(ref)
    cases = {
        "compare equal": lambda host: compare.compare(same, ref, {}, {}, host=host),
        "compare near": lambda host: compare.compare(near, ref, {}, {}, host=host),
        "compare one off": lambda host: compare.compare(off, ref, {}, {}, host=host),
        "compare all zero": lambda host: compare.compare(zero, ref, {}, {}, host=host),
        "compare NaN ref": lambda host: compare.compare(nan_same, nan_ref, {}, {}, host=host),
        "mutation check": lambda host: compare.mutated_input((ref,), (same,), host=host),
        "NaN/Inf count": lambda host: compare.nonfinite(near, host=host),
    }
    print(f"{args.mib} MiB float32 on {args.device}, median of {args.repeat} (seconds):")
    print(f"  {'check':<18} {'numpy':>8} {'torch':>8} {'ratio':>7}")
    for name, run in cases.items():
        host_answer, answer = run(True), run(False)  # also the warm-up of each path
        if host_answer != answer:
            raise SystemExit(f"{name}: the paths differ: {host_answer!r} vs {answer!r}")
        old, new = (
            statistics.median(
                timeit.repeat(lambda h=h, run=run: run(h), number=1, repeat=args.repeat)
            )
            for h in (True, False)
        )
        print(f"  {name:<18} {old:8.3f} {new:8.3f} {old / new:6.1f}x")


if __name__ == "__main__":
    main()
