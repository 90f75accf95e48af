"""Re-timing of finalists: every candidate that enters the beam is timed a second time in a fresh
process, in the background (overlapping the next iteration), and the slower of its two medians is
kept. Only then does a step count: a re-timed candidate still faster than its (re-timed) parent
past the noise margin is a confirmed slow->fast step (for the best-so-far and the memory).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search.candidate import Candidate, is_faster
from accelopt_core.search.report import Tally
from accelopt_core.search.trials import Trials


def slower_of(first: EvalResult, second: EvalResult) -> EvalResult:
    """The re-timing rule (conservative): of two ok timings the one with the slower median;
    otherwise ``second`` (a failed re-timing makes the candidate fail)."""
    if first.ok and second.ok:
        return second if (second.latency_ms or 0) > (first.latency_ms or 0) else first
    return second


class Retimer:
    """Re-times beam entrants in background tasks.

    Args:
        trials: evaluates again and holds the candidates (to find parents).
        tally: counts a failed re-timing as ``retime_<status>``.
        margin: the noise margin (fraction) of :func:`is_faster`.
        on_confirmed: called with ``(parent, child)`` when a re-timed child is still faster than
            its parent, after the parent's own re-timing ended.
    """

    def __init__(
        self,
        trials: Trials,
        tally: Tally,
        margin: float,
        on_confirmed: Callable[[Candidate, Candidate], None],
    ) -> None:
        self._trials = trials
        self._tally = tally
        self._margin = margin
        self._on_confirmed = on_confirmed
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
        result = await self._trials.evaluate_again(cand)
        if not (cand.result.ok and result.ok):
            self._tally.count_failure(f"retime_{result.status}")
        cand.result = slower_of(cand.result, result)
        cand.retimed = True
        self._trials.set_speedup(cand)
        if cand.result.ok:
            await self._confirm(cand)

    async def _confirm(self, cand: Candidate) -> None:
        """Call ``on_confirmed`` when ``cand`` still beats its parent (re-timed first)."""
        parent = self._trials.parent_of(cand)
        if parent is None or not parent.latency_ms or not cand.latency_ms:
            return
        if parent.parent_id is not None and parent.id in self._tasks:
            await asyncio.shield(self._tasks[parent.id])
        if is_faster(cand, parent, self._margin):
            self._on_confirmed(parent, cand)
