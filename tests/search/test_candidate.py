"""Candidates and their rules (accelopt_core.search.candidate): identity, the noise rule, the
report's ranking, and the two ways a candidate is made."""

from __future__ import annotations

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan
from accelopt_core.search import Candidate, candidate_id, is_faster, rank_verified, select_beam
from tests.search.builders import cand, spread


def test_ranking_keeps_only_correct_retimed_improvements_best_first() -> None:
    base = cand("base", 10.0, parent=None)
    fast = cand("fast", 2.0)
    faster_unconfirmed = cand("unconfirmed", 1.0, retimed=False)
    wrong = cand("wrong", None)
    within_noise = cand("noise", 9.9)
    mid = cand("mid", 5.0)
    ranked = rank_verified([base, fast, faster_unconfirmed, wrong, within_noise, mid], base, 0.03)
    assert [(c.id, c.rank) for c in ranked] == [("fast", 1), ("mid", 2)]


def test_candidate_id_ignores_comments_and_formatting() -> None:
    one = "def f(x):\n    return x + 1  # add one\n"
    two = "def f(x):\n\n    return (x + 1)\n"
    other = "def f(x):\n    return x + 2\n"
    assert candidate_id(one) == candidate_id(two)
    assert candidate_id(one) != candidate_id(other)


def test_overlapping_timing_spreads_are_noise_not_speedup() -> None:
    parent = spread("base", 10.0, 9.0, 11.0, parent=None)
    noisy = spread("noisy", 9.0, 8.0, 9.5)  # 10% faster median, but p80 9.5 >= parent p20 9.0
    clean = spread("clean", 8.0, 7.9, 8.1)
    assert not is_faster(noisy, parent, 0.03)
    assert is_faster(clean, parent, 0.03)
    assert not is_faster(parent, clean, 0.03)
    beam, improved, regressions = select_beam([parent], [noisy, clean], {"base": parent}, 3, 0.03)
    assert [c.id for c in improved] == ["clean"]
    assert regressions == []  # noisy is neither faster nor clearly slower
    assert [c.id for c in rank_verified([parent, noisy, clean], parent, 0.03)] == ["clean"]


def test_baseline_and_child_factories() -> None:
    timed = EvalResult(status="ok", latency_ms=2.0, timing="interpreter")
    base = Candidate.baseline("def f(x):\n    return x\n", timed)
    assert (base.parent_id, base.plan_title, base.iteration) == (None, "baseline", 0)
    assert base.speedup == 1.0 and base.retimed and base.latency_ms == 2.0
    never_timed = Candidate.baseline(base.source, EvalResult.failure("timeout", "x"), retimed=False)
    assert never_timed.id == base.id and never_timed.speedup is None and not never_timed.retimed

    plan = Plan(title="wider blocks", text="use BLOCK=128")
    child = Candidate.child(
        base, plan, "def f(x):\n    return x  # same\n", 3, tokens=7, fixed=True
    )
    assert child.id == base.id  # same normalized source: the same candidate
    assert (child.parent_id, child.plan_title, child.plan_text) == (base.id, plan.title, plan.text)
    assert (child.iteration, child.tokens, child.fixed) == (3, 7, True)
    assert child.result.status == "timeout" and child.latency_ms is None and not child.retimed


def test_dict_round_trip_carries_the_diff() -> None:
    base = Candidate.baseline("x = 1\n", EvalResult(status="ok", latency_ms=2.0))
    child = Candidate.child(base, Plan(title="t", text="p"), "x = 2\n", 1, tokens=5)
    child.result = EvalResult(status="ok", latency_ms=1.0, timing="interpreter")
    child.speedup, child.rank, child.retimed = 2.0, 1, True
    data = child.to_dict(base.source, "k.py")
    assert data["diff"].startswith("--- ") and "+x = 2" in data["diff"]
    assert data["latency_ms"] == 1.0 and data["correct"] and data["plan"] == "t"
    assert Candidate.from_dict(data) == child
