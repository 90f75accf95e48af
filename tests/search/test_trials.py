"""Evaluating candidates (accelopt_core.search.trials): the baseline, each distinct candidate once
(also when duplicates arrive concurrently), failures counted by status, one event per first
evaluation (real evaluations: worker subprocesses, Triton interpreter on CPU); and the
implausible-speedup rule (a scripted evaluator, tests/search/scripted.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile, parse_kernel_file
from accelopt_core.onsite.sandbox.policy import NOTE_PREFIX
from accelopt_core.proposers import Plan
from accelopt_core.search import Candidate, CandidateEvaluated, SearchEvent
from accelopt_core.search.events import Subscribers
from accelopt_core.search.report import Tally
from accelopt_core.search.trials import Trials
from accelopt_core.settings import Settings
from tests.search.conftest import candidate_source
from tests.search.scripted import ScriptedEvaluator, sequence, timed

SOFTMAX = Path(__file__).resolve().parents[2] / "examples" / "triton" / "softmax.py"


@pytest.mark.slow
async def test_each_distinct_candidate_is_evaluated_once(
    add_file: KernelFile, evaluator: Evaluator
) -> None:
    events: list[SearchEvent] = []
    subscribers = Subscribers()
    subscribers.add(events.append)
    tally = Tally()
    trials = Trials(evaluator, add_file, "add", tally, subscribers)
    warmed: list[bool] = []

    async def warm() -> None:
        warmed.append(True)

    base = await trials.evaluate_baseline(warm())
    assert warmed == [True] and base.result.ok and base.speedup == 1.0
    assert trials.baseline is base and trials.seen == {base.id: base}

    plan = Plan(title="BLOCK 128", text="")
    ok = candidate_source("ok_block128")
    same = ok.replace("def add(x, y):", "def add(x,   y):  # the same code")
    first, again, wrong = await asyncio.gather(
        trials.evaluate(Candidate.child(base, plan, ok, 1)),
        trials.evaluate(Candidate.child(base, plan, same, 1)),
        trials.evaluate(Candidate.child(base, plan, candidate_source("zeros"), 1)),
    )
    assert again is None and tally.duplicates == 1
    assert first is not None and first.result.ok and first.latency_ms is not None
    assert base.latency_ms is not None
    assert first.speedup == pytest.approx(base.latency_ms / first.latency_ms)
    assert trials.parent_of(first) is base and trials.parent_of(base) is None
    assert wrong is not None and wrong.result.status == "incorrect" and wrong.speedup is None
    assert tally.evaluated == 3 and tally.failures == {"incorrect": 1}
    evaluated = [e.candidate for e in events if isinstance(e, CandidateEvaluated)]
    assert len(events) == len(evaluated) == 3
    assert evaluated[0] is base and {c.id for c in evaluated[1:]} == {first.id, wrong.id}


def speedup_setup(
    child_results: list, timing: str = "interpreter", **trials_kw: float
) -> tuple[ScriptedEvaluator, Trials, str]:
    """Trials over softmax with a scripted evaluator: baseline 100 ms, one child whose
    evaluations return ``child_results`` in turn."""
    original = parse_kernel_file(SOFTMAX.read_text(), "softmax.py")
    child_src = original.source.replace("BLOCK_SIZE = 16", "BLOCK_SIZE = 128")
    assert child_src != original.source
    table = {original.source: [timed(100.0, timing)], child_src: child_results}
    evaluator = ScriptedEvaluator(sequence(table))
    trials = Trials(evaluator, original, "softmax", Tally(), Subscribers(), **trials_kw)
    return evaluator, trials, child_src


async def _child(trials: Trials, source: str) -> Candidate:
    async def nothing() -> None:
        return None

    base = await trials.evaluate_baseline(nothing())
    child = await trials.evaluate(Candidate.child(base, Plan(title="p", text=""), source, 1))
    assert child is not None
    return child


async def test_an_implausible_interpreter_speedup_is_evaluated_again_then_rejected() -> None:
    evaluator, trials, src = speedup_setup([timed(1.0), timed(0.9)])  # 100x, then 111x
    child = await _child(trials, src)
    assert [c.kind for c in evaluator.calls if c.source == src] == ["evaluate", "retime"]
    assert child.result.status == "rejected" and child.result.rule == "implausible speedup"
    message = child.result.message or ""
    assert "111x" in message and "100x" in message and "50x" in message
    assert child.latency_ms is None and child.speedup is None
    assert trials._tally.failures == {"rejected": 1} and trials._tally.evaluated == 3


async def test_a_plausible_or_gpu_timed_speedup_stands_without_a_second_evaluation() -> None:
    evaluator, trials, src = speedup_setup([timed(10.0)])  # 10x under the interpreter
    child = await _child(trials, src)
    assert child.result.ok and child.speedup == 10.0
    assert [c.kind for c in evaluator.calls if c.source == src] == ["evaluate"]
    evaluator, trials, src = speedup_setup([timed(1.0, "cuda")], timing="cuda")  # 100x on a GPU
    child = await _child(trials, src)
    assert child.result.ok and child.speedup == 100.0 and len(evaluator.sources("retime")) == 0


async def test_an_implausible_speedup_that_does_not_stand_keeps_the_slower_timing() -> None:
    evaluator, trials, src = speedup_setup([timed(1.0), timed(4.0)])  # 100x, then 25x
    child = await _child(trials, src)
    assert child.result.ok and child.latency_ms == 4.0 and child.speedup == 25.0
    assert evaluator.sources("retime") == [src]


async def test_the_bound_comes_from_the_evaluation_settings() -> None:
    settings = Settings.model_validate({"evaluation": {"maxInterpreterSpeedup": 200}})
    evaluator, _, src = speedup_setup([timed(1.0)])
    evaluator.settings = settings  # type: ignore[attr-defined]
    trials = Trials(evaluator, parse_kernel_file(SOFTMAX.read_text()), "softmax", Tally(),
                    Subscribers())  # fmt: skip
    assert trials.max_interpreter_speedup == 200.0
    child = await _child(trials, src)
    assert child.result.ok and child.speedup == 100.0 and evaluator.sources("retime") == []
    _, explicit, _ = speedup_setup([timed(1.0)], max_interpreter_speedup=5.0)
    assert explicit.max_interpreter_speedup == 5.0
    assert Settings().evaluation.max_interpreter_speedup == 50.0


async def test_a_baseline_that_ran_unconfined_puts_the_sandbox_warning_in_the_report() -> None:
    """Issue 34: the target says on every result when candidates ran unconfined; the search's
    report carries it once (the baseline runs on the same target as every candidate)."""
    note = NOTE_PREFIX + "candidates ran with no network isolation (turned off)"
    original = parse_kernel_file(SOFTMAX.read_text(), "softmax.py")
    unconfined = dataclasses.replace(timed(100.0), warnings=["other", note])
    tally = Tally()
    for _ in range(2):  # two searches of one session share nothing but the target
        evaluator = ScriptedEvaluator(sequence({original.source: [unconfined]}))
        trials = Trials(evaluator, original, "softmax", tally, Subscribers())
        await trials.evaluate_baseline(asyncio.sleep(0))
    assert tally.warnings == [note]
    confined = Tally()
    evaluator = ScriptedEvaluator(sequence({original.source: [timed(100.0)]}))
    await Trials(evaluator, original, "softmax", confined, Subscribers()).evaluate_baseline(
        asyncio.sleep(0)
    )
    assert confined.warnings == []
