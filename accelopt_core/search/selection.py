"""The beam's elitist selection rule, and which members of the next beam are already certain
while an iteration's last samples are still being proposed or evaluated.

:func:`select_beam` is the rule (a pure function). :class:`Round` follows one iteration's
children as they settle and names the candidates that every still-possible outcome keeps in
the next beam, so that their next iteration can start before the iteration ends
(:mod:`.iterations`); the beam that :func:`select_beam` picks at the end is unchanged by this.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from accelopt_core.search.candidate import Candidate, is_faster


def select_beam(
    beam: list[Candidate],
    children: list[Candidate],
    known: dict[str, Candidate],
    width: int,
    margin: float,
) -> tuple[list[Candidate], list[Candidate], list[tuple[Candidate, Candidate]]]:
    """The elitist selection rule of the beam (pure function).

    A child is an improvement when it :func:`is_faster` than its parent; it is a regression when
    its parent :func:`is_faster` than it. A child whose only change is one its timing cannot
    see (``ignored_by_timing``: ``num_warps`` under the Triton interpreter) is neither, whatever
    its latency says: it counts as equal to its parent. The new beam is
    the ``width`` fastest of the old beam and the improvements (a parent keeps its measured latency,
    so it stays unless beaten); ties keep the earlier candidate.

    Args:
        beam: the current beam; children: this iteration's evaluated candidates;
        known: every candidate by id (to find parents); width: beam width B;
        margin: noise margin (fraction, e.g. 0.03).

    Returns:
        ``(new_beam, improvements, regressions)`` where regressions are ``(parent, child)`` pairs.
    """
    improved: list[Candidate] = []
    regressions: list[tuple[Candidate, Candidate]] = []
    for child in children:
        parent = known.get(child.parent_id or "")
        if parent is None or parent.latency_ms is None or child.latency_ms is None:
            continue
        if child.ignored_by_timing:
            continue
        if is_faster(child, parent, margin):
            improved.append(child)
        elif is_faster(parent, child, margin):
            regressions.append((parent, child))
    pool: dict[str, Candidate] = {}
    for cand in [*beam, *improved]:
        pool.setdefault(cand.id, cand)
    ranked = sorted(
        (c for c in pool.values() if c.latency_ms is not None), key=lambda c: c.latency_ms or 0.0
    )
    return ranked[:width], improved, regressions


class Round:
    """One iteration's children as they settle, and the next beam's certain members.

    Every sample still to come is counted in ``pending`` (an upper bound: each parent starts with
    N x K, lowered when fewer plans or samples come back, minus one per settled sample). A
    candidate of the pool (the beam and the improvements so far) is certain to be in the next
    beam when the candidates at least as fast as it plus ``pending`` are fewer than the width:
    no outcome still possible can push it out. Certainty is only decided once the round is
    :meth:`seal`-ed (every parent of the beam counted) and every beam member is re-timed (a
    re-timing can still change a member's latency).

    Args:
        width: beam width B; margin: noise margin (fraction); known: every candidate by id.
    """

    def __init__(self, width: int, margin: float, known: dict[str, Candidate]) -> None:
        self._width = width
        self._margin = margin
        self._known = known
        self._beam: list[Candidate] | None = None
        self._on_certain: Callable[[Candidate], None] | None = None
        self._children: list[Candidate] = []
        self._announced: set[str] = set()
        self.pending = 0

    def expect(self, n: int) -> None:
        """``n`` more (or, negative, fewer) samples may still come."""
        self.pending += n
        self._announce()

    def settle(self, child: Candidate | None) -> None:
        """One sample ended: ``child`` is its correct candidate, or None (no code, a failure,
        a duplicate)."""
        self.pending -= 1
        if child is not None:
            self._children.append(child)
        self._announce()

    def seal(self, beam: list[Candidate], on_certain: Callable[[Candidate], None]) -> None:
        """Every parent of ``beam`` is counted: from now on call ``on_certain(candidate)``, once
        per candidate, as soon as it is certain to be in the next beam."""
        self._beam = beam
        self._on_certain = on_certain
        self._announce()

    def certain(self) -> list[Candidate]:
        """The candidates certain to be in the next beam, fastest first (none before
        :meth:`seal` or while a beam member awaits its re-timing)."""
        beam = self._beam
        if beam is None or self.pending >= self._width or not all(m.retimed for m in beam):
            return []  # (with ``pending`` >= B samples to come, nothing is certain yet)
        pool, _, _ = select_beam(
            beam, self._children, self._known, len(beam) + len(self._children), self._margin
        )
        latencies = sorted(c.latency_ms or 0.0 for c in pool)
        out = []
        for cand in pool:
            ahead = bisect.bisect_right(latencies, cand.latency_ms or 0.0) - 1  # not itself
            if ahead + self.pending < self._width:
                out.append(cand)
        return out

    def _announce(self) -> None:
        if self._on_certain is None:
            return
        for cand in self.certain():
            if cand.id not in self._announced:
                self._announced.add(cand.id)
                self._on_certain(cand)
