"""Issue 52's property-based search through the real evaluator and worker (Triton interpreter on
CPU): :class:`~accelopt_core.evaluation.counterexample.Falsifier` against the softmax baseline.

A rewrite that is correct on the harness's inputs and on every derived input the baseline's
evaluation checks (tests/counterexample/kernels.py: a short-row fast path without the max) is
found wrong by the search, on a small input it shrank, the same one for the same seed; the
legitimate rewrites and the baseline itself are not; the search stays within its budget.
"""

from __future__ import annotations

import asyncio

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.evaluation.counterexample import SEARCH_RULE, Falsifier, Space
from accelopt_core.evaluation.derived import used_inputs
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.targets import make_target
from tests.counterexample.kernels import CANDIDATES
from tests.search.conftest import fast_settings
from tests.values.kernels import SOFTMAX_FILE

pytestmark = pytest.mark.slow

SEEDS = 3


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def judged(loop) -> dict:
    """The baseline's result, each candidate's first evaluation, and a Falsifier."""

    async def main() -> dict:
        settings = fast_settings(seeds=SEEDS)
        target = make_target(settings)
        evaluator = Evaluator(target, settings, None)
        base = await evaluator.evaluate(SOFTMAX_FILE, SOFTMAX_FILE, "softmax", use_cache=False)
        used = used_inputs(base)
        firsts = {
            name: await evaluator.evaluate(SOFTMAX_FILE, src, "softmax", derived_inputs=used)
            for name, src in CANDIDATES.items()
        }
        return {"evaluator": evaluator, "target": target, "base": base, "firsts": firsts}

    found = loop.run_until_complete(main())
    yield found
    loop.run_until_complete(found["target"].close())


def _falsifier(judged: dict, seed: int = 1234) -> tuple[Falsifier, list[int]]:
    evaluator: Evaluator = judged["evaluator"]
    calls: list[int] = []

    async def probe(source: str, examples: list[dict]) -> list[dict]:
        calls.append(len(examples) if source != SOFTMAX_FILE else 0)
        result = await evaluator.evaluate(SOFTMAX_FILE, source, "softmax", derived_probe=examples)
        return result.metrics["derived_probe"]

    space = Space.of(judged["base"])
    assert space is not None
    budget = 2 * (SEEDS + len(used_inputs(judged["base"])))
    return Falsifier(probe, SOFTMAX_FILE, space, seed=seed, budget=budget), calls


def test_the_fast_path_without_max_passes_every_fixed_check(judged) -> None:
    first: EvalResult = judged["firsts"]["short_rows_no_max"]
    assert first.ok, first.message  # the judge's fixed list cannot see it


def test_the_search_finds_it_on_a_shrunk_input_and_says_so(judged, loop) -> None:
    falsifier, calls = _falsifier(judged)
    outcome = loop.run_until_complete(falsifier.search(CANDIDATES["short_rows_no_max"]))
    assert outcome.counterexample is not None, outcome
    message = outcome.counterexample
    assert message.startswith(f"{SEARCH_RULE}, seed 1234: x ")
    assert "NaN/Inf in the output where the reference is finite" in message
    assert "×1" in message.split(":")[1]  # shrunk to rows of one column
    assert sum(calls) <= falsifier.budget and outcome.calls <= falsifier.budget
    assert outcome.usable <= outcome.tried and outcome.examples
    # the candidate's result becomes incorrect with that message, the search's record kept
    refuted = falsifier.refute(judged["firsts"]["short_rows_no_max"], outcome)
    assert refuted.status == "incorrect" and refuted.rule == SEARCH_RULE
    assert refuted.message == message
    assert refuted.metrics["derived_inputs"]["search"]["seed"] == 1234
    # reproducible: the same seed finds the same input, with the baseline's verdicts reused
    again, _ = _falsifier(judged)
    assert loop.run_until_complete(
        again.search(CANDIDATES["short_rows_no_max"])
    ).counterexample == (message)


@pytest.mark.parametrize("name", ["short_rows_with_max", "block64"])
def test_legitimate_rewrites_survive_the_search(judged, loop, name: str) -> None:
    assert judged["firsts"][name].ok, judged["firsts"][name].message
    falsifier, _ = _falsifier(judged)
    outcome = loop.run_until_complete(falsifier.search(CANDIDATES[name]))
    assert outcome.counterexample is None, outcome.counterexample
    assert outcome.usable >= 4 and outcome.calls <= falsifier.budget
    kept = falsifier.refute(judged["firsts"][name], outcome)
    assert kept.ok and kept.metrics["derived_inputs"]["search"]["tried"] == outcome.tried


def test_the_baseline_never_disagrees_with_itself(judged, loop) -> None:
    falsifier, _ = _falsifier(judged, seed=7)
    outcome = loop.run_until_complete(falsifier.search(SOFTMAX_FILE))
    assert outcome.counterexample is None and outcome.seed == 7
