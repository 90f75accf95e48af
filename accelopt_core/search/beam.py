"""Beam search over candidate kernels, as in AccelOpt (arXiv 2511.15915, Sec. 3), with its gaps closed.

One iteration, for a beam of at most B candidates:

1. the planner proposes N plans for every candidate in the beam (each parent on its own, no parent
   waits for another's plans);
2. the executor implements each plan K times (all samples at once); each sample is evaluated as soon as
   its plan's samples exist, as target slots free up; a sample that fails to compile or is incorrect
   gets ``search.fixer_attempts`` repair tries (:mod:`.proposing`);
3. the new beam is the best B of the old beam and the children that beat their parent's latency by
   more than the noise margin (elitist: a parent keeps its measured latency and stays unless beaten;
   :func:`~accelopt_core.search.selection.select_beam`). A candidate that is certain to be in the new
   beam whatever the iteration's remaining samples turn out to be starts its next iteration at once,
   overlapping those samples' evaluations (:mod:`.iterations`).

Improvements on AccelOpt's scripts: identical candidates (same normalized source) are evaluated once
(:mod:`.trials`); a speedup counts only past ``search.noise_margin`` (:mod:`.candidate`); every
candidate that enters the beam is re-timed (the slower of its two medians is kept) before it counts as
a finalist or reaches the memory, and that re-timing overlaps the next iteration instead of stalling
it (:mod:`.retime`); LLM calls and evaluations run concurrently; tokens and cost are counted per role;
the search honours cancellation within a second and stops at a budget (iterations, tokens, wall time;
:mod:`.budget`).

Every failed sample or candidate leaves a record with its stage and reason in the report
(:class:`~accelopt_core.search.report.FailedCandidate`) and a :class:`CandidateFailed` event; with a
run store, the run's folder keeps the report, the plans and every agent call (:mod:`.recording`).
A proposer that can make no call (missing or rejected API key) stops the search before the
baseline is timed, or at the next checkpoint, with that one reason.

Every slow->fast step confirmed by re-timing is summarized into an experience of the optimization
memory (positive); a correct rewrite that made the kernel slower is stored as a negative experience,
and a candidate the judge caught (``rejected`` with a trust ``rule``, at its first evaluation or at
its re-timing) as a ``reward-hack: <rule>`` negative (:mod:`.learning`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from accelopt_core.kernelfile import KernelFile, KernelInfo
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Proposer
from accelopt_core.search.budget import Budget, BudgetSpent
from accelopt_core.search.candidate import Candidate, is_faster, rank_verified
from accelopt_core.search.events import (
    CandidateEvaluated,
    CandidateFailed,
    NewBest,
    SearchEvent,
    SearchFinished,
    SearchStarted,
    Subscribers,
)
from accelopt_core.search.iterations import Iterations
from accelopt_core.search.learning import Learner
from accelopt_core.search.proposing import Contexts, Proposals
from accelopt_core.search.recording import RunRecorder
from accelopt_core.search.report import SearchReport, Tally, explored_records, token_table
from accelopt_core.search.retime import Retimer
from accelopt_core.search.selection import select_beam
from accelopt_core.search.tasks import cancel_all
from accelopt_core.search.trials import Trials
from accelopt_core.settings import SearchSettings


def _kernel_and_entry(original: KernelFile, kernel_name: str) -> tuple[KernelInfo, str]:
    """The kernel to optimize and its launcher that the harness times; ValueError when the file
    has no such kernel or no complete harness whose entry launches it."""
    kernel = original.kernel(kernel_name)
    harness = original.harness
    if harness is None or not harness.complete:
        problems = "; ".join(p.message for p in (harness.problems if harness else []))
        detail = f" ({problems})" if problems else " (get_inputs, reference and BENCH are needed)"
        raise ValueError(
            f"{original.path}: cannot optimize {kernel_name}: the file has no complete harness"
            + detail
        )
    entry = original.entry_for(kernel_name)
    if not entry:
        raise ValueError(
            f"{original.path}: no launcher of {kernel_name} is the harness entry (BENCH['entry'])"
        )
    return kernel, entry


class BeamSearch:
    """One beam search over one kernel of one file.

    Args:
        original: the user's file, parsed (:func:`accelopt_core.kernelfile.parse_kernel_file`).
        kernel_name: the kernel to optimize; its launcher (the harness entry) is what gets timed.
        settings: B, N, K, T, margin, budgets.
        evaluator: :class:`accelopt_core.evaluation.Evaluator` bound to a target.
        proposer: the offline proposer or the LLM agents.
        memory: an :class:`accelopt_core.memory.OptimizationMemory`, or None to search without one.
        results: an :class:`accelopt_core.memory.ResultsStore` where the report is saved, or None.
        target_name: shown in the report.
        runs: an :class:`accelopt_core.memory.runs.RunStore` keeping the run's folder, or None.

    Raises:
        ValueError: the file has no such kernel, or no complete harness whose entry launches it.
    """

    def __init__(
        self,
        original: KernelFile,
        kernel_name: str,
        settings: SearchSettings,
        evaluator: Any,
        proposer: Proposer,
        *,
        memory: Any = None,
        results: Any = None,
        target_name: str = "local",
        runs: Any = None,
    ) -> None:
        self.kernel, self.entry = _kernel_and_entry(original, kernel_name)
        self.original = original
        self.settings = settings
        self.evaluator = evaluator
        self.proposer = proposer
        self.memory = memory
        self.results = results
        self.target_name = target_name
        self._events = Subscribers()
        self._tally = Tally(on_failure=lambda f: self._events.emit(CandidateFailed(f)))
        self._budget = Budget(
            settings, lambda: proposer.usage(), getattr(proposer, "unusable", None)
        )
        self._recorder = RunRecorder.for_search(runs, self, proposer) if runs is not None else None
        self._trials = Trials(evaluator, original, self.entry, self._tally, self._events)
        contexts = Contexts(
            original,
            self.kernel,
            self.entry,
            self._trials,
            self._tally,
            memory=memory,
            top_k=settings.memory_top_k,
        )
        self._proposals = Proposals(
            proposer, settings, contexts, self._trials, self._budget, self._tally
        )
        self._learner = Learner(memory, proposer, self.kernel, contexts, self._tally)
        self._events.add(self._on_evaluated)
        self._retimer = Retimer(
            self._trials,
            self._tally,
            settings.noise_margin,
            self._confirmed,
            rounds=settings.retime_rounds,
        )
        self._iterations = Iterations(
            self._proposals.family,
            self._select,
            settings,
            self._trials.seen,
            self._budget,
            self._events,
        )
        self._inner: asyncio.Task[SearchReport] | None = None
        self._best: Candidate | None = None
        self._report_made: SearchReport | None = None
        self._stopped_reason = "completed"

    # -- public API ---------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[SearchEvent], None]) -> None:
        """Call ``callback(event)`` for every event, on the event loop; exceptions it raises are
        logged and ignored."""
        self._events.add(callback)

    def cancel(self) -> None:
        """Stop the search: in-flight LLM calls and evaluations are cancelled (worker processes
        killed) and :meth:`run` returns the partial report with ``stopped_reason='cancelled'``."""
        self._budget.cancel_requested = True
        if self._inner is not None and not self._inner.done():
            self._inner.cancel()

    @property
    def best(self) -> Candidate | None:
        """The best verified candidate so far (None before any improvement)."""
        return self._best

    async def run(self, *, wait_for_memory: bool = True) -> SearchReport:
        """Run the search to the end, a budget, or :meth:`cancel`, and return its report.

        With ``wait_for_memory=False`` it returns as soon as the ranking is final (all finalists
        re-timed) and the last summaries are still being written to the memory; call
        :meth:`drain` before the process ends. The report is saved in the results store (when
        one was given) unless it was cancelled. Cancelling the task that awaits ``run`` also
        stops the search and re-raises.
        """
        self._budget.start()
        if self._recorder is not None:
            await self._recorder.start()
        self._inner = asyncio.create_task(self._search())
        try:
            report = await self._inner
        except asyncio.CancelledError:
            if not self._budget.cancel_requested:  # the caller's task was cancelled
                self._inner.cancel()
                with contextlib.suppress(BaseException):
                    await self._inner
                await self._cancel_background()
                await self._close_recorder()
                raise
            self._stopped_reason = "cancelled"
            await self._cancel_background()
            report = self._report()
        self._report_made = report
        if self._recorder is not None:
            await self._recorder.finish(report)
        if wait_for_memory:
            report.memory_added = await self.drain()
        self._events.emit(SearchFinished(report))
        if self.results is not None and report.stopped_reason != "cancelled":
            await report.save(self.results)
        return report

    async def drain(self) -> int:
        """Wait for the pending memory writes (summaries of confirmed slow->fast steps and
        negative experiences); the report's token totals then take in the summarizer's calls,
        and the run's folder is closed. Returns the number of experiences added by this
        search."""
        try:
            return await self._learner.drain()
        finally:
            if self._report_made is not None:
                tokens, cost = token_table(self._budget.usage())
                self._report_made.tokens, self._report_made.cost_usd = tokens, cost
                self._report_made.experiences = list(self._learner.experiences)
            await self._close_recorder()

    async def _close_recorder(self) -> None:
        if self._recorder is not None:
            await self._recorder.close()

    # -- the search -----------------------------------------------------------------------------

    async def _search(self) -> SearchReport:
        try:
            async with self._budget.wall_clock():
                self._budget.check()  # an unusable proposer (no API key) stops before anything
                baseline = await self._trials.evaluate_baseline(self._proposals.warm())
                if not baseline.result.ok:
                    self._stopped_reason = f"baseline {baseline.result.status}"
                    return self._report()
                self._events.emit(SearchStarted(baseline, self.settings.iterations))
                await self._iterations.run(baseline)
                await self._retimer.settle()
                self._learn_hacks()
        except BudgetSpent as stop:
            self._stopped_reason = str(stop)
            await self._cancel_background()
        return self._report()

    def _select(self, beam: list[Candidate], children: list[Candidate]) -> list[Candidate]:
        """Apply :func:`select_beam`; entering children are re-timed in the background and
        correct-but-slower children become negative experiences."""
        new_beam, _improved, regressions = select_beam(
            beam, children, self._trials.seen, self.settings.beam_width, self.settings.noise_margin
        )
        self._learn_hacks()  # beam members the judge caught at their re-timing
        for parent, child in regressions:
            self._learner.learn(parent, child, positive=False)
        for cand in new_beam:
            self._retimer.start(cand)
        return new_beam

    def _confirmed(self, slow: Candidate, fast: Candidate) -> None:
        """Re-timing confirmed that ``fast`` beats its parent ``slow``: a new best when it also
        beats the best so far, and a positive experience for the memory."""
        best = self._best or self._trials.baseline  # a new best beats the baseline too
        if best is None or is_faster(fast, best, self.settings.noise_margin):
            self._best = fast
            self._events.emit(NewBest(fast, fast.speedup or 1.0))
        self._learner.learn(slow, fast, positive=True)

    def _on_evaluated(self, event: SearchEvent) -> None:
        """A candidate the judge caught at its first evaluation becomes a reward-hack
        experience (the baseline, which has no parent, never does)."""
        if isinstance(event, CandidateEvaluated):
            parent = self._trials.parent_of(event.candidate)
            if parent is not None:
                self._learner.learn_hack(parent, event.candidate)

    def _learn_hacks(self) -> None:
        """Every candidate met so far that the judge caught (also at a re-timing, which
        replaces a finalist's result) becomes a reward-hack experience, once."""
        for cand in list(self._trials.seen.values()):
            parent = self._trials.parent_of(cand)
            if parent is not None:
                self._learner.learn_hack(parent, cand)

    async def _cancel_background(self) -> None:
        await cancel_all([*self._learner.pending(), *self._retimer.pending()])

    def _report(self) -> SearchReport:
        base = self._trials.baseline
        if base is None:  # stopped before the baseline was evaluated
            reason = f"{self._stopped_reason} before the baseline was timed"
            base = Candidate.baseline(
                self.original.source, EvalResult.failure("timeout", reason), retimed=False
            )
        verified = rank_verified(self._trials.seen.values(), base, self.settings.noise_margin)
        tokens, cost_usd = token_table(self._budget.usage())
        return SearchReport(
            path=self.original.path,
            kernel_name=self.kernel.name,
            entry=self.entry,
            baseline=base,
            candidates=verified,
            original_source=self.original.source,
            target=self.target_name,
            timing=base.result.timing,
            proposer=getattr(self.proposer, "name", type(self.proposer).__name__),
            stopped_reason=self._stopped_reason,
            iterations_run=self._iterations.iterations_run,
            evaluated=self._tally.evaluated,
            duplicates=self._tally.duplicates,
            failures=dict(self._tally.failures),
            failed_candidates=list(self._tally.failed),
            tokens=tokens,
            cost_usd=cost_usd,
            wall_s=self._budget.elapsed_s(),
            memory_added=self._learner.added,
            experiences=list(self._learner.experiences),
            explored=explored_records(self._trials.seen.values(), verified, self.original),
            warnings=list(self._tally.warnings) + list(getattr(self.proposer, "notes", ())),
            closure=self.original.context.digest if self.original.context is not None else "",
        )
