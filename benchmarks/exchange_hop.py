"""What one tensor costs to cross between the judge's processes (`onsite.runtime.exchange`),
and to be checked there (`onsite.judge.compare`).

Every input and output of a GPU evaluation crosses as a file: the reference process writes it
and reports its sha256, the judge or the candidate reads it back (benchmarks/README.md, "GPU
figures", "Where the minute goes"). This times each step for one float32 tensor of ``--mib``
MiB in ``--dir`` (default ``/dev/shm``, where the workers' exchange directories live), medians
of ``--repeat`` runs, in seconds:

- ``save``: :func:`exchange.save` as the judge and the candidate write (no digest);
- ``save + reread``: the writer's old way to its digest, a second pass over the file;
- ``save hashed``: :func:`exchange.save` with ``hashed=True``, the digest taken in memory;
- ``load``: :func:`exchange.load` as the candidate reads (no digest);
- ``load verified``: the same, checking the writer's digest, as the judge reads;
- ``compare``: :func:`compare.compare` of an output against its reference (equal values);
- ``mutation check``: :func:`compare.mutated_input`, the inputs after a call against the
  judge's copy from before it (unchanged).

    python benchmarks/exchange_hop.py [--mib 64] [--repeat 5] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time


def _median_s(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64, help="tensor size, MiB")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    args = parser.parse_args()

    import torch

    from accelopt_core.onsite.judge import compare
    from accelopt_core.onsite.runtime import exchange

    x = torch.randn(args.mib * 2**20 // 4)
    fd, path = tempfile.mkstemp(suffix=".pt", dir=args.dir)
    os.close(fd)

    def reread() -> None:
        exchange.save(path, (x,), torch=torch)
        with open(path, "rb") as f:
            hashlib.sha256(f.read()).hexdigest()

    try:
        rows = {
            "save": lambda: exchange.save(path, (x,), torch=torch),
            "save + reread": reread,
            "save hashed": lambda: exchange.save(path, (x,), torch=torch, hashed=True),
        }
        out = {name: _median_s(fn, args.repeat) for name, fn in rows.items()}
        sha = exchange.save(path, (x,), torch=torch, hashed=True)
        out["load"] = _median_s(lambda: exchange.load(path, torch=torch), args.repeat)
        out["load verified"] = _median_s(
            lambda: exchange.load(path, torch=torch, sha256=sha), args.repeat
        )
        same = x.clone()
        compare.compare(x, same, {}, {})  # NumPy's first use out of the figures
        out["compare"] = _median_s(lambda: compare.compare(x, same, {}, {}), args.repeat)
        out["mutation check"] = _median_s(lambda: compare.mutated_input((x,), (same,)), args.repeat)
    finally:
        os.unlink(path)
    print(
        f"{args.mib} MiB float32 in {args.dir or tempfile.gettempdir()}, median of {args.repeat}:"
    )
    for name, seconds in out.items():
        print(f"  {name:<14} {seconds:.3f} s")


if __name__ == "__main__":
    main()
