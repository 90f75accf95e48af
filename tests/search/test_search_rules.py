"""The beam's selection and ranking rules (pure functions of accelopt_core.search)."""

from __future__ import annotations

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search import Candidate, candidate_id, is_faster, rank_verified, select_beam


def cand(
    cid: str, latency: float | None, parent: str | None = "base", retimed: bool = True
) -> Candidate:
    result = (
        EvalResult(status="ok", latency_ms=latency, timing="interpreter")
        if latency is not None
        else EvalResult.failure("incorrect", "max abs error 1.0")
    )
    return Candidate(cid, f"# {cid}", parent, f"plan {cid}", "", result, 1, retimed=retimed)


def test_children_enter_only_past_the_noise_margin() -> None:
    base = cand("base", 10.0, parent=None)
    known = {"base": base}
    slight = cand("slight", 9.8)  # 2% faster: inside a 3% margin
    clear = cand("clear", 9.0)  # 10% faster
    beam, improved, regressions = select_beam([base], [slight, clear], known, width=4, margin=0.03)
    assert [c.id for c in improved] == ["clear"]
    assert [c.id for c in beam] == ["clear", "base"]
    assert regressions == []


def test_beam_is_elitist_parent_stays_until_beaten() -> None:
    base = cand("base", 10.0, parent=None)
    known = {"base": base}
    slower = cand("slower", 12.0)
    wrong = cand("wrong", None)
    beam, improved, regressions = select_beam([base], [slower, wrong], known, width=2, margin=0.03)
    assert [c.id for c in beam] == ["base"]
    assert improved == []
    assert [(p.id, c.id) for p, c in regressions] == [("base", "slower")]


def test_beam_keeps_the_best_width_and_merges_duplicates() -> None:
    a = cand("a", 10.0, parent=None)
    b = cand("b", 8.0, parent=None)
    known = {"a": a, "b": b}
    kids = [cand("x", 5.0, parent="a"), cand("y", 7.5, parent="b"), cand("x", 5.0, parent="a")]
    beam, improved, _ = select_beam([a, b], kids, known, width=2, margin=0.03)
    assert [c.id for c in beam] == ["x", "y"]
    assert len(improved) == 3  # both copies of x improved on a, but x enters the beam once


def test_improvement_is_judged_against_the_parent_not_the_baseline() -> None:
    base = cand("base", 10.0, parent=None)
    parent = cand("p", 5.0)
    known = {"base": base, "p": parent}
    child = cand("c", 6.0, parent="p")  # faster than the baseline, slower than its parent
    beam, improved, regressions = select_beam([parent, base], [child], known, width=3, margin=0.03)
    assert improved == []
    assert [c.id for c in beam] == ["p", "base"]
    assert regressions[0][1].id == "c"


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


def spread(
    cid: str, median: float, p20: float, p80: float, parent: str | None = "base"
) -> Candidate:
    result = EvalResult(status="ok", latency_ms=median, p20_ms=p20, p80_ms=p80, timing="cuda")
    return Candidate(cid, f"# {cid}", parent, cid, "", result, 1, retimed=True)


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
