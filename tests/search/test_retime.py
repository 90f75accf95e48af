"""Re-timing of finalists (accelopt_core.search.retime): the slower median is kept, a failed
re-timing fails the candidate, and a step is confirmed only after both sides were re-timed.
The re-timings are real evaluations (worker subprocesses, Triton interpreter on CPU)."""

from __future__ import annotations

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan
from accelopt_core.search import Candidate
from accelopt_core.search.events import Subscribers
from accelopt_core.search.report import Tally
from accelopt_core.search.retime import Retimer, slower_of
from accelopt_core.search.trials import Trials
from tests.search.conftest import candidate_source


def timed(ms: float) -> EvalResult:
    return EvalResult(status="ok", latency_ms=ms, timing="interpreter")


def test_slower_of_keeps_the_slower_median_and_lets_a_failure_win() -> None:
    fast, slow = timed(1.0), timed(1.5)
    assert slower_of(fast, slow) is slow and slower_of(slow, fast) is slow
    crashed = EvalResult.failure("runtime_error", "illegal memory access")
    assert slower_of(fast, crashed) is crashed


def child_of(parent: Candidate, source: str, first_ms: float) -> Candidate:
    """A beam entrant whose first evaluation (given here) said ``first_ms``."""
    cand = Candidate.child(parent, Plan(title=f"plan {first_ms}", text=""), source, 1)
    cand.result = timed(first_ms)
    return cand


def trials_for(add_file: KernelFile, evaluator: Evaluator, tally: Tally) -> Trials:
    trials = Trials(evaluator, add_file, "add", tally, Subscribers())
    trials.baseline = Candidate.baseline(add_file.source, timed(1e6))  # a very slow baseline
    trials.seen[trials.baseline.id] = trials.baseline
    return trials


@pytest.mark.slow
async def test_steps_are_confirmed_after_both_sides_were_retimed(
    add_file: KernelFile, one_slot_evaluator: Evaluator
) -> None:
    tally = Tally()
    trials = trials_for(add_file, one_slot_evaluator, tally)
    base = trials.baseline
    assert base is not None
    mid = child_of(base, candidate_source("ok_block128"), 1e3)
    wide = add_file.source.replace("BLOCK=64", "BLOCK=256")
    leaf = child_of(mid, wide, 1e-3)  # its first timing was luck: far below any real one
    for cand in (mid, leaf):
        trials.seen[cand.id] = cand
    confirmed: list[tuple[str, str, bool]] = []
    retimer = Retimer(trials, tally, 0.03, lambda s, f: confirmed.append((s.id, f.id, s.retimed)))
    # One slot: the leaf is re-timed first, and still confirmed only after its parent's re-timing.
    retimer.start(leaf)
    retimer.start(mid)
    retimer.start(mid)  # already being re-timed: not again
    await retimer.settle()

    assert confirmed == [(base.id, mid.id, True), (mid.id, leaf.id, True)]
    assert tally.evaluated == 2 and tally.failures == {}
    assert mid.retimed and mid.latency_ms == 1e3  # the slower of the two medians
    assert leaf.retimed and leaf.latency_ms is not None and leaf.latency_ms > 1e-3
    assert leaf.speedup == pytest.approx(1e6 / leaf.latency_ms)


@pytest.mark.slow
async def test_a_failed_retiming_fails_the_candidate(
    add_file: KernelFile, evaluator: Evaluator
) -> None:
    tally = Tally()
    trials = trials_for(add_file, evaluator, tally)
    assert trials.baseline is not None
    lucky = child_of(trials.baseline, candidate_source("zeros"), 1.0)
    confirmed: list[Candidate] = []
    retimer = Retimer(trials, tally, 0.03, lambda s, f: confirmed.append(f))
    retimer.start(lucky)
    await retimer.settle()
    assert lucky.retimed and lucky.result.status == "incorrect"
    assert lucky.latency_ms is None and lucky.speedup is None
    assert tally.failures == {"retime_incorrect": 1} and confirmed == []
    retimer.start(lucky)  # re-timed already: nothing more to do
    assert retimer.pending()[0].done()
