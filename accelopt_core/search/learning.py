"""What a search teaches the optimization memory (AccelOpt, arXiv 2511.15915, Sec. 3.2).

A slow->fast step confirmed by re-timing is summarized by the proposer into a positive
experience (title + rule); a correct rewrite that made its parent slower becomes a negative one
("did not help: <plan>"). A candidate the judge caught (``EvalResult.status == "rejected"``
with a ``rule``) becomes a negative ``reward-hack: <rule>`` experience, never a positive, with no
summarizer call (the rule is the lesson). Writes run in the background, so the search does not
wait for the summarizer; :meth:`Learner.drain` waits for them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from accelopt_core.devicefacts import before_after
from accelopt_core.evaluation.counterexample import SEARCH_RULE
from accelopt_core.kernelfile import KernelInfo, source_fingerprint
from accelopt_core.onsite.judge.derived_checks import DERIVED_RULE
from accelopt_core.proposers import Plan, Proposer
from accelopt_core.search.candidate import Candidate
from accelopt_core.search.proposing import Contexts
from accelopt_core.search.report import MAX_REASON, Tally, experience_record, failure_stage
from accelopt_core.search.tasks import Background

#: A summary title that starts with this says the change does not transfer: nothing is stored.
NOTHING_LEARNED = "no optimization found"
#: Longest judge message kept in a reward-hack experience's rule (characters).
MAX_HACK_MESSAGE = 300


def caught_rule(cand: Candidate) -> str | None:
    """The trust rule that caught ``cand`` (``EvalResult.rule`` of a ``rejected`` result, e.g.
    ``"timing inconsistent"``, or of an ``incorrect`` one wrong on a derived input: ``"wrong
    on derived input x + 532 (offset)"``, issue 29, or on one the counterexample search found:
    ``"wrong on an input found by search"``, issue 52), or None when the judge did not catch it."""
    result = cand.result
    rule = (result.rule or "").strip()
    if result.status == "incorrect" and rule.startswith((DERIVED_RULE, SEARCH_RULE)):
        return rule
    return rule if result.status == "rejected" and rule else None


class Learner:
    """Writes experiences of one search into the optimization memory.

    Args:
        memory: an :class:`accelopt_core.memory.OptimizationMemory`, or None (nothing is written).
        proposer: its ``summarize`` turns a confirmed step into a rule.
        kernel: the kernel being optimized (name and backend of every experience).
        contexts: the summarizer's context for the slow candidate.
        tally: a failed write becomes a warning there.

    Attributes:
        added: experiences written so far.
        experiences: what the report keeps of each (:func:`~.report.experience_record`), in
            the order they were written.
    """

    def __init__(
        self,
        memory: Any,
        proposer: Proposer,
        kernel: KernelInfo,
        contexts: Contexts,
        tally: Tally,
    ) -> None:
        self._memory = memory
        self._proposer = proposer
        self._kernel = kernel
        self._contexts = contexts
        self._tally = tally
        self._background = Background()
        self._hacks: set[str] = set()
        self.experiences: list[dict[str, Any]] = []

    def learn(self, slow: Candidate, fast: Candidate, *, positive: bool) -> None:
        """Remember, in the background, that ``fast`` (a rewrite of ``slow`` by its plan) was
        faster (``positive``) or slower than ``slow``."""
        if self._memory is not None:
            self._background.spawn(self._remember(slow, fast, positive=positive))

    def learn_hack(self, parent: Candidate, cand: Candidate) -> bool:
        """Remember, in the background, that ``cand`` (a rewrite of ``parent``) was caught by the
        judge: a negative experience titled ``reward-hack: <rule>`` (speedup 1.0: none was
        verified), tagged ``hack=<rule>``. Once per candidate; True when a write was started
        (False: not caught, met before, or no memory)."""
        rule = caught_rule(cand)
        if self._memory is None or rule is None or cand.id in self._hacks:
            return False
        self._hacks.add(cand.id)
        self._background.spawn(self._remember_hack(parent, cand, rule))
        return True

    async def drain(self) -> int:
        """Wait for the pending writes; the number of experiences added by this search."""
        await self._background.drain()
        return self.added

    def pending(self) -> list[asyncio.Task[Any]]:
        """The writes not finished yet, for cancellation."""
        return self._background.pending()

    async def _remember(self, slow: Candidate, fast: Candidate, *, positive: bool) -> None:
        if positive and caught_rule(fast) is not None:
            return  # a caught candidate is never a positive (learn_hack stores it)
        step_ratio = fast.step_ratio if positive else None  # timed back to back with slow
        if step_ratio:
            speedup = 1.0 / step_ratio
        else:
            speedup = (slow.latency_ms or 0) / (fast.latency_ms or float("inf"))
        if positive:
            lesson = await self._summarize(slow, fast, speedup)
            if lesson is None:
                return
        else:
            lesson = self._did_not_help(fast, speedup)
        try:
            experience = self._experience(slow, fast, speedup, *lesson, positive=positive)
            if not positive:
                experience.reason = (
                    f"correct but slower: {speedup:.3g}x of its parent's speed "
                    f"({fast.latency_ms or 0:.4g} ms against {slow.latency_ms or 0:.4g} ms)"
                )
            await asyncio.to_thread(self._memory.add, experience)
            self._added(experience)
        except Exception as exc:  # invalid experience, MemoryUnavailable, disk error: go on
            self._tally.warn(f"optimization memory not updated: {exc}")

    async def _remember_hack(self, parent: Candidate, cand: Candidate, rule: str) -> None:
        from accelopt_core.memory import HACK_PREFIX, Experience

        message = " ".join((cand.result.message or "").split())[:MAX_HACK_MESSAGE]
        lesson = f"Caught by the judge ({rule}): do not '{cand.plan_title}'."
        why = f"{failure_stage(cand.result)}: {rule}: {cand.result.message or ''}"
        try:
            experience = Experience.create(
                backend=self._kernel.backend,
                device=cand.result.device or parent.result.device or "unknown",
                timing=cand.result.timing if cand.result.timing != "none" else None,
                kernel_name=self._kernel.name,
                source_fingerprint=source_fingerprint(parent.source),
                slow_source=parent.source,
                fast_source=cand.source,
                speedup=1.0,
                title=HACK_PREFIX + rule,
                rule=f"{lesson} {message}".strip(),
                positive=False,
                plan=cand.plan_text or cand.plan_title,
                hack=rule,
                judge_version=cand.result.judge_version,
                reason=why[:MAX_REASON],
            )
            await asyncio.to_thread(self._memory.add, experience)
            self._added(experience)
        except Exception as exc:  # MemoryUnavailable, disk error: go on
            self._tally.warn(f"optimization memory not updated: {exc}")

    @property
    def added(self) -> int:
        """Experiences written so far."""
        return len(self.experiences)

    def _added(self, experience: Any) -> None:
        self.experiences.append(experience_record(experience))

    async def _summarize(
        self, slow: Candidate, fast: Candidate, speedup: float
    ) -> tuple[str, str] | None:
        """The summarizer's ``(title, rule)``; None when it saw no transferable change."""
        ctx = await self._contexts.for_parent(slow, fast.iteration)
        plan = Plan(title=fast.plan_title, text=fast.plan_text)
        rule = await self._proposer.summarize(ctx, plan, slow.source, fast.source, speedup)
        if rule.title.strip().lower().startswith(NOTHING_LEARNED):
            return None
        return rule.title, rule.rule

    def _did_not_help(self, fast: Candidate, speedup: float) -> tuple[str, str]:
        """``(title, rule)`` of a negative experience: the plan and how much slower it made it."""
        title = f"did not help: {fast.plan_title}"
        text = (
            f"'{fast.plan_title}' made {self._kernel.name} slower "
            f"({speedup:.2f}x of its parent's speed). {fast.plan_text}".strip()
        )
        return title, text

    def _experience(
        self,
        slow: Candidate,
        fast: Candidate,
        speedup: float,
        title: str,
        rule: str,
        *,
        positive: bool,
    ) -> Any:
        """The :class:`accelopt_core.memory.Experience` of the step, with the GPU facts of both
        sides (issue 21; ValueError when invalid)."""
        from accelopt_core.memory import Experience  # diskcache loads only with a memory

        return Experience.create(
            backend=self._kernel.backend,
            device=fast.result.device or "unknown",
            timing=fast.result.timing,
            kernel_name=self._kernel.name,
            source_fingerprint=source_fingerprint(slow.source),
            slow_source=slow.source,
            fast_source=fast.source,
            speedup=speedup,
            title=title,
            rule=rule,
            positive=positive,
            plan=fast.plan_text,
            judge_version=fast.result.judge_version,
            gpu_facts=before_after(slow.result.metrics, fast.result.metrics),
        )
