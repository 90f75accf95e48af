"""Evaluating candidates (accelopt_core.search.trials): the baseline, each distinct candidate once
(also when duplicates arrive concurrently), failures counted by status, one event per first
evaluation. Real evaluations (worker subprocesses, Triton interpreter on CPU)."""

from __future__ import annotations

import asyncio

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile
from accelopt_core.proposers import Plan
from accelopt_core.search import Candidate, CandidateEvaluated, SearchEvent
from accelopt_core.search.events import Subscribers
from accelopt_core.search.report import Tally
from accelopt_core.search.trials import Trials
from tests.search.conftest import candidate_source


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
