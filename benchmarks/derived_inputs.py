"""Added time per evaluation of the derived-input checks (issues 22 and 29: shapes, values,
layouts), under the Triton interpreter.

Each Triton example (``examples/triton/*.py``) and the single-shape softmax of issue 22
(``tests/shapes/specialized.py``: 16×64, no ``BENCH["shapes"]``) is evaluated as its own candidate
through the real :class:`~accelopt_core.evaluation.evaluator.Evaluator` and the ``local`` target
(warm workers, the default; no evaluation cache; default evaluation settings: 5 seeds, 25 ms
warm-up, 100 ms of repetitions), one evaluation at a time, in three modes, interleaved per round
so that the machine's load affects them alike:

- ``none``: ``derived_inputs=[]``, no derived input checked: 5 plain seeds (what an evaluation
  cost before issue 22);
- ``candidate``: ``derived_inputs`` = the baseline's ``used`` list, what every candidate of a
  search pays: one checked call per slot, and the plain check skips the seeds the slots are
  made from (issue 29's "fewer seeds");
- ``baseline``: ``derived_inputs=None``, the baseline's own evaluation (once per search, and
  ``accelopt profile``): the derivation plus its checks (split slots, layouts, merges).

Prints, per harness: the number of slots and of parts used, the median seconds of each mode, and
the added wall time of ``candidate`` and ``baseline`` over ``none`` in % (target: <= 20 % for
candidates), and the added CPU time of every process of the evaluations (:func:`workers_cpu_s`:
steadier than wall time on a shared machine).

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
from accelopt_core.onsite.judge.derived_inputs import kinds_count  # noqa: E402
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


def workers_cpu_s() -> float:
    """CPU seconds used so far by this process's children (the warm workers' zygotes) and every
    process they reaped (the workers of each evaluation, and their judge, candidate, reference
    and compile-stage processes): ``utime + stime + cutime + cstime`` from ``/proc``."""
    me = os.getpid()
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # ppid
            total += sum(int(v) for v in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


async def measure(source: str, entry: str, rounds: int) -> tuple[dict[str, list[float]], dict, str]:
    """Wall and CPU seconds per evaluation by mode (``<mode>`` and ``<mode> cpu``), the
    baseline's usable derived inputs (``slots``, parts by kind), and a failure (or "")."""
    settings = Settings()
    target = make_target(settings)
    evaluator = Evaluator(target, settings, None)
    times: dict[str, list[float]] = {m: [] for m in (*MODES, *(f"{m} cpu" for m in MODES))}
    try:
        first = await evaluator.evaluate(source, source, entry, use_cache=False)  # warms up
        if not first.ok:
            return times, {}, f"{first.status}: {first.message}"
        used = used_inputs(first)
        found = {"slots": len(used), **kinds_count(used)}
        lists = {"none": [], "candidate": used, "baseline": None}
        for _ in range(rounds):
            for mode in MODES:
                t0, c0 = time.perf_counter(), workers_cpu_s()
                result = await evaluator.evaluate(
                    source, source, entry, use_cache=False, derived_inputs=lists[mode]
                )
                times[mode].append(time.perf_counter() - t0)
                times[f"{mode} cpu"].append(workers_cpu_s() - c0)
                if not result.ok:
                    return times, found, f"{mode}: {result.status}: {result.message}"
        return times, found, ""
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
        "| harness | slots (shapes, values, layouts) | none s | candidate s | baseline s "
        "| candidate + (wall) | baseline + (wall) | candidate + (CPU) | baseline + (CPU) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, (source, entry) in harnesses().items():
        if args.only not in name:
            continue
        times, found, failed = asyncio.run(measure(source, entry, args.rounds))
        if failed:
            print(f"| {name} | {found} | {failed[:80]} | | | | | | |", flush=True)
            continue
        med = {m: statistics.median(v) if v else float("nan") for m, v in times.items()}
        extra = {
            m: 100.0 * (med[m] / med[base] - 1.0)
            for m, base in (("candidate", "none"), ("baseline", "none"),
                            ("candidate cpu", "none cpu"), ("baseline cpu", "none cpu"))
        }  # fmt: skip
        parts = f"{found['slots']} ({found['shape']}, {found['values']}, {found['layout']})"
        print(
            f"| {name} | {parts} | {med['none']:.2f} | {med['candidate']:.2f} | "
            f"{med['baseline']:.2f} | {extra['candidate']:+.0f} % | {extra['baseline']:+.0f} % | "
            f"{extra['candidate cpu']:+.0f} % | {extra['baseline cpu']:+.0f} % |",
            flush=True,
        )


if __name__ == "__main__":
    main()
