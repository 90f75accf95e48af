"""Beam search over candidate kernels, as in AccelOpt (arXiv 2511.15915, Sec. 3), with its gaps closed.

One iteration, for a beam of at most B candidates:

1. the planner proposes N plans for every candidate in the beam (all plans of the beam at once);
2. the executor implements each plan K times (all samples at once); each sample is evaluated as soon as
   it exists, as target slots free up; a sample that fails to compile or is incorrect gets
   ``search.fixer_attempts`` repair tries;
3. the new beam is the best B of the old beam and the children that beat their parent's latency by
   more than the noise margin (elitist: a parent keeps its measured latency and stays unless beaten).

Improvements on AccelOpt's scripts: identical candidates (same normalized source) are evaluated once;
a speedup counts only past ``search.noise_margin``; every candidate that enters the beam is re-timed
(the slower of its two medians is kept) before it counts as a finalist or reaches the memory, and that
re-timing overlaps the next iteration instead of stalling it; LLM calls and evaluations run
concurrently; tokens and cost are counted per role; the search honours cancellation within a second
and stops at a budget (iterations, tokens, wall time).

Every slow->fast step confirmed by re-timing is summarized into an experience of the optimization
memory (positive); a correct rewrite that made the kernel slower is stored as a negative experience.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelopt_core.kernelfile import KernelFile, normalize_source, source_fingerprint, unified_diff
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan, ProposalContext, Proposer, Sample, Usage
from accelopt_core.settings import SearchSettings

log = logging.getLogger("accelopt.search")

#: Statuses a fixer may repair (the others are infrastructure or policy failures).
FIXABLE = ("compile_error", "incorrect", "runtime_error")


def candidate_id(source: str) -> str:
    """Identity of a candidate: 12 hex digits of sha256 over its normalized source (comments and
    formatting do not count), so identical rewrites merge."""
    return hashlib.sha256(normalize_source(source).encode()).hexdigest()[:12]


@dataclass
class Candidate:
    """One kernel version met by the search.

    Attributes:
        id: :func:`candidate_id` of ``source``.
        source: the full module (kernels, launcher and the original harness).
        parent_id: the candidate it was derived from (None for the baseline).
        plan_title / plan_text: the plan that produced it.
        result: its evaluation; after re-timing, ``latency_ms`` is the slower of the two medians.
        iteration: the iteration that produced it (0 for the baseline).
        speedup: baseline latency / this latency (None until both are timed).
        rank: 1-based rank among verified improvements in the final report.
        retimed: True once a second, independent timing confirmed the latency.
        tokens: LLM tokens spent on producing it (its share of the planner call plus the executor).
        fixed: True when the fixer produced it from a failed sample.
    """

    id: str
    source: str
    parent_id: str | None
    plan_title: str
    plan_text: str
    result: EvalResult
    iteration: int
    speedup: float | None = None
    rank: int | None = None
    retimed: bool = False
    tokens: int = 0
    fixed: bool = False

    @property
    def latency_ms(self) -> float | None:
        return self.result.latency_ms if self.result.ok else None

    def to_dict(
        self, original_source: str | None = None, path: str = "kernel.py"
    ) -> dict[str, Any]:
        """JSON form; with ``original_source`` it also carries the unified ``diff`` against it."""
        data = {
            "id": self.id,
            "rank": self.rank,
            "speedup": self.speedup,
            "latency_ms": self.latency_ms,
            "correct": self.result.ok,
            "status": self.result.status,
            "plan": self.plan_title,
            "plan_text": self.plan_text,
            "parent_id": self.parent_id,
            "iteration": self.iteration,
            "retimed": self.retimed,
            "tokens": self.tokens,
            "fixed": self.fixed,
            "pct_of_peak": self.result.pct_of_peak,
            "result": self.result.to_dict(),
            "source": self.source,
        }
        if original_source is not None:
            data["diff"] = unified_diff(original_source, self.source, path)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        return cls(
            id=data["id"],
            source=data["source"],
            parent_id=data.get("parent_id"),
            plan_title=data.get("plan", ""),
            plan_text=data.get("plan_text", ""),
            result=EvalResult.from_dict(data["result"]),
            iteration=int(data.get("iteration", 0)),
            speedup=data.get("speedup"),
            rank=data.get("rank"),
            retimed=bool(data.get("retimed", False)),
            tokens=int(data.get("tokens", 0)),
            fixed=bool(data.get("fixed", False)),
        )


@dataclass
class SearchReport:
    """The outcome of one search (also of a cancelled or budget-stopped one).

    ``candidates`` holds only verified improvements: correct, re-timed, and faster than the baseline
    past the noise margin, best first (``rank`` 1..). ``tokens`` maps each LLM role, and ``total``,
    to its usage; ``cost_usd`` uses the configured price table (0 without one).
    """

    path: str
    kernel_name: str
    entry: str
    baseline: Candidate
    candidates: list[Candidate]
    original_source: str
    target: str
    timing: str
    proposer: str
    stopped_reason: str = "completed"
    iterations_run: int = 0
    evaluated: int = 0
    duplicates: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost_usd: float = 0.0
    wall_s: float = 0.0
    memory_added: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON report of ``accelopt optimize --json`` (and what the server persists)."""
        name = self.path.rsplit("/", 1)[-1]
        return {
            "path": self.path,
            "kernel": self.kernel_name,
            "entry": self.entry,
            "target": self.target,
            "timing": self.timing,
            "proposer": self.proposer,
            "stopped_reason": self.stopped_reason,
            "iterations_run": self.iterations_run,
            "evaluated": self.evaluated,
            "duplicates": self.duplicates,
            "failures": dict(self.failures),
            "baseline": self.baseline.to_dict(),
            "candidates": [c.to_dict(self.original_source, name) for c in self.candidates],
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "wall_s": round(self.wall_s, 3),
            "memory_added": self.memory_added,
            "warnings": list(self.warnings),
            "original_source": self.original_source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchReport:
        return cls(
            path=data["path"],
            kernel_name=data["kernel"],
            entry=data["entry"],
            baseline=Candidate.from_dict(data["baseline"]),
            candidates=[Candidate.from_dict(c) for c in data.get("candidates", [])],
            original_source=data.get("original_source", data["baseline"]["source"]),
            target=data.get("target", ""),
            timing=data.get("timing", ""),
            proposer=data.get("proposer", ""),
            stopped_reason=data.get("stopped_reason", "completed"),
            iterations_run=data.get("iterations_run", 0),
            evaluated=data.get("evaluated", 0),
            duplicates=data.get("duplicates", 0),
            failures=dict(data.get("failures", {})),
            tokens=dict(data.get("tokens", {})),
            cost_usd=float(data.get("cost_usd", 0.0)),
            wall_s=float(data.get("wall_s", 0.0)),
            memory_added=int(data.get("memory_added", 0)),
            warnings=list(data.get("warnings", [])),
        )


# --- events ---------------------------------------------------------------------------------


@dataclass
class SearchStarted:
    """The baseline was evaluated; the search begins."""

    baseline: Candidate
    iterations: int


@dataclass
class IterationStarted:
    iteration: int
    iterations: int


@dataclass
class CandidateEvaluated:
    candidate: Candidate


@dataclass
class NewBest:
    """A candidate beat the best so far past the noise margin (``speedup`` vs the baseline)."""

    candidate: Candidate
    speedup: float


@dataclass
class SearchFinished:
    report: SearchReport


SearchEvent = SearchStarted | IterationStarted | CandidateEvaluated | NewBest | SearchFinished


def is_faster(fast: Candidate, slow: Candidate, margin: float) -> bool:
    """The noise rule: ``fast`` beats ``slow`` only if both are correct and timed, its median is
    below ``(1 - margin)`` x the other's, and (when both carry p20/p80) its p80 is below the other's
    p20, so the two timing spreads do not overlap."""
    a, b = fast.latency_ms, slow.latency_ms
    if a is None or b is None or a >= b * (1 - margin):
        return False
    p80, p20 = fast.result.p80_ms, slow.result.p20_ms
    return p80 is None or p20 is None or p80 < p20


def select_beam(
    beam: list[Candidate],
    children: list[Candidate],
    known: dict[str, Candidate],
    width: int,
    margin: float,
) -> tuple[list[Candidate], list[Candidate], list[tuple[Candidate, Candidate]]]:
    """The elitist selection rule of the beam (pure function).

    A child is an improvement when it :func:`is_faster` than its parent; it is a regression when
    its parent :func:`is_faster` than it. The new beam is
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


def rank_verified(candidates: Any, baseline: Candidate, margin: float) -> list[Candidate]:
    """The report's ranking (pure function): candidates that are correct, re-timed and faster than
    the baseline past the noise margin, fastest first, with ``rank`` set to 1, 2, ..."""
    verified = [
        c
        for c in candidates
        if c.parent_id is not None and c.retimed and is_faster(c, baseline, margin)
    ]
    verified.sort(key=lambda c: c.latency_ms or 0.0)
    for rank, cand in enumerate(verified, start=1):
        cand.rank = rank
    return verified


class _Stop(Exception):
    """Internal: a budget ran out."""


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
    ) -> None:
        kernel = original.kernel(kernel_name)
        harness = original.harness
        if harness is None or not harness.complete:
            problems = "; ".join(p.message for p in (harness.problems if harness else []))
            raise ValueError(
                f"{original.path}: cannot optimize {kernel_name}: the file has no complete harness"
                + (
                    f" ({problems})"
                    if problems
                    else " (get_inputs, reference and BENCH are needed)"
                )
            )
        entry = original.entry_for(kernel_name)
        if not entry:
            raise ValueError(
                f"{original.path}: no launcher of {kernel_name} is the harness entry (BENCH['entry'])"
            )
        self.original = original
        self.kernel = kernel
        self.entry = entry
        self.settings = settings
        self.evaluator = evaluator
        self.proposer = proposer
        self.memory = memory
        self.results = results
        self.target_name = target_name
        self._subscribers: list[Callable[[SearchEvent], None]] = []
        self._inner: asyncio.Task[SearchReport] | None = None
        self._cancel_requested = False
        self._seen: dict[str, Candidate] = {}
        self._failures: dict[str, int] = {}
        self._duplicates = 0
        self._evaluated = 0
        self._background: set[asyncio.Task[Any]] = set()
        self._retimes: dict[str, asyncio.Task[None]] = {}
        self._memory_added = 0
        self._warnings: list[str] = []
        self._baseline: Candidate | None = None
        self._best: Candidate | None = None
        self._iterations_run = 0
        self._stopped_reason = "completed"
        self._started = 0.0

    # -- public API ---------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[SearchEvent], None]) -> None:
        """Call ``callback(event)`` for every event, on the event loop; exceptions it raises are
        logged and ignored."""
        self._subscribers.append(callback)

    def cancel(self) -> None:
        """Stop the search: in-flight LLM calls and evaluations are cancelled (worker processes
        killed) and :meth:`run` returns the partial report with ``stopped_reason='cancelled'``."""
        self._cancel_requested = True
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
        self._started = time.monotonic()
        self._inner = asyncio.create_task(self._search())
        try:
            report = await self._inner
        except asyncio.CancelledError:
            if not self._cancel_requested:
                self._inner.cancel()
                with contextlib.suppress(BaseException):
                    await self._inner
                await self._cancel_background()
                raise
            self._stopped_reason = "cancelled"
            await self._cancel_background()
            report = self._report()
        if wait_for_memory:
            report.memory_added = await self.drain()
        self._emit(SearchFinished(report))
        if self.results is not None and report.stopped_reason != "cancelled":
            try:
                await asyncio.to_thread(
                    self.results.save,
                    self.original.path,
                    self.kernel.name,
                    self.original.source,
                    report.to_dict(),
                )
            except Exception as exc:  # the report is still returned; saving is best effort
                report.warnings.append(f"could not save the search results: {exc}")
        return report

    # -- the search -----------------------------------------------------------------------------

    async def _search(self) -> SearchReport:
        s = self.settings
        deadline = self._started + s.max_wall_s if s.max_wall_s else None
        try:
            async with _deadline(deadline):
                baseline = await self._evaluate_baseline()
                if not baseline.result.ok:
                    self._stopped_reason = f"baseline {baseline.result.status}"
                    return self._report()
                self._emit(SearchStarted(baseline, s.iterations))
                beam = [baseline]
                for iteration in range(1, s.iterations + 1):
                    self._check_tokens()
                    self._emit(IterationStarted(iteration, s.iterations))
                    children = await self._iterate(beam, iteration)
                    self._iterations_run = iteration
                    beam = self._select(beam, children)
                await self._settle()
        except _Stop as stop:
            self._stopped_reason = str(stop)
            await self._cancel_background()
        except TimeoutError:
            self._stopped_reason = "budget: wall time"
            await self._cancel_background()
        return self._report()

    async def _evaluate_baseline(self) -> Candidate:
        source = self.original.source
        result, _ = await _gather(
            self.evaluator.evaluate(
                source, source, self.entry, use_cache=False, source_name=self._name
            ),
            self._warm_proposer(),  # e.g. build the LLM clients meanwhile
        )
        self._evaluated += 1
        cand = Candidate(
            id=candidate_id(source),
            source=source,
            parent_id=None,
            plan_title="baseline",
            plan_text="",
            result=result,
            iteration=0,
            speedup=1.0 if result.ok else None,
            retimed=True,
        )
        self._seen[cand.id] = cand
        self._baseline = cand
        self._emit(CandidateEvaluated(cand))
        return cand

    async def _warm_proposer(self) -> None:
        """Let the proposer prepare (e.g. build its LLM clients) while the baseline is evaluated.
        An optimization only: a failure here is left for the first real call to report."""
        warm = getattr(self.proposer, "warm", None)
        if warm is not None:
            try:
                await warm()
            except Exception:
                log.debug("proposer warm-up failed", exc_info=True)

    async def _iterate(self, beam: list[Candidate], iteration: int) -> list[Candidate]:
        """Plans for the whole beam at once, then every sample of every plan concurrently."""
        contexts = await _gather(*(self._context(p, iteration) for p in beam))
        plan_lists = await _gather(
            *(self.proposer.plan(ctx, self.settings.plans_per_candidate) for ctx in contexts)
        )
        jobs = []
        for parent, ctx, plans in zip(beam, contexts, plan_lists, strict=True):
            for plan in plans:
                share = plan.usage.total_tokens
                jobs.append(self._run_plan(parent, ctx, plan, share))
        self._check_tokens()
        batches = await _gather(*jobs)
        return [c for batch in batches for c in batch]

    async def _run_plan(
        self, parent: Candidate, ctx: ProposalContext, plan: Plan, plan_tokens: int
    ) -> list[Candidate]:
        samples = await self.proposer.implement(ctx, plan, self.settings.samples_per_plan)
        outcomes = await _gather(
            *(self._run_sample(parent, ctx, plan, s, plan_tokens) for s in samples)
        )
        return [c for c in outcomes if c is not None]

    async def _run_sample(
        self, parent: Candidate, ctx: ProposalContext, plan: Plan, sample: Sample, plan_tokens: int
    ) -> Candidate | None:
        tokens = plan_tokens + sample.usage.total_tokens
        if sample.source is None:
            self._count_failure("no_code")
            log.info("plan %r produced no code: %s", plan.title, sample.error)
            return None
        cand = await self._evaluate_candidate(parent, ctx.iteration, plan, sample.source, tokens)
        attempts = self.settings.fixer_attempts
        while cand is not None and cand.result.status in FIXABLE and attempts > 0:
            attempts -= 1
            self._check_tokens()
            fixed = await self.proposer.fix(ctx, plan, cand.source, cand.result)
            if fixed is None or fixed.source is None:
                break
            cand = await self._evaluate_candidate(
                parent,
                ctx.iteration,
                plan,
                fixed.source,
                tokens + fixed.usage.total_tokens,
                fixed=True,
            )
        return cand if cand is not None and cand.result.ok else None

    async def _evaluate_candidate(
        self,
        parent: Candidate,
        iteration: int,
        plan: Plan,
        source: str,
        tokens: int,
        fixed: bool = False,
    ) -> Candidate | None:
        cid = candidate_id(source)
        if cid in self._seen:
            self._duplicates += 1
            return None
        # Reserve the id before awaiting so concurrent duplicates are not evaluated twice.
        placeholder = Candidate(
            cid, source, parent.id, plan.title, plan.text, EvalResult("timeout"), iteration
        )
        self._seen[cid] = placeholder
        result = await self.evaluator.evaluate(
            self.original.source, source, self.entry, source_name=self._name
        )
        self._evaluated += 1
        cand = Candidate(
            id=cid,
            source=source,
            parent_id=parent.id,
            plan_title=plan.title,
            plan_text=plan.text,
            result=result,
            iteration=iteration,
            tokens=tokens,
            fixed=fixed,
        )
        self._set_speedup(cand)
        self._seen[cid] = cand
        if not result.ok:
            self._count_failure(result.status)
        self._emit(CandidateEvaluated(cand))
        return cand

    def _select(self, beam: list[Candidate], children: list[Candidate]) -> list[Candidate]:
        """Apply :func:`select_beam`; entering children are re-timed in the background and
        correct-but-slower children become negative experiences."""
        new_beam, _improved, regressions = select_beam(
            beam, children, self._seen, self.settings.beam_width, self.settings.noise_margin
        )
        for parent, child in regressions:
            self._spawn(self._remember(parent, child, positive=False))
        for cand in new_beam:
            if not cand.retimed and cand.id not in self._retimes:
                self._retimes[cand.id] = asyncio.create_task(self._retime(cand))
        return new_beam

    async def _retime(self, cand: Candidate) -> None:
        """Time a finalist again in a fresh process and keep the slower median (conservative).
        A re-timing that fails marks the candidate as not ok."""
        result = await self.evaluator.retime(
            self.original.source, cand.source, self.entry, source_name=self._name
        )
        self._evaluated += 1
        if result.ok and cand.result.ok:
            if (result.latency_ms or 0) > (cand.result.latency_ms or 0):
                cand.result = result
        else:
            cand.result = result
            self._count_failure(f"retime_{result.status}")
        cand.retimed = True
        self._set_speedup(cand)
        if not cand.result.ok:
            return
        parent = self._seen.get(cand.parent_id or "")
        margin = self.settings.noise_margin
        if parent is not None and parent.latency_ms and cand.latency_ms:
            if parent.parent_id is not None and parent.id in self._retimes:
                await asyncio.shield(self._retimes[parent.id])
            if is_faster(cand, parent, margin):
                best = self._best
                if best is None or is_faster(cand, best, margin):
                    self._best = cand
                    self._emit(NewBest(cand, cand.speedup or 1.0))
                self._spawn(self._remember(parent, cand, positive=True))

    async def _remember(self, slow: Candidate, fast: Candidate, *, positive: bool) -> None:
        """Summarize a slow->fast pair (or a correct rewrite that was slower) into the memory."""
        if self.memory is None:
            return
        speedup = (slow.latency_ms or 0) / (fast.latency_ms or float("inf"))
        ctx = await self._context(slow, fast.iteration)
        plan = Plan(title=fast.plan_title, text=fast.plan_text)
        if positive:
            rule = await self.proposer.summarize(ctx, plan, slow.source, fast.source, speedup)
            title, text = rule.title, rule.rule
            if title.strip().lower().startswith("no optimization found"):
                return  # the summarizer saw no transferable change: nothing worth remembering
        else:
            title = f"did not help: {fast.plan_title}"
            text = (
                f"'{fast.plan_title}' made {self.kernel.name} slower "
                f"({speedup:.2f}x of its parent's speed). {fast.plan_text}".strip()
            )
        from accelopt_core.memory import Experience

        try:
            exp = Experience.create(
                backend=self.kernel.backend,
                device=fast.result.device or "unknown",
                timing=fast.result.timing,
                kernel_name=self.kernel.name,
                source_fingerprint=source_fingerprint(slow.source),
                slow_source=slow.source,
                fast_source=fast.source,
                speedup=speedup,
                title=title,
                rule=text,
                positive=positive,
                plan=fast.plan_text,
            )
            await asyncio.to_thread(self.memory.add, exp)
            self._memory_added += 1
        except Exception as exc:  # invalid experience, MemoryUnavailable, disk error: go on
            self._warn(f"optimization memory not updated: {exc}")

    async def _settle(self) -> None:
        """Wait for the outstanding re-timings of the last iteration (they decide the ranking)."""
        while self._retimes and not all(t.done() for t in self._retimes.values()):
            await asyncio.gather(*self._retimes.values(), return_exceptions=True)

    async def drain(self) -> int:
        """Wait for the pending memory writes (summaries of confirmed slow->fast steps and
        negative experiences). Returns the number of experiences added by this search."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        return self._memory_added

    # -- helpers ---------------------------------------------------------------------------------

    @property
    def _name(self) -> str:
        return self.original.path.rsplit("/", 1)[-1] or "kernel.py"

    async def _context(self, parent: Candidate, iteration: int) -> ProposalContext:
        positives: list[Any] = []
        negatives: list[Any] = []
        if self.memory is not None and self.settings.memory_top_k > 0:
            try:
                positives, negatives = await asyncio.to_thread(
                    self.memory.retrieve_for,
                    parent.source,
                    self.kernel.backend,
                    parent.result.device,
                    self.settings.memory_top_k,
                )
            except Exception as exc:
                self._warn(f"optimization memory not readable: {exc}")
        assert self._baseline is not None
        return ProposalContext(
            original=self.original,
            kernel_name=self.kernel.name,
            entry=self.entry,
            parent_source=parent.source,
            parent_result=parent.result,
            baseline_result=self._baseline.result,
            positives=positives,
            negatives=negatives,
            iteration=iteration,
        )

    def _set_speedup(self, cand: Candidate) -> None:
        base = self._baseline.latency_ms if self._baseline else None
        cand.speedup = base / cand.latency_ms if base and cand.latency_ms else None

    def _warn(self, message: str) -> None:
        """Record a warning for the report, once."""
        if message not in self._warnings:
            self._warnings.append(message)

    def _count_failure(self, status: str) -> None:
        self._failures[status] = self._failures.get(status, 0) + 1

    def _usage(self) -> dict[str, Usage]:
        try:
            return dict(self.proposer.usage())
        except Exception:
            return {}

    def _check_tokens(self) -> None:
        if self._cancel_requested:
            raise asyncio.CancelledError
        limit = self.settings.max_tokens
        if limit is not None:
            used = sum(u.total_tokens for u in self._usage().values())
            if used >= limit:
                raise _Stop(f"budget: tokens ({used} >= {limit})")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _cancel_background(self) -> None:
        tasks = [*self._background, *self._retimes.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    def _emit(self, event: SearchEvent) -> None:
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # a subscriber must never break the search
                log.exception("search event subscriber failed")

    def _report(self) -> SearchReport:
        margin = self.settings.noise_margin
        base = self._baseline
        if base is None:  # stopped before the baseline was evaluated
            base = Candidate(
                id=candidate_id(self.original.source),
                source=self.original.source,
                parent_id=None,
                plan_title="baseline",
                plan_text="",
                result=EvalResult.failure(
                    "timeout", f"{self._stopped_reason} before the baseline was timed"
                ),
                iteration=0,
            )
        verified = rank_verified(self._seen.values(), base, margin)
        usage = self._usage()
        total = Usage()
        for u in usage.values():
            total.add(u)
        tokens = {role: u.to_dict() for role, u in usage.items()}
        tokens["total"] = total.to_dict()
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
            iterations_run=self._iterations_run,
            evaluated=self._evaluated,
            duplicates=self._duplicates,
            failures=dict(self._failures),
            tokens=tokens,
            cost_usd=total.cost_usd,
            wall_s=time.monotonic() - self._started,
            memory_added=self._memory_added,
            warnings=list(self._warnings),
        )


async def _gather(*coros: Any) -> list[Any]:
    """asyncio.gather that cancels the siblings when one of them fails (a budget stop, an error),
    so no orphan LLM call or evaluation outlives the search."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


@contextlib.asynccontextmanager
async def _deadline(deadline: float | None):
    """asyncio.timeout for Python >= 3.11; a watchdog task on 3.10."""
    if deadline is None:
        yield
        return
    timeout = getattr(asyncio, "timeout_at", None)
    if timeout is not None:
        loop = asyncio.get_running_loop()
        async with timeout(loop.time() + max(0.0, deadline - time.monotonic())):
            yield
        return
    task = asyncio.current_task()
    assert task is not None
    fired = False

    def _fire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    handle = asyncio.get_running_loop().call_later(max(0.0, deadline - time.monotonic()), _fire)
    try:
        yield
    except asyncio.CancelledError:
        if fired:
            raise TimeoutError from None
        raise
    finally:
        handle.cancel()
