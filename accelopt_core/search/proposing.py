"""One iteration's rewrites of one parent: its plans, every sample of every plan concurrently,
each sample evaluated as soon as its plan's samples exist, and ``search.fixer_attempts`` repair
tries for a sample that failed to compile, crashed or was incorrect, or whose reply held no
usable code (the fixer is shown the parse error; issue 30). Every failure is recorded in the
tally (:class:`~accelopt_core.search.report.FailedCandidate`). Every parent of the beam runs its
own family (no parent waits for another's plans); :mod:`.iterations` runs them."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from accelopt_core.kernelfile import KernelFile, KernelInfo
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan, ProposalContext, Proposer, Sample
from accelopt_core.proposers.base import UNUSABLE_REPLY
from accelopt_core.search.budget import Budget
from accelopt_core.search.candidate import FIXABLE, Candidate
from accelopt_core.search.report import FailedCandidate, Tally
from accelopt_core.search.selection import Round
from accelopt_core.search.tasks import gather_all
from accelopt_core.search.trials import Trials
from accelopt_core.settings import SearchSettings

log = logging.getLogger("accelopt.search")
#: Reward-hack experiences the planner is shown as "do not" examples (issue 10).
HACKS_SHOWN = 3


class Contexts:
    """What a proposer sees for one parent: the file, the parent's and the baseline's
    evaluations, and the ``top_k`` positive and negative experiences the optimization memory
    recalls for the parent's source (none without a memory; a memory that cannot be read is a
    warning)."""

    def __init__(
        self,
        original: KernelFile,
        kernel: KernelInfo,
        entry: str,
        trials: Trials,
        tally: Tally,
        *,
        memory: Any = None,
        top_k: int = 0,
    ) -> None:
        self._original = original
        self._kernel = kernel
        self._entry = entry
        self._trials = trials
        self._tally = tally
        self._memory = memory
        self._top_k = top_k

    async def for_parent(self, parent: Candidate, iteration: int) -> ProposalContext:
        """The context for proposing (or summarizing) from ``parent`` in ``iteration``; the
        baseline must have been evaluated."""
        positives, negatives = await self._recall(parent)
        baseline = self._trials.baseline
        assert baseline is not None
        return ProposalContext(
            original=self._original,
            kernel_name=self._kernel.name,
            entry=self._entry,
            parent_source=parent.source,
            parent_result=parent.result,
            baseline_result=baseline.result,
            positives=positives,
            negatives=negatives,
            iteration=iteration,
        )

    async def _recall(self, parent: Candidate) -> tuple[list[Any], list[Any]]:
        """(positives, negatives + up to ``HACKS_SHOWN`` reward-hack experiences); experiences
        timed on the host steer only a search timed on the host (the baseline's timing)."""
        if self._memory is None or self._top_k <= 0:
            return [], []
        base = self._trials.baseline
        timing = base.result.timing if base is not None else None
        mem, backend = self._memory, self._kernel.backend
        try:
            pos, neg = await asyncio.to_thread(
                mem.retrieve_for,
                parent.source,
                backend,
                parent.result.device,
                self._top_k,
                timing=timing,
            )
            hacks = await asyncio.to_thread(mem.hacks_for, parent.source, backend, HACKS_SHOWN)
            return pos, neg + hacks
        except Exception as exc:
            self._tally.warn(f"optimization memory not readable: {exc}")
            return [], []


class Proposals:
    """Asks the proposer for rewrites of a beam and evaluates them (through ``trials``).

    Args:
        proposer: the offline proposer or the LLM agents.
        settings: N (``plans_per_candidate``), K (``samples_per_plan``), ``fixer_attempts``.
        contexts: builds each parent's :class:`ProposalContext`.
        trials: evaluates each new candidate once.
        budget: checked before the samples and before each fix.
        tally: records every failed sample and candidate.
    """

    def __init__(
        self,
        proposer: Proposer,
        settings: SearchSettings,
        contexts: Contexts,
        trials: Trials,
        budget: Budget,
        tally: Tally,
    ) -> None:
        self._proposer = proposer
        self._settings = settings
        self._contexts = contexts
        self._trials = trials
        self._budget = budget
        self._tally = tally

    async def warm(self) -> None:
        """Let the proposer prepare (e.g. build its LLM clients) while the baseline is evaluated.
        An optimization only: a failure here is left for the first real call to report."""
        warm = getattr(self._proposer, "warm", None)
        if warm is not None:
            try:
                await warm()
            except Exception:
                log.debug("proposer warm-up failed", exc_info=True)

    async def family(self, parent: Candidate, iteration: int, round_: Round) -> list[Candidate]:
        """The correct children of ``parent`` in ``iteration``: its N plans, then every sample of
        every plan concurrently, each evaluated as soon as its plan's samples exist. The caller
        counted N x K samples in ``round_``; this lowers the count when fewer come back and
        settles each sample there.

        Raises:
            BudgetSpent, asyncio.CancelledError: from the budget's checkpoints.
        """
        ctx = await self._contexts.for_parent(parent, iteration)
        n, k = self._settings.plans_per_candidate, self._settings.samples_per_plan
        plans = await self._proposer.plan(ctx, n)
        self._budget.check()
        round_.expect((len(plans) - n) * k)
        batches = await gather_all(*(self._run_plan(parent, ctx, p, round_) for p in plans))
        return [c for batch in batches for c in batch]

    async def _run_plan(
        self, parent: Candidate, ctx: ProposalContext, plan: Plan, round_: Round
    ) -> list[Candidate]:
        k = self._settings.samples_per_plan
        samples = await self._proposer.implement(ctx, plan, k)
        round_.expect(len(samples) - k)
        outcomes = await gather_all(
            *(self._run_sample(parent, ctx, plan, s, round_) for s in samples)
        )
        return [c for c in outcomes if c is not None]

    async def _run_sample(
        self, parent: Candidate, ctx: ProposalContext, plan: Plan, sample: Sample, round_: Round
    ) -> Candidate | None:
        """Evaluate one sample (its tokens: the plan's share plus its own), repair it if it
        failed in a fixable way; the correct candidate, or None. Settles it in ``round_``."""
        outcome = await self._outcome(parent, ctx, plan, sample)
        round_.settle(outcome)
        return outcome

    async def _outcome(
        self, parent: Candidate, ctx: ProposalContext, plan: Plan, sample: Sample
    ) -> Candidate | None:
        attempts = self._settings.fixer_attempts
        tokens, fixed = plan.usage.total_tokens + sample.usage.total_tokens, False
        while sample.source is None:  # a reply without usable code: the fixer sees why
            self._tally.record(
                FailedCandidate.of_sample(plan.title, sample, parent, ctx.iteration, fixed=fixed)
            )
            log.info("plan %r produced no code: %s", plan.title, sample.error)
            if attempts <= 0 or sample.stage != "parse":
                return None
            attempts -= 1
            self._budget.check()
            why = f"{UNUSABLE_REPLY}: {sample.error}"
            failure = EvalResult.failure("compile_error", why, rule=UNUSABLE_REPLY)
            again = await self._proposer.fix(ctx, plan, parent.source, failure)
            if again is None:
                return None
            sample, fixed = again, True
            tokens += sample.usage.total_tokens
        child = Candidate.child(
            parent,
            plan,
            sample.source,
            ctx.iteration,
            tokens=tokens,
            tree=sample.tree,
            fixed=fixed,
            call=sample.call,
        )
        cand = await self._trials.evaluate(child)
        if cand is not None:
            cand = await self._repair(cand, parent, ctx, plan, attempts)
        return cand if cand is not None and cand.result.ok else None

    async def _repair(
        self, cand: Candidate, parent: Candidate, ctx: ProposalContext, plan: Plan, attempts: int
    ) -> Candidate | None:
        """Up to ``attempts`` fixes while the latest try failed in a fixable way; the last
        candidate evaluated (None when a fix repeated an earlier candidate). A fix without
        usable code is recorded and ends the repair."""
        tokens = cand.tokens
        attempt: Candidate | None = cand
        for _ in range(attempts):
            if attempt is None or attempt.result.status not in FIXABLE:
                break
            self._budget.check()
            fixed = await self._proposer.fix(ctx, plan, attempt.source, attempt.result)
            if fixed is None:
                break
            if fixed.source is None:
                self._tally.record(
                    FailedCandidate.of_sample(plan.title, fixed, parent, ctx.iteration, fixed=True)
                )
                break
            repaired = Candidate.child(
                parent,
                plan,
                fixed.source,
                ctx.iteration,
                tokens=tokens + fixed.usage.total_tokens,
                fixed=True,
                tree=fixed.tree,
                call=fixed.call,
            )
            attempt = await self._trials.evaluate(repaired)
        return attempt
