"""Re-timing of finalists, interleaved with their parents (issue 10, "Noise is not a speedup").

Every candidate that enters the beam (so every candidate the final ranking can hold) is timed
again in A/B rounds against its parent, in the background (overlapping the next iteration):
each round evaluates the parent, then the child, back to back in fresh evaluations (cache
bypassed; :meth:`~accelopt_core.search.trials.Trials.evaluate_pair`), so both sides of a round
share the same load. On a loaded 2-core machine the same file was timed at 884 ms and at
2,570 ms of wall time; a speedup measured against a parent timed minutes earlier says little,
one that holds round after round against the parent timed alongside it does. (Interpreter
timings have since become CPU time, :mod:`accelopt_core.onsite.runtime.clocks`, which load
moves far less; the rounds still guard GPU timings and what load is left.)

The rule (:func:`ab_verdict`), with R = ``search.retimeRounds`` (default 3) and the noise
margin m (``search.noiseMargin``):

* a round is won when the child's result :func:`~accelopt_core.search.candidate.beats` the
  parent's result of the same round: both ok, child median < (1 - m) x parent median, and the
  p20..p80 spreads do not overlap where both carry them;
* the step is confirmed when the child wins a clear majority of the rounds: more than R / 2
  (2 of 3, 3 of 4, ...). With a majority of won rounds the median of the per-round
  child/parent ratios is below 1 - m too, so a confirmed step holds past the noise margin on
  the ratio median. Rounds stop as soon as the outcome is decided (2 won or 2 lost of 3), which
  gives the same verdict as running all R;
* a child that fails in a round (incorrect, crash, ...) fails: its result becomes that failure;
  a parent that fails in a round ends the rounds unconfirmed.

A round's evaluation (:meth:`~accelopt_core.evaluation.evaluator.Evaluator.time_again`) times
the candidate as its first evaluation did and checks again what the timing needs: seed 1 of
each shape and the outputs of the timed repetitions. The other seeds and the derived inputs were
checked once, by the first evaluation of the same source, which stays the candidate's verdict:
a kept round median replaces only its timing (:func:`~accelopt_core.search.candidate.
with_timing_of`).

A confirmed step (``Candidate.confirmed``) is reported to ``on_confirmed`` (a new best, a
positive experience) once the parent's own re-timing ended; a rejected one is not a step at
all: no positive experience, not a new best, not ranked. The candidate keeps the slower of its
first median and the median of its rounds. A child that differs from its parent only in launch
parameters its timing ignores (``ignored_by_timing``) is never re-timed nor confirmed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search.candidate import Candidate, beats, slower_of, with_timing_of
from accelopt_core.search.report import FailedCandidate, Tally
from accelopt_core.search.trials import Trials

__all__ = ["ABRounds", "Retimer", "ab_verdict", "slower_of"]


@dataclass
class ABRounds:
    """The rounds of one interleaved re-timing.

    Attributes:
        parent / child: each round's result of the parent and of the child, in round order.
        wins: rounds the child won (:func:`~accelopt_core.search.candidate.beats`).
    """

    parent: list[EvalResult] = field(default_factory=list)
    child: list[EvalResult] = field(default_factory=list)
    wins: int = 0

    @property
    def ratios(self) -> list[float]:
        """Child/parent median latency of each round where both are ok and timed."""
        return [
            c.latency_ms / p.latency_ms
            for p, c in zip(self.parent, self.child, strict=True)
            if p.ok and c.ok and c.latency_ms is not None and p.latency_ms
        ]

    def median_child(self) -> EvalResult | None:
        """The child's round result with the median latency (the slower middle one for an
        even count); None when no round of the child is ok."""
        ok = sorted((r for r in self.child if r.ok), key=lambda r: r.latency_ms or 0.0)
        return ok[len(ok) // 2] if ok else None


def ab_verdict(wins: int, played: int, rounds: int) -> bool | None:
    """The majority rule of the interleaved re-timing: True (confirmed) once the child won
    more than ``rounds / 2`` rounds, False once it can no longer reach that, None while
    ``played`` rounds leave it open."""
    need = rounds // 2 + 1
    if wins >= need:
        return True
    if wins + (rounds - played) < need:
        return False
    return None


class Retimer:
    """Re-times beam entrants against their parents in background tasks.

    Args:
        trials: evaluates again and holds the candidates (to find parents).
        tally: counts a failed re-timing as ``retime_<status>`` (the parent's as
            ``retime_parent_<status>``).
        margin: the noise margin (fraction) of each round's comparison.
        on_confirmed: called with ``(parent, child)`` when the rounds confirmed the step,
            after the parent's own re-timing ended.
        rounds: R, the most A/B rounds per candidate (``search.retimeRounds``, >= 1).
    """

    def __init__(
        self,
        trials: Trials,
        tally: Tally,
        margin: float,
        on_confirmed: Callable[[Candidate, Candidate], None],
        rounds: int = 3,
    ) -> None:
        if rounds < 1:
            raise ValueError(f"re-timing needs at least one round (rounds={rounds})")
        self._trials = trials
        self._tally = tally
        self._margin = margin
        self._on_confirmed = on_confirmed
        self._rounds = rounds
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, cand: Candidate) -> None:
        """Re-time ``cand`` in the background, unless it is re-timed or being re-timed."""
        if not cand.retimed and cand.id not in self._tasks:
            self._tasks[cand.id] = asyncio.create_task(self._retime(cand))

    async def settle(self) -> None:
        """Wait for every re-timing started so far (they decide the ranking)."""
        while self._tasks and not all(t.done() for t in self._tasks.values()):
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def pending(self) -> list[asyncio.Task[None]]:
        """The re-timing tasks, for cancellation."""
        return list(self._tasks.values())

    async def _retime(self, cand: Candidate) -> None:
        parent = self._trials.parent_of(cand)
        if parent is None or cand.ignored_by_timing or not cand.result.ok:
            cand.retimed = True  # nothing a re-timing could confirm
            return
        played = await self._play(parent, cand)
        cand.ab_ratios = played.ratios
        failed = next((r for r in played.child if not r.ok), None)
        if failed is not None:
            cand.result = failed
            record = FailedCandidate.of_candidate(cand, retime=True)
            self._tally.record(record, counted_as=f"retime_{failed.status}")
        else:
            median = played.median_child()
            if median is not None:  # the round checked one seed: keep the whole verdict
                cand.result = slower_of(cand.result, with_timing_of(cand.result, median))
        cand.confirmed = failed is None and bool(
            ab_verdict(played.wins, len(played.child), self._rounds)
        )
        cand.retimed = True
        self._trials.set_speedup(cand)
        if cand.confirmed:
            await self._confirm(parent, cand)

    async def _play(self, parent: Candidate, cand: Candidate) -> ABRounds:
        """The A/B rounds, parent then child each round, until the verdict is decided, the
        child fails, or the parent fails (counted as ``retime_parent_<status>``)."""
        played = ABRounds()
        while ab_verdict(played.wins, len(played.child), self._rounds) is None:
            before, after = await self._trials.evaluate_pair(parent, cand)
            played.parent.append(before)
            played.child.append(after)
            if not after.ok:
                break
            if not before.ok:
                record = FailedCandidate.of_candidate(
                    dataclasses.replace(parent, result=before), retime=True
                )
                self._tally.record(record, counted_as=f"retime_parent_{before.status}")
                break
            played.wins += int(beats(after, before, self._margin))
        return played

    async def _confirm(self, parent: Candidate, cand: Candidate) -> None:
        """Call ``on_confirmed`` once the parent's own re-timing (if any) ended."""
        if parent.parent_id is not None and parent.id in self._tasks:
            await asyncio.shield(self._tasks[parent.id])
        self._on_confirmed(parent, cand)
