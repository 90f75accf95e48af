"""Candidates and their rules (accelopt_core.search.candidate): identity, the noise rule, the
report's ranking, and the two ways a candidate is made."""

from __future__ import annotations

import ast

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan
from accelopt_core.search import Candidate, candidate_id, is_faster, rank_verified, select_beam
from accelopt_core.search.candidate import launch_only_change
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
    # ranked only once its own interleaved rounds confirmed it: the spreads compared here were
    # taken at other moments (see test_a_confirmed_chain_ranks_past_a_stale_baseline_spread)
    noisy.confirmed = False
    assert [c.id for c in rank_verified([parent, noisy, clean], parent, 0.03)] == ["clean"]


def test_a_confirmed_chain_ranks_past_a_stale_baseline_spread() -> None:
    """The baseline was timed once, before the search; a step confirmed back to back against
    its parent ranks on the median alone when every step down from the baseline was confirmed,
    never within the noise margin, never through an unconfirmed ancestor."""
    base = spread("base", 10.0, 6.0, 14.0, parent=None)  # timed in a noisy moment
    child = spread("child", 5.0, 4.0, 7.0)  # 2x by the median, spreads overlap
    grandchild = spread("grand", 4.0, 3.0, 6.5, parent="child")
    within = spread("within", 9.8, 9.0, 10.5)  # confirmed, but within the 3% margin
    assert not is_faster(child, base, 0.03) and not is_faster(grandchild, base, 0.03)
    ranked = rank_verified([base, child, grandchild, within], base, 0.03)
    assert [(c.id, c.rank) for c in ranked] == [("grand", 1), ("child", 2)]
    child.confirmed = False  # the middle step's rounds did not confirm it
    ranked = rank_verified([base, child, grandchild, within], base, 0.03)
    assert ranked == []
    orphan = spread("orphan", 4.0, 3.0, 6.5, parent="gone")  # its parent is unknown
    assert rank_verified([base, orphan], base, 0.03) == []
    clear = spread("clear", 4.0, 3.0, 5.0, parent="gone")  # the spread rule alone still ranks
    assert [c.id for c in rank_verified([base, clear], base, 0.03)] == ["clear"]


def test_a_confirmed_chain_ranks_on_its_back_to_back_ratio_past_a_stale_baseline() -> None:
    """The baseline was timed alone before the search; its steps were timed back to back in
    A/B rounds while other evaluations ran. A chain confirmed step by step ranks on the
    product of its steps' median round ratios, and that is its speedup (a clean-clone CI run
    once left a confirmed step of the add kernel unranked against the baseline's median)."""
    base = spread("base", 3.3, 3.2, 3.4, parent=None)  # timed alone, in a quiet moment
    child = spread("child", 3.35, 3.3, 3.5)  # its slower-of latency, timed beside others
    child.ab_ratios = [0.85, 0.55, 0.58]
    grand = spread("grand", 3.3, 3.2, 3.5, parent="child")
    grand.ab_ratios = [0.9, 0.8]
    assert not is_faster(child, base, 0.03) and child.latency_ms > base.latency_ms
    ranked = rank_verified([base, child, grand], base, 0.03)
    assert [(c.id, c.rank) for c in ranked] == [("grand", 1), ("child", 2)]
    assert child.speedup == 1 / 0.58 and abs(grand.speedup - 1 / (0.58 * 0.85)) < 1e-12
    flat = spread("flat", 3.35, 3.3, 3.5)
    flat.ab_ratios = [0.99, 0.98, 0.98]  # within the margin, whatever its rounds said
    unknown = spread("unknown", 3.35, 3.3, 3.5)  # confirmed, but no round ratios kept
    assert rank_verified([base, flat, unknown], base, 0.03) == []
    child.confirmed = False  # an unconfirmed step breaks the chain below it
    assert rank_verified([base, child, grand], base, 0.03) == []


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


LAUNCHER = """
import triton

@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=4, num_stages=2)], key=["n"])
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass

def launch(x, n):
    warps = 8
    k[(n,)](x, n, BLOCK=64, num_warps=warps, num_stages=3)
    return x
"""


def test_launch_only_changes_are_found_on_the_normalized_source() -> None:
    same = LAUNCHER.replace("    return x\n", "    return (x)  # same code\n")
    assert not launch_only_change(LAUNCHER, same)  # no difference at all
    for old, new, expected in [
        ("num_stages=3", "num_stages=1", True),
        ("warps = 8", "warps = 2", True),  # a local passed only as num_warps
        ("num_warps=4, num_stages=2)", "num_warps=8, num_stages=4)", True),  # autotune config
        ("num_stages=3)", "num_stages=3, num_ctas=2, maxnreg=128)", True),  # added keywords
        ("warps = 8", "warps   =   8  # formatting and a comment", False),  # the same code
    ]:
        changed = LAUNCHER.replace(old, new)
        assert changed != LAUNCHER
        assert launch_only_change(LAUNCHER, changed) is expected, new
    assert not launch_only_change(LAUNCHER, LAUNCHER.replace("BLOCK=64,", "BLOCK=128,"))
    both = LAUNCHER.replace("BLOCK=64,", "BLOCK=128,").replace("num_stages=3", "num_stages=1")
    assert not launch_only_change(LAUNCHER, both)
    # A local also read elsewhere is real code: changing it is not a launch-only change.
    shared = LAUNCHER.replace("    return x\n", "    return x * warps\n")
    assert not launch_only_change(shared, shared.replace("warps = 8", "warps = 2"))
    assert not launch_only_change(LAUNCHER, "def (:")
    # The same keyword on a call that is no launch is ordinary code.
    helper = LAUNCHER.replace("    return x\n", "    return scale(x, num_warps=2)\n")
    assert not launch_only_change(helper, helper.replace("num_warps=2)\n", "num_warps=4)\n"))


def test_only_confirmed_steps_are_ranked() -> None:
    base = cand("base", 10.0, parent=None)
    confirmed, rejected, blind = cand("confirmed", 5.0), cand("rejected", 4.0), cand("blind", 3.0)
    rejected.confirmed = False  # re-timed, but its rounds did not confirm it
    blind.ignored_by_timing = True
    ranked = rank_verified([base, confirmed, rejected, blind], base, 0.03)
    assert [c.id for c in ranked] == ["confirmed"]
    data = confirmed.to_dict()
    assert data["confirmed"] and not data["ignored_by_timing"]
    assert Candidate.from_dict(data).confirmed
    old_record = {k: v for k, v in data.items() if k not in ("confirmed", "ab_ratios")}
    old_record["rank"] = None
    assert not Candidate.from_dict(old_record).confirmed  # unranked before issue 10
    old_record["rank"] = 1
    assert Candidate.from_dict(old_record).confirmed


def test_a_parsed_tree_gives_the_same_id_as_the_source() -> None:
    """The proposer's tree stands in for a parse: same id as the (reformatted) source alone."""
    source = "def f(x):\n    return x + 1\n"
    reformatted = "def f(x):  # a comment\n\n    return (x + 1)\n"
    assert candidate_id(source, ast.parse(source)) == candidate_id(reformatted)
    assert candidate_id(source, ast.parse(source)) != candidate_id(source.replace("1", "2"))
