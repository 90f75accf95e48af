"""Re-timing of finalists (accelopt_core.search.retime): A/B rounds interleaved with the parent,
the majority rule, what a rejected step is denied, and the launch-parameter rule under CPU timing.

The rules are tested with a scripted evaluator (tests/search/scripted.py: given results, the
order of evaluations recorded); one slow test runs the rounds as real evaluations (worker
subprocesses, Triton interpreter on CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile, parse_kernel_file
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan
from accelopt_core.proposers.offline import Change, OfflineProposer, apply_changes, find_tunables
from accelopt_core.search import BeamSearch, Candidate, NewBest, rank_verified, select_beam
from accelopt_core.search.events import Subscribers
from accelopt_core.search.report import Tally
from accelopt_core.search.retime import Retimer, ab_verdict, slower_of
from accelopt_core.search.trials import Trials
from accelopt_core.settings import SearchSettings
from tests.search.conftest import candidate_source
from tests.search.scripted import ScriptedEvaluator, sequence, timed

SOFTMAX = Path(__file__).resolve().parents[2] / "examples" / "triton" / "softmax.py"
MARGIN = 0.03


def test_slower_of_keeps_the_slower_median_and_lets_a_failure_win() -> None:
    fast, slow = timed(1.0), timed(1.5)
    assert slower_of(fast, slow) is slow and slower_of(slow, fast) is slow
    crashed = EvalResult.failure("runtime_error", "illegal memory access")
    assert slower_of(fast, crashed) is crashed


def test_the_majority_rule_and_when_rounds_stop() -> None:
    assert ab_verdict(2, 2, 3) is True  # 2 of 3 won: decided, no third round
    assert ab_verdict(1, 2, 3) is None  # 1 won, 1 lost: the third round decides
    assert ab_verdict(0, 2, 3) is False  # 2 lost: 2 of 3 out of reach
    assert ab_verdict(1, 3, 3) is False  # 1 of 3 is noise
    assert ab_verdict(1, 1, 1) is True and ab_verdict(0, 1, 1) is False
    assert ab_verdict(2, 3, 4) is None and ab_verdict(2, 4, 4) is False  # 2 of 4: no majority
    assert ab_verdict(3, 3, 4) is True


def softmax_file() -> KernelFile:
    return parse_kernel_file(SOFTMAX.read_text(), "softmax.py")


def setup(
    table: dict[str, list[EvalResult]], original: KernelFile | None = None
) -> tuple[ScriptedEvaluator, Trials, Tally]:
    """Trials over ``original`` (softmax) with a scripted evaluator, its baseline evaluated."""
    original = original or softmax_file()
    evaluator = ScriptedEvaluator(sequence(table))
    tally = Tally()
    trials = Trials(evaluator, original, "softmax", tally, Subscribers())
    return evaluator, trials, tally


async def evaluated_child(trials: Trials, source: str, parent: Candidate) -> Candidate:
    child = await trials.evaluate(Candidate.child(parent, Plan(title="p", text=""), source, 1))
    assert child is not None
    return child


def block_child(source: str, new: int) -> str:
    """``source`` with its BLOCK_SIZE literal set to ``new`` (a real change)."""
    block = next(p for p in find_tunables(source, "softmax_kernel") if p.kind == "block")
    return apply_changes(source, [Change(block, new)])


def warps_child(source: str, new: int) -> str:
    """``source`` with only its num_warps literal set to ``new``."""
    warps = next(p for p in find_tunables(source, "softmax_kernel") if p.kind == "num_warps")
    return apply_changes(source, [Change(warps, new)])


async def retime(
    trials: Trials, tally: Tally, *cands: Candidate, rounds: int = 3
) -> list[tuple[str, str]]:
    """Re-time ``cands`` to the end; the confirmed ``(parent id, child id)`` steps in order."""
    confirmed: list[tuple[str, str]] = []
    retimer = Retimer(trials, tally, MARGIN, lambda s, f: confirmed.append((s.id, f.id)), rounds)
    for cand in cands:
        retimer.start(cand)
    await retimer.settle()
    return confirmed


async def test_noisy_wins_are_not_confirmed_and_consistent_ones_are() -> None:
    base_src = SOFTMAX.read_text()
    noisy_src, steady_src = block_child(base_src, 128), block_child(base_src, 256)
    # The first timings of both children say 2x; only the steady one keeps winning its rounds.
    table = {
        base_src: [timed(10.0)],
        noisy_src: [timed(5.0), timed(5.0), timed(10.0), timed(11.0)],  # won 1 of 3 rounds
        steady_src: [timed(5.0), timed(6.0), timed(11.0), timed(6.5)],  # won 2 of 3 rounds
    }
    evaluator, trials, tally = setup(table)
    base = await trials.evaluate_baseline(_nothing())
    noisy = await evaluated_child(trials, noisy_src, base)
    steady = await evaluated_child(trials, steady_src, base)
    assert noisy.speedup == steady.speedup == 2.0
    beam, improved, _ = select_beam([base], [noisy, steady], trials.seen, 3, MARGIN)
    assert {c.id for c in improved} == {noisy.id, steady.id}  # both entered the beam

    confirmed = await retime(trials, tally, noisy, steady)
    assert confirmed == [(base.id, steady.id)]
    assert noisy.retimed and not noisy.confirmed and noisy.ab_ratios == [0.5, 1.0, 1.1]
    assert steady.retimed and steady.confirmed and steady.ab_ratios == [0.6, 1.1, 0.65]
    # Each keeps the slower of its first median and its rounds' median.
    assert noisy.latency_ms == 10.0 and steady.latency_ms == 6.5
    assert [c.id for c in rank_verified(trials.seen.values(), base, MARGIN)] == [steady.id]
    # 3 rounds each (1 - 1 after two rounds left both open): 2 x 3 x (parent, child).
    assert len(evaluator.sources("round")) == 12 and tally.evaluated == 3 + 12


async def test_rounds_stop_once_decided_and_pairs_run_interleaved() -> None:
    base_src = SOFTMAX.read_text()
    a_src, b_src = block_child(base_src, 128), block_child(base_src, 256)
    table = {
        base_src: [timed(10.0)],
        a_src: [timed(5.0)],  # wins every round: decided after 2 of 3
        b_src: [timed(5.0), timed(12.0)],  # loses every round: decided after 2 of 3
    }
    evaluator, trials, tally = setup(table)
    base = await trials.evaluate_baseline(_nothing())
    a = await evaluated_child(trials, a_src, base)
    b = await evaluated_child(trials, b_src, base)
    evaluator.calls.clear()
    assert await retime(trials, tally, a) == [(base.id, a.id)]
    # One child: parent, child, parent, child, each started after the one before it ended.
    assert evaluator.sources() == [base_src, a_src] * 2
    calls = evaluator.calls
    assert all(x.ended < y.started for x, y in zip(calls, calls[1:], strict=False))
    assert a.ab_ratios == [0.5, 0.5] and a.confirmed

    evaluator.calls.clear()
    assert await retime(trials, tally, b) == [] and not b.confirmed
    assert evaluator.sources() == [base_src, b_src] * 2 and b.ab_ratios == [1.2, 1.2]


async def test_concurrent_retimings_still_pair_each_child_with_a_parent_timing() -> None:
    base_src = SOFTMAX.read_text()
    srcs = [block_child(base_src, v) for v in (32, 128, 512)]
    table = {base_src: [timed(10.0)], **{s: [timed(5.0)] for s in srcs}}
    evaluator, trials, tally = setup(table)
    base = await trials.evaluate_baseline(_nothing())
    kids = [await evaluated_child(trials, s, base) for s in srcs]
    evaluator.calls.clear()
    confirmed = await retime(trials, tally, *kids)  # all re-timed at once
    assert sorted(confirmed) == sorted((base.id, k.id) for k in kids)
    parents = [c for c in evaluator.calls if c.source == base_src]
    for kid in kids:
        mine = [c for c in evaluator.calls if c.source == kid.source]
        assert len(mine) == 2
        # Before each of its evaluations, a parent evaluation ran after its previous one.
        previous_end = 0
        for call in mine:
            assert any(previous_end < p.started and p.ended < call.started for p in parents)
            previous_end = call.ended


async def test_a_step_is_confirmed_only_after_its_parents_retiming() -> None:
    base_src = SOFTMAX.read_text()
    mid_src = block_child(base_src, 128)
    leaf_src = block_child(mid_src, 512)
    table = {
        base_src: [timed(10.0)],
        mid_src: [timed(5.0)],
        leaf_src: [timed(2.0)],
    }
    _, trials, tally = setup(table)
    base = await trials.evaluate_baseline(_nothing())
    mid = await evaluated_child(trials, mid_src, base)
    leaf = await evaluated_child(trials, leaf_src, mid)
    # The leaf is started first, and still reported after its parent.
    assert await retime(trials, tally, leaf, mid) == [(base.id, mid.id), (mid.id, leaf.id)]


async def test_a_failed_round_fails_the_candidate() -> None:
    base_src = SOFTMAX.read_text()
    flaky_src = block_child(base_src, 128)
    table = {
        base_src: [timed(10.0)],
        flaky_src: [timed(5.0), EvalResult.failure("incorrect", "max abs error 1.0")],
    }
    evaluator, trials, tally = setup(table)
    base = await trials.evaluate_baseline(_nothing())
    flaky = await evaluated_child(trials, flaky_src, base)
    assert await retime(trials, tally, flaky) == []
    assert flaky.retimed and not flaky.confirmed and flaky.result.status == "incorrect"
    assert flaky.speedup is None and tally.failures == {"retime_incorrect": 1}
    assert evaluator.sources("round") == [base_src, flaky_src]  # no round after a failure


async def test_a_kept_round_median_replaces_only_the_timing() -> None:
    """A round checks one seed (``Evaluator.time_again``): when its median is kept, the
    candidate's verdict (message, errors, derived inputs) stays its first evaluation's."""
    base_src = SOFTMAX.read_text()
    child_src = block_child(base_src, 128)
    used = {"used": [{"name": "x \u00d7 63.4 (large)"}], "skipped": []}
    first = EvalResult(
        status="ok", latency_ms=5.0, p20_ms=4.9, p80_ms=5.1, timing="interpreter",
        max_abs_error=1e-7, message="correct on 5 seeds x 3 shapes",
        metrics={"derived_inputs": used, "shapes": [{"latency_ms": 5.0}]},
    )  # fmt: skip

    def round_result(ms: float) -> EvalResult:
        return EvalResult(
            status="ok", latency_ms=ms, p20_ms=ms - 0.1, p80_ms=ms + 0.1, timing="interpreter",
            max_abs_error=0.0, message="correct on 1 seeds x 3 shapes",
            metrics={"derived_inputs": {"used": [], "skipped": []}, "shapes": [{"latency_ms": ms}]},
        )  # fmt: skip

    table = {base_src: [timed(10.0)], child_src: [first, round_result(6.0), round_result(6.5)]}
    evaluator, trials, tally = setup(table)
    base = await trials.evaluate_baseline(_nothing())
    child = await evaluated_child(trials, child_src, base)
    assert await retime(trials, tally, child) == [(base.id, child.id)]
    result = child.result
    assert (result.latency_ms, result.p20_ms, result.p80_ms) == (6.5, 6.4, 6.6)  # the rounds'
    assert result.metrics["shapes"] == [{"latency_ms": 6.5}]
    assert result.message == first.message and result.max_abs_error == 1e-7
    assert result.metrics["derived_inputs"] == used
    assert [c.kind for c in evaluator.calls if c.source == child_src] == [
        "evaluate",
        "round",
        "round",
    ]


@pytest.mark.parametrize("timing", ["interpreter", "simulated", "cuda"])
async def test_a_num_warps_only_child_is_credited_only_under_gpu_timing(timing: str) -> None:
    base_src = SOFTMAX.read_text()
    warps_src = warps_child(base_src, 4)
    # Scripted 2x faster in every evaluation and every round.
    table = {base_src: [timed(10.0, timing)], warps_src: [timed(5.0, timing)]}
    evaluator, trials, tally = setup(table)
    base = await trials.evaluate_baseline(_nothing())
    child = await evaluated_child(trials, warps_src, base)
    _, improved, regressions = select_beam([base], [child], trials.seen, 2, MARGIN)
    confirmed = await retime(trials, tally, child)
    ranked = rank_verified(trials.seen.values(), base, MARGIN)
    if timing == "cuda":
        assert not child.ignored_by_timing and improved == [child]
        assert confirmed == [(base.id, child.id)] and ranked == [child]
    else:
        assert child.ignored_by_timing and "counted as equal" in child.result.warnings[-1]
        assert improved == [] and regressions == [] and confirmed == [] and ranked == []
        assert not child.confirmed and evaluator.sources("round") == []  # no rounds spent


async def test_a_search_ranks_only_what_the_rounds_confirm() -> None:
    """A whole BeamSearch (offline proposer) whose every rewrite looks 2x faster at first but
    only BLOCK_SIZE 16 -> 128 keeps winning its rounds: one ranked candidate, one new best."""
    original = softmax_file()
    base_src = original.source
    good = block_child(base_src, 128)

    def script(source: str, n: int) -> EvalResult:
        if source == base_src or n == 0:
            return timed(10.0 if source == base_src else 5.0)
        return timed(5.0 if source == good else 10.0)

    evaluator = ScriptedEvaluator(script)
    settings = SearchSettings(iterations=1, beam_width=8, plans_per_candidate=8, retime_rounds=3)
    search = BeamSearch(original, "softmax_kernel", settings, evaluator, OfflineProposer(seed=0))
    bests: list[str] = []
    search.subscribe(lambda e: bests.append(e.candidate.id) if isinstance(e, NewBest) else None)
    report = await search.run()
    children = [c for c in search._trials.seen.values() if c.parent_id is not None]
    assert good in {c.source for c in children} and len(children) == 8
    assert all("num_warps" not in c.plan_title for c in children)  # interpreter timing
    assert [c.source for c in report.candidates] == [good] and report.candidates[0].rank == 1
    assert bests == [report.candidates[0].id]
    assert all(c.retimed and (c.confirmed == (c.source == good)) for c in children)


@pytest.mark.slow
async def test_rounds_are_real_evaluations(add_file: KernelFile, evaluator: Evaluator) -> None:
    tally = Tally()
    trials = Trials(evaluator, add_file, "add", tally, Subscribers())
    trials.baseline = Candidate.baseline(add_file.source, timed(1e6))
    trials.seen[trials.baseline.id] = trials.baseline
    lucky = Candidate.child(trials.baseline, Plan(title="zeros", text=""), zeros_source(), 1)
    lucky.result = timed(1.0)  # its first evaluation was lucky; the output is wrong
    trials.seen[lucky.id] = lucky
    assert await retime(trials, tally, lucky) == []
    assert lucky.retimed and lucky.result.status == "incorrect" and not lucky.confirmed
    assert lucky.latency_ms is None and lucky.speedup is None
    assert tally.failures == {"retime_incorrect": 1} and tally.evaluated == 2


def zeros_source() -> str:
    """tests/candidates/zeros.py: an add that writes zeros (fails its first round)."""
    return candidate_source("zeros")


async def _nothing() -> None:
    return None
