"""The beam's elitist selection rule (accelopt_core.search.beam.select_beam, a pure function)."""

from __future__ import annotations

from accelopt_core.search import select_beam
from tests.search.builders import cand


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
