"""The beam's elitist selection rule (accelopt_core.search.selection.select_beam, a pure
function), and which members of the next beam are certain while an iteration still runs
(accelopt_core.search.selection.Round): never one that the final selection drops."""

from __future__ import annotations

import random

from accelopt_core.search import Candidate
from accelopt_core.search.selection import Round, select_beam
from tests.search.builders import cand


def sealed(beam: list[Candidate], width: int, pending: int) -> tuple[Round, list[str]]:
    known = {c.id: c for c in beam}
    round_ = Round(width, 0.03, known)
    round_.expect(pending)
    announced: list[str] = []
    round_.seal(beam, lambda c: announced.append(c.id))
    return round_, announced


def test_nothing_is_certain_before_the_round_is_sealed() -> None:
    base = cand("base", 10.0, parent=None)
    round_ = Round(2, 0.03, {"base": base})
    round_.expect(2)
    round_.settle(None)
    assert round_.certain() == []


def test_the_fastest_is_certain_while_fewer_samples_than_the_width_may_still_come() -> None:
    base = cand("base", 10.0, parent=None)
    round_, announced = sealed([base], width=2, pending=2)
    assert announced == []  # two samples may still both beat the baseline
    fast = cand("fast", 5.0)
    round_._known["fast"] = fast
    round_.settle(fast)
    assert announced == ["fast"]  # one sample left: it cannot push "fast" out of 2 places
    round_.settle(None)
    assert announced == ["fast", "base"]  # all settled: the whole new beam is certain


def test_a_member_awaiting_its_retiming_blocks_certainty() -> None:
    base = cand("base", 10.0, parent=None, retimed=False)
    round_, announced = sealed([base], width=4, pending=0)
    assert announced == [] and round_.certain() == []


def test_children_that_do_not_beat_their_parent_do_not_count() -> None:
    base = cand("base", 10.0, parent=None)
    round_, announced = sealed([base], width=1, pending=3)
    same, slower = cand("same", 9.9), cand("slower", 12.0)
    round_._known.update(same=same, slower=slower)
    round_.settle(same)  # within the noise margin: no improvement
    round_.settle(slower)
    assert announced == []  # the last sample could still beat the baseline
    round_.settle(None)
    assert announced == ["base"]


def test_whatever_the_outcomes_every_certain_candidate_is_selected() -> None:
    rng = random.Random(14)
    early = 0  # announcements made while samples were still pending
    for _ in range(300):
        width = rng.randint(1, 4)
        beam = [cand(f"p{i}", rng.choice([4.0, 6.0, 8.0, 10.0])) for i in range(width)]
        known = {c.id: c for c in beam}
        per_parent = rng.randint(1, 3)
        samples = [(p, i) for p in beam for i in range(per_parent)]
        rng.shuffle(samples)
        round_ = Round(width, 0.03, known)
        round_.expect(len(samples))
        announced: list[Candidate] = []
        round_.seal(beam, announced.append)
        before = len(announced)
        children = []
        for parent, i in samples:
            latency = rng.choice([None, 2.0, 4.0, 5.0, 8.0, 12.0])
            child = cand(f"{parent.id}c{i}", latency, parent=parent.id)
            known[child.id] = child
            children.append(child)
            round_.settle(child if latency is not None else None)
            if round_.pending > 0:
                early += len(announced) - before
                before = len(announced)
        final, _, _ = select_beam(beam, children, known, width, 0.03)
        assert {c.id for c in announced} <= {c.id for c in final}
        certain_at_the_end = {c.id for c in round_.certain()}
        assert certain_at_the_end <= {c.id for c in final}
    assert early > 100  # the rule does start members early, not only at the end


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
