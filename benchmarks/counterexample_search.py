"""Cost and power of the counterexample search (issue 52, item 3), under the Triton interpreter.

For each harness of ``benchmarks/derived_inputs.py`` (the single-shape softmax and
``examples/triton/*.py``), through the real :class:`~accelopt_core.evaluation.evaluator.
Evaluator` and the ``local`` target (warm workers, default evaluation settings, no cache):

- ``eval s``: one candidate evaluation (the file as its own candidate, checked on the
  baseline's used derived inputs), median of ``--rounds``;
- ``search s (first)``: the search on the same source, the first of the search (it probes the
  baseline's verdicts on the examples too, once per search);
- ``search s (next)``: the search on it again (the baseline's verdicts reused): what every
  later candidate faster than its parent pays, once;
- ``examples``, ``usable``, ``calls / budget``: what it drew, what the baseline was correct on,
  the candidate's checked calls against its budget (twice one evaluation's).

With ``--power``: how often the search finds the short-row softmax without the max of
tests/counterexample/kernels.py (correct on every derived input the judge checks) over seeds
1..N, with the seconds of each search.

Usage (from the repository root): ``python benchmarks/counterexample_search.py [--rounds 3]
[--only softmax] [--power 10]``.
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from derived_inputs import harnesses  # noqa: E402

from accelopt_core.evaluation.counterexample import Falsifier, Space  # noqa: E402
from accelopt_core.evaluation.derived import used_inputs  # noqa: E402
from accelopt_core.evaluation.evaluator import Evaluator  # noqa: E402
from accelopt_core.settings import Settings  # noqa: E402
from accelopt_core.targets import make_target  # noqa: E402


def _falsifier(evaluator: Evaluator, source: str, entry: str, base, seed: int) -> Falsifier:
    async def probe(src: str, examples: list[dict]) -> list[dict]:
        result = await evaluator.evaluate(source, src, entry, derived_probe=examples)
        found = (result.metrics or {}).get("derived_probe")
        return found if isinstance(found, list) else [{"verdict": "unusable"}] * len(examples)

    space = Space.of(base)
    deferred = (base.metrics.get("derived_inputs") or {}).get("deferred") or []
    budget = 2 * (evaluator.settings.evaluation.seeds + len(used_inputs(base)))
    return Falsifier(probe, source, space, deferred=deferred, seed=seed, budget=budget)


async def cost(source: str, entry: str, rounds: int) -> dict:
    """The figures of one harness (module docstring)."""
    settings = Settings()
    target = make_target(settings)
    evaluator = Evaluator(target, settings, None)
    try:
        base = await evaluator.evaluate(source, source, entry, use_cache=False)
        if not base.ok or Space.of(base) is None:
            return {"failed": f"{base.status}: {base.message[:80]}"}
        used = used_inputs(base)
        evals = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            await evaluator.evaluate(source, source, entry, use_cache=False, derived_inputs=used)
            evals.append(time.perf_counter() - t0)
        falsifier = _falsifier(evaluator, source, entry, base, 1234)
        t0 = time.perf_counter()
        await falsifier.search(source)
        first = time.perf_counter() - t0
        nexts, outcome = [], None
        for _ in range(rounds):
            t0 = time.perf_counter()
            outcome = await falsifier.search(source)
            nexts.append(time.perf_counter() - t0)
        return {
            "eval": statistics.median(evals),
            "first": first,
            "next": statistics.median(nexts),
            "outcome": outcome,
        }
    finally:
        await target.close()


async def power(n: int) -> None:
    """The search's hits on the short-row softmax without the max over seeds 1..n."""
    from tests.counterexample.kernels import CANDIDATES
    from tests.values.kernels import SOFTMAX_FILE

    settings = Settings()
    target = make_target(settings)
    evaluator = Evaluator(target, settings, None)
    try:
        base = await evaluator.evaluate(SOFTMAX_FILE, SOFTMAX_FILE, "softmax", use_cache=False)
        hits = 0
        for seed in range(1, n + 1):
            falsifier = _falsifier(evaluator, SOFTMAX_FILE, "softmax", base, seed)
            t0 = time.perf_counter()
            outcome = await falsifier.search(CANDIDATES["short_rows_no_max"])
            found = outcome.counterexample
            hits += found is not None
            shown = (found or "not found")[:110]
            print(f"seed {seed}: {time.perf_counter() - t0:.1f} s, {outcome.calls} calls: {shown}")
        print(f"found with {hits} of {n} seeds")
    finally:
        await target.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="substring of the harnesses to measure")
    parser.add_argument("--power", type=int, default=0, help="seeds of the power run (0: none)")
    args = parser.parse_args()
    os.environ.setdefault("ACCELOPT_SHAPE", "small")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{platform.machine()}, {os.cpu_count()} cores, load {load:.1f}; rounds {args.rounds}")
    if args.power:
        asyncio.run(power(args.power))
        return
    print("| harness | eval s | search s (first) | search s (next) | next / eval "
          "| examples | usable | calls / budget |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, (source, entry) in harnesses().items():
        if args.only not in name:
            continue
        found = asyncio.run(cost(source, entry, args.rounds))
        if "failed" in found:
            print(f"| {name} | {found['failed']} | | | | | | |", flush=True)
            continue
        out = found["outcome"]
        print(
            f"| {name} | {found['eval']:.2f} | {found['first']:.2f} | {found['next']:.2f} | "
            f"{found['next'] / found['eval']:.2f} | {out.tried} | {out.usable} | "
            f"{out.calls} / {out.budget} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
