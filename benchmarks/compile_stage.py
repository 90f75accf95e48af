"""Cost of the GPU compile stage (issue 21, item 6), per example kernel.

Through the real :class:`~accelopt_core.evaluation.evaluator.Evaluator` and the ``local`` target
(no evaluation cache, default evaluation settings), each example evaluated as its own candidate:

- ``stage new kernel``: the stage's own time (``metrics["gpu"]["compile_s"]``: compiles, ptxas -v,
  cuobjdump) for a kernel not in Triton's cache: a fresh ``TRITON_CACHE_DIR`` holding only the
  memoised ``triton_key()`` (:mod:`accelopt_core.onsite.triton.twin`), cold worker;
- ``stage first run``: the same with an empty cache (``triton_key()`` computed too);
- ``stage cached``: from the user's Triton cache, warm workers (the CLI's default) and cold workers;
- ``eval off / on``: whole evaluations with ``gpu = "none"`` and ``"H100 SXM5"`` (warm workers,
  interleaved, medians of ``--rounds``), the stage's share of one evaluation and the wall time
  it adds. A search's wall time is its evaluations' plus the LLM's, so the added share bounds
  what the stage adds to a search under the interpreter.

    python3 benchmarks/compile_stage.py [--rounds 3] [examples/triton/matmul.py ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from accelopt_core.evaluation.evaluator import Evaluator  # noqa: E402
from accelopt_core.settings import Settings  # noqa: E402
from accelopt_core.targets import make_target  # noqa: E402
from benchmarks.eval_cost import bench_entry  # noqa: E402

GPU = "H100 SXM5"


async def _evaluate(path: Path, runs: list[tuple[str, bool]]) -> list[tuple[float, dict]]:
    """(wall s, metrics) of each ``(gpu, warm)`` run of ``path``, in order, one target per
    worker kind (a warm target's first evaluation starts its worker and is not counted)."""
    source = path.read_text()
    entry = bench_entry(source)
    out: list[tuple[float, dict]] = []
    targets: dict[bool, tuple] = {}
    try:
        for gpu, warm in runs:
            if warm not in targets:
                settings = Settings.model_validate({"evaluation": {"warmWorkers": warm}})
                target = make_target(settings)
                targets[warm] = (target, settings)
                if warm:
                    await Evaluator(target, settings, None).evaluate(
                        source, source, entry, use_cache=False, source_name=path.name
                    )
            target, settings = targets[warm]
            evaluator = Evaluator(target, settings.model_copy(update={"gpu": gpu}), None)
            t0 = time.perf_counter()
            result = await evaluator.evaluate(
                source, source, entry, use_cache=False, source_name=path.name
            )
            wall = time.perf_counter() - t0
            if result.status != "ok":
                raise SystemExit(f"{path.name}: {result.status}: {result.message}")
            out.append((wall, result.metrics or {}))
    finally:
        for target, _ in targets.values():
            await target.close()
    return out


def _stage_s(metrics: dict) -> float:
    return float(metrics["gpu"]["compile_s"])


def _fresh_cache(seed_key: bool) -> str:
    """A new ``TRITON_CACHE_DIR``, holding the memoised ``triton_key()`` when ``seed_key``."""
    cache = tempfile.mkdtemp(prefix="accelopt-bench-cache-")
    if seed_key:
        code = "from accelopt_core.onsite.triton import twin; import triton; twin.install_key()"
        env = dict(os.environ, TRITON_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        env.pop("TRITON_INTERPRET", None)
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return cache


def _cold_stage(path: Path, seed_key: bool) -> float:
    """The stage's time in a cold worker with a fresh Triton cache."""
    old = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = _fresh_cache(seed_key)
    try:
        return _stage_s(asyncio.run(_evaluate(path, [(GPU, False)]))[0][1])
    finally:
        if old is None:
            os.environ.pop("TRITON_CACHE_DIR")
        else:
            os.environ["TRITON_CACHE_DIR"] = old


def measure(path: Path, rounds: int) -> str:
    """One table row for ``path``."""
    new = statistics.median(_cold_stage(path, True) for _ in range(rounds))
    first = _cold_stage(path, False)
    runs = [(GPU, False)] + [(gpu, True) for _ in range(rounds) for gpu in ("none", GPU)]
    done = asyncio.run(_evaluate(path, runs))
    cold_cached = _stage_s(done[0][1])
    off = [wall for (wall, _), (gpu, _) in zip(done[1:], runs[1:], strict=True) if gpu == "none"]
    on = [(wall, m) for (wall, m), (gpu, _) in zip(done[1:], runs[1:], strict=True) if gpu == GPU]
    warm_cached = statistics.median(_stage_s(m) for _, m in on)
    off_s, on_s = statistics.median(off), statistics.median(w for w, _ in on)
    share = statistics.median(_stage_s(m) / w for w, m in on) * 100
    return (
        f"| {path.name} | {new:.2f} | {first:.2f} | {warm_cached:.3f} / {cold_cached:.3f} "
        f"| {off_s:.2f} / {on_s:.2f} | {share:.1f}% | {(on_s - off_s) / off_s * 100:+.0f}% |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("ACCELOPT_SHAPE", "small")
    paths = [Path(p) for p in args.paths] or sorted((ROOT / "examples" / "triton").glob("*.py"))
    load = os.getloadavg()
    print(f"nproc {os.cpu_count()}, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(
        "| kernel | stage new kernel s | stage first run s | stage cached s (warm / cold "
        "worker) | eval off / on s (warm) | stage share of eval | added wall |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path in paths:
        print(measure(path, args.rounds), flush=True)
    load = os.getloadavg()
    print(f"load after {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
