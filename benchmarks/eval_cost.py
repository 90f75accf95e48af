"""Wall time of one evaluation per example (issue 10: the cost of the adversarial-proof judge).

Each example of ``examples/triton/*.py`` and ``examples/nki/*.py`` is evaluated ``--repeat``
times as its own candidate (candidate = original file) through the real
:class:`~accelopt_core.evaluation.evaluator.Evaluator` and the ``local`` target with cold workers
(``evaluation.warmWorkers: false``: a fresh Python, ``import torch, triton`` and the candidate
per evaluation), no evaluation cache, the default evaluation settings (5 seeds, 25 ms warm-up,
100 ms of repetitions), one evaluation at a time. Prints a table: example, status, median and
min/max seconds per evaluation (wall time around ``Evaluator.evaluate``, static gate included).
An example whose evaluation cannot run here (an NKI example without the Neuron SDK) is listed
with its status and message instead of a time.

Only public APIs that exist since commit 7f1570e are used (Settings, make_target, Evaluator), so
the same script measures an older checkout: ``git archive 7f1570e | tar -x -C /tmp/before`` then
``PYTHONPATH=/tmp/before python benchmarks/eval_cost.py`` (the script imports ``accelopt_core``
from PYTHONPATH first when it is set, else from this checkout).

Usage (from the repository root): ``python benchmarks/eval_cost.py [--repeat 3] [--only softmax]``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))

from accelopt_core.evaluation.evaluator import Evaluator  # noqa: E402
from accelopt_core.settings import Settings  # noqa: E402
from accelopt_core.targets import make_target  # noqa: E402


def bench_entry(source: str) -> str | None:
    """The launcher's name: the ``"entry"`` value of the module-level ``BENCH`` dict, or None."""
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "BENCH" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            for key, value in zip(node.value.keys, node.value.values, strict=False):
                if isinstance(key, ast.Constant) and key.value == "entry":
                    if isinstance(value, ast.Name):
                        return value.id
    return None


async def measure(path: Path, repeat: int) -> tuple[str, list[float], str]:
    """(status of the last evaluation, wall seconds of each evaluation, message) of ``path``,
    evaluated ``repeat`` times on a fresh local target with cold workers."""
    source = path.read_text()
    entry = bench_entry(source)
    if entry is None:
        return "no harness", [], "no BENCH entry"
    settings = Settings.model_validate({"evaluation": {"warmWorkers": False}})
    target = make_target(settings)
    evaluator = Evaluator(target, settings, None)
    times: list[float] = []
    status, message = "?", ""
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = await evaluator.evaluate(
                source, source, entry, use_cache=False, source_name=path.name
            )
            times.append(time.perf_counter() - t0)
            status, message = result.status, (result.message or "")
            if status != "ok":
                break
    finally:
        await target.close()
    return status, times, message


def main() -> None:
    """Parse the arguments, measure every example, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="evaluations per example")
    parser.add_argument("--only", default="", help="substring of the examples to measure")
    args = parser.parse_args()
    os.environ.setdefault("ACCELOPT_SHAPE", "small")
    examples = sorted((ROOT / "examples" / "triton").glob("*.py")) + sorted(
        (ROOT / "examples" / "nki").glob("*.py")
    )
    import accelopt_core

    print(f"accelopt_core from {Path(accelopt_core.__file__).parent}; repeat {args.repeat}")
    print(f"| {'example':<22} | status | median s/eval | min–max s | n |")
    print("| --- | --- | --- | --- | --- |")
    for path in examples:
        name = f"{path.parent.name}/{path.name}"
        if args.only not in name:
            continue
        status, times, message = asyncio.run(measure(path, args.repeat))
        if status == "ok" and times:
            spread = f"{min(times):.2f}–{max(times):.2f}"
            row = f"{statistics.median(times):.2f} | {spread} | {len(times)}"
        else:
            row = f"— | {message[:60]} | {len(times)}"
        print(f"| {name:<22} | {status} | {row} |", flush=True)


if __name__ == "__main__":
    main()
