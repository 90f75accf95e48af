"""Interpreter latencies idle and under load (issue 20: the suite must pass beside a second run).

Under the Triton interpreter a candidate's latency is host work, and on a loaded machine its wall
time is mostly the scheduler's. This script measures how much load moves each clock:

1. ``loop``: one interpreted 64x1000 softmax timed in-process by
   :func:`accelopt_core.onsite.contestant.timing.run_timed` on the wall clock and on the process's
   CPU clock, 12 repetitions each, idle and then beside ``--hogs`` busy Python processes;
2. ``judge``: an example (``--example``, softmax by default) evaluated ``--repeat`` times through
   the real :class:`~accelopt_core.evaluation.evaluator.Evaluator` on the local target (warm
   workers, no cache, default evaluation settings), idle and then beside the same hogs: the
   judge's ``latency_ms`` (whatever clock the checkout's judge times by) and the wall seconds per
   evaluation.

Prints medians and loaded/idle ratios. The ``judge`` part uses only APIs that exist since
ea1c8e3 (the last wall-clock judge), so ``PYTHONPATH=/tmp/before python
benchmarks/interpreter_clock.py --part judge`` on ``git archive ea1c8e3`` measures the old judge.

Usage (from the repository root): ``python benchmarks/interpreter_clock.py [--hogs 4]
[--repeat 5] [--part loop|judge|both]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))
os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("ACCELOPT_SHAPE", "small")  # as benchmarks/eval_cost.py


@contextmanager
def hogs(n: int) -> Iterator[None]:
    """``n`` busy Python processes for the duration of the block (none for ``n`` = 0), each in
    a session of its own: with Linux's autogroup scheduling a session shares the CPU as one, and
    the workers evaluating candidates run in sessions of their own, as do a second test run's."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(n)
    ]
    try:
        time.sleep(0.5 if n else 0.0)
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def softmax_call() -> Callable[[], object]:
    """A launcher of an interpreted row softmax on a 64x1000 float32 tensor."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        x = tl.load(x_ptr + row * n + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, 0))
        tl.store(y_ptr + row * n + cols, e / tl.sum(e, 0), mask=mask)

    x = torch.randn(64, 1000)
    y = torch.empty_like(x)
    return lambda *_: softmax_rows[(64,)](x, y, 1000, BLOCK=1024)


def loop_medians(call: Callable[[], object]) -> dict[str, float]:
    """Median ms of 12 timed calls of ``call`` per clock (``wall``, ``cpu``)."""
    from accelopt_core.onsite.contestant.timing import run_timed
    from accelopt_core.onsite.runtime import clocks

    class NoCounter:
        def take(self) -> int:
            return 1

    out = {}
    for clock in (clocks.WALL, clocks.CPU):
        run = run_timed(
            call, (), [()] * 12, torch=__import__("torch"), use_cuda=False,
            counter=NoCounter(), rep_ms=1e9, warmup_ms=0.0, clock=clock,
        )  # fmt: skip
        out[clock] = statistics.median(run.samples_ms)
    return out


async def judge_runs(path: Path, repeat: int) -> tuple[list[float], list[float]]:
    """(judge latency_ms, wall s) of ``repeat`` evaluations of ``path`` as its own candidate."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from eval_cost import bench_entry

    from accelopt_core.evaluation.evaluator import Evaluator
    from accelopt_core.settings import Settings
    from accelopt_core.targets import make_target

    source = path.read_text()
    entry = bench_entry(source)
    target = make_target(Settings())
    evaluator = Evaluator(target, Settings(), None)
    latencies: list[float] = []
    walls: list[float] = []
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = await evaluator.evaluate(
                source, source, entry, use_cache=False, source_name=path.name
            )
            walls.append(time.perf_counter() - t0)
            if result.status != "ok" or result.latency_ms is None:
                raise SystemExit(f"{path.name}: {result.status}: {result.message}")
            latencies.append(result.latency_ms)
    finally:
        await target.close()
    return latencies, walls


def row(name: str, idle: float, loaded: float, unit: str) -> str:
    return f"| {name} | {idle:.1f} {unit} | {loaded:.1f} {unit} | {loaded / idle:.2f} |"


def main() -> None:
    """Parse the arguments, measure idle then loaded, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=4, help="busy processes for the load")
    parser.add_argument("--repeat", type=int, default=5, help="evaluations per load (judge)")
    parser.add_argument("--part", choices=("loop", "judge", "both"), default="both")
    parser.add_argument("--example", default="softmax", help="examples/triton/<name>.py")
    args = parser.parse_args()
    import accelopt_core

    print(f"accelopt_core from {Path(accelopt_core.__file__).parent}; {os.cpu_count()} cores")
    print(f"| measure | idle | beside {args.hogs} busy processes | loaded / idle |")
    print("| --- | --- | --- | --- |")
    if args.part in ("loop", "both"):
        call = softmax_call()
        call()
        idle = loop_medians(call)
        with hogs(args.hogs):
            loaded = loop_medians(call)
        for clock in idle:
            print(row(f"loop, {clock} clock, median", idle[clock], loaded[clock], "ms"))
    if args.part in ("judge", "both"):
        path = ROOT / "examples" / "triton" / f"{args.example}.py"
        lat_idle, wall_idle = asyncio.run(judge_runs(path, args.repeat))
        with hogs(args.hogs):
            lat_loaded, wall_loaded = asyncio.run(judge_runs(path, args.repeat))
        med = statistics.median
        print(row(f"judge latency_ms ({args.example})", med(lat_idle), med(lat_loaded), "ms"))
        spread = max(lat_loaded) / min(lat_idle)
        print(f"| judge latency, slowest loaded / fastest idle | | | {spread:.2f} |")
        print(row("wall s per evaluation", med(wall_idle), med(wall_loaded), "s"))


if __name__ == "__main__":
    main()
