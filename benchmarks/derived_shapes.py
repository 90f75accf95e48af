"""Added time per evaluation of issue 22's derived-shape checks, under the Triton interpreter.

Each Triton example (``examples/triton/*.py``) and the single-shape softmax of the issue
(``tests/shapes/specialized.py``: 16×64, no ``BENCH["shapes"]``) is evaluated as its own candidate
through the real :class:`~accelopt_core.evaluation.evaluator.Evaluator` and the ``local`` target
(warm workers, the default; no evaluation cache; default evaluation settings: 5 seeds, 25 ms
warm-up, 100 ms of repetitions), one evaluation at a time, in three modes, interleaved per round
so that the machine's load affects them alike:

- ``none``: ``derived_inputs=[]``, no derived shape checked (what an evaluation cost before);
- ``candidate``: ``derived_inputs`` = the baseline's ``used`` list, what every candidate of a
  search pays (one checked call per derived shape, the reference computed by the harness);
- ``baseline``: ``derived_inputs=None``, the baseline's own evaluation (once per search): the
  derivation plus one checked call per derived shape.

Prints, per harness: the median seconds of each mode, the number of derived shapes, the added
wall time of ``candidate`` and ``baseline`` over ``none`` in %, and the same share measured inside
each evaluation (``metrics["derived_inputs"]["seconds"]``, the judge's clock around the derived
checks, over the rest of that evaluation's wall time): on a shared machine the load changes
between evaluations more than within one, so the second figure is the steadier one (target:
<= 15 % for candidates).

Usage (from the repository root): ``python benchmarks/derived_inputs.py [--rounds 5] [--only
softmax]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from accelopt_core.evaluation.derived import used_inputs  # noqa: E402
from accelopt_core.evaluation.evaluator import Evaluator  # noqa: E402
from accelopt_core.settings import Settings  # noqa: E402
from accelopt_core.targets import make_target  # noqa: E402

MODES = ("none", "candidate", "baseline")


def harnesses() -> dict[str, tuple[str, str]]:
    """name -> (source, entry) of every harness measured."""
    from tests.shapes.specialized import SOFTMAX_FILE

    out = {"single-shape softmax (issue 22)": (SOFTMAX_FILE, "softmax")}
    for path in sorted((ROOT / "examples" / "triton").glob("*.py")):
        entry = {"elementwise": "add_gelu", "reduction": "vector_sum"}.get(path.stem, path.stem)
        out[f"examples/triton/{path.name}"] = (path.read_text(), entry)
    return out


async def measure(source: str, entry: str, rounds: int) -> tuple[dict[str, list[float]], int, str]:
    """Seconds per evaluation by mode (and ``<mode> share``: the derived checks' seconds over
    the rest of the evaluation, %), the number of derived shapes used, and a failure (or "")."""
    settings = Settings()
    target = make_target(settings)
    evaluator = Evaluator(target, settings, None)
    times: dict[str, list[float]] = {m: [] for m in (*MODES, "candidate %", "baseline %")}
    try:
        first = await evaluator.evaluate(source, source, entry, use_cache=False)  # warms up
        if not first.ok:
            return times, 0, f"{first.status}: {first.message}"
        used = used_inputs(first)
        lists = {"none": [], "candidate": used, "baseline": None}
        for _ in range(rounds):
            for mode in MODES:
                t0 = time.perf_counter()
                result = await evaluator.evaluate(
                    source, source, entry, use_cache=False, derived_inputs=lists[mode]
                )
                wall = time.perf_counter() - t0
                times[mode].append(wall)
                if not result.ok:
                    return times, len(used), f"{mode}: {result.status}: {result.message}"
                spent = (result.metrics.get("derived_inputs") or {}).get("seconds")
                if mode != "none" and isinstance(spent, (int, float)):
                    times[f"{mode} %"].append(100.0 * spent / max(wall - spent, 1e-9))
        return times, len(used), ""
    finally:
        await target.close()


def main() -> None:
    """Parse the arguments, measure every harness, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="evaluations per mode")
    parser.add_argument("--only", default="", help="substring of the harnesses to measure")
    args = parser.parse_args()
    os.environ.setdefault("ACCELOPT_SHAPE", "small")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{platform.machine()}, {os.cpu_count()} cores, load {load:.1f}; rounds {args.rounds}")
    print(
        "| harness | derived shapes | none s | candidate s | baseline s | candidate + (wall) "
        "| baseline + (wall) | candidate + (in eval) | baseline + (in eval) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, (source, entry) in harnesses().items():
        if args.only not in name:
            continue
        times, n, failed = asyncio.run(measure(source, entry, args.rounds))
        if failed:
            print(f"| {name} | {n} | {failed[:80]} | | | | |", flush=True)
            continue
        med = {m: statistics.median(v) if v else float("nan") for m, v in times.items()}
        extra = {m: 100.0 * (med[m] / med["none"] - 1.0) for m in ("candidate", "baseline")}
        print(
            f"| {name} | {n} | {med['none']:.2f} | {med['candidate']:.2f} | "
            f"{med['baseline']:.2f} | {extra['candidate']:+.0f} % | {extra['baseline']:+.0f} % | "
            f"+{med['candidate %']:.0f} % | +{med['baseline %']:.0f} % |",
            flush=True,
        )


if __name__ == "__main__":
    main()
