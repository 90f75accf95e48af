"""The T iterations of a beam search, pipelined.

Each parent of the beam runs its own family (:meth:`Proposals.family`: plans, samples,
evaluations) as a task. The next beam is still :func:`~accelopt_core.search.selection.select_beam`
over all of an iteration's children, but a candidate that every still-possible outcome keeps in
the next beam (:class:`~accelopt_core.search.selection.Round`) starts its next iteration's family
at once (a new child), or once its own children are all settled (a member that stays), while
the iteration's last samples are still being evaluated; the others start when the iteration
ends. So iteration i+1's planner calls can overlap iteration i's last evaluations, and
the beam, the children and their order are those of the unpipelined loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from accelopt_core.search.budget import Budget, BudgetSpent
from accelopt_core.search.candidate import Candidate
from accelopt_core.search.events import IterationStarted, Subscribers
from accelopt_core.search.selection import Round
from accelopt_core.search.tasks import cancel_all, gather_all
from accelopt_core.settings import SearchSettings

#: ``family(parent, iteration, round)``: the correct children of ``parent`` (Proposals.family).
Family = Callable[[Candidate, int, Round], Awaitable[list[Candidate]]]


class Iterations:
    """Runs the iterations of one search.

    Args:
        family: proposes and evaluates one parent's children (:meth:`Proposals.family`).
        select: picks the next beam from the beam and all of an iteration's children (and
            starts the entrants' re-timing).
        settings: B, N, K, T and the noise margin.
        known: every candidate by id (``Trials.seen``).
        budget: checked before each iteration (and before starting one early).
        events: receives :class:`IterationStarted` when an iteration's first family starts.

    Attributes:
        iterations_run: iterations whose children were all evaluated.
    """

    def __init__(
        self,
        family: Family,
        select: Callable[[list[Candidate], list[Candidate]], list[Candidate]],
        settings: SearchSettings,
        known: dict[str, Candidate],
        budget: Budget,
        events: Subscribers,
    ) -> None:
        self._family = family
        self._select = select
        self._settings = settings
        self._known = known
        self._budget = budget
        self._events = events
        self._rounds: dict[int, Round] = {}
        self._tasks: dict[int, dict[str, asyncio.Task[list[Candidate]]]] = {}
        self.iterations_run = 0
        self._closed = False

    async def run(self, baseline: Candidate) -> list[Candidate]:
        """Iterate from the beam ``[baseline]``; the last beam. Every family still running when
        this ends (a budget, cancellation, an error) is cancelled and awaited.

        Raises:
            BudgetSpent, asyncio.CancelledError: from the budget's checkpoints.
        """
        beam = [baseline]
        try:
            for iteration in range(1, self._settings.iterations + 1):
                self._budget.check()
                children = await self._iteration(beam, iteration)
                self.iterations_run = iteration
                beam = self._select(beam, children)
        finally:
            self._closed = True
            await cancel_all(t for tasks in self._tasks.values() for t in tasks.values())
        return beam

    async def _iteration(self, beam: list[Candidate], iteration: int) -> list[Candidate]:
        """Start the families not started early, seal the round, and wait for every child (in
        beam order, then plan and sample order)."""
        members = {m.id for m in beam}
        tasks = self._tasks.setdefault(iteration, {})
        for cid in [c for c in tasks if c not in members]:  # never happens: certainty is exact
            tasks.pop(cid).cancel()
        for parent in beam:
            self._start(parent, iteration)
        self._round(iteration).seal(beam, lambda cand: self._early(cand, iteration + 1))
        batches = await gather_all(*(tasks[p.id] for p in beam))
        return [c for batch in batches for c in batch]

    def _round(self, iteration: int) -> Round:
        if iteration not in self._rounds:
            s = self._settings
            self._rounds[iteration] = Round(s.beam_width, s.noise_margin, self._known)
        return self._rounds[iteration]

    def _start(self, parent: Candidate, iteration: int) -> None:
        """Start ``parent``'s family in ``iteration`` unless it runs already; the iteration's
        first family announces the iteration."""
        tasks = self._tasks.setdefault(iteration, {})
        if parent.id in tasks:
            return
        if not tasks:
            self._events.emit(IterationStarted(iteration, self._settings.iterations))
        s = self._settings
        round_ = self._round(iteration)
        round_.expect(s.plans_per_candidate * s.samples_per_plan)
        tasks[parent.id] = asyncio.create_task(self._family(parent, iteration, round_))

    def _early(self, cand: Candidate, iteration: int) -> None:
        """``cand`` is certain to be in the beam of ``iteration``: start its family now, or, for a
        member still proposing children of its own in the iteration before, as soon as they are
        all settled. Not past the last iteration, after the search ended, or when the budget
        would stop it anyway."""
        if iteration > self._settings.iterations or self._closed:
            return
        own = self._tasks.get(iteration - 1, {}).get(cand.id)
        if own is not None and not own.done():
            own.add_done_callback(lambda task: self._after_own(task, cand, iteration))
            return
        try:
            self._budget.check()
        except (BudgetSpent, asyncio.CancelledError):
            return  # the check at the iteration's start stops the search
        self._start(cand, iteration)

    def _after_own(
        self, own: asyncio.Task[list[Candidate]], cand: Candidate, iteration: int
    ) -> None:
        if not own.cancelled() and own.exception() is None:
            self._early(cand, iteration)
