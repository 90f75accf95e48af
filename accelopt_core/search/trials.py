"""The evaluator bound to the file being optimized, and every candidate the search met.

Each distinct candidate (by :func:`~accelopt_core.search.candidate.candidate_id`) is evaluated
once: identical rewrites merge, also when they arrive concurrently. Two trust rules of issue 10
apply here, where a result is attached to its candidate, so they hold for the whole search:

* an implausible speedup under the Triton interpreter (more than
  ``evaluation.maxInterpreterSpeedup`` x the baseline's speed) is evaluated once more and, if it
  stands, the result becomes ``rejected`` with ``rule="implausible speedup"``;
* under CPU timing (``interpreter``, ``simulated``) a child that differs from its parent only in
  launch parameters that timing ignores (``num_warps``, ``num_stages``, ...) is marked
  ``ignored_by_timing``: it counts as equal to its parent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import Any

from accelopt_core.evaluation.counterexample import Falsifier, Space
from accelopt_core.evaluation.derived import used_inputs
from accelopt_core.kernelfile import KernelFile
from accelopt_core.kernelfile.workload import eval_keywords
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.onsite.sandbox.policy import warning_in
from accelopt_core.proposers.offline_tunables import timing_ignores_launch_params
from accelopt_core.search.candidate import Candidate, launch_only_change, slower_of
from accelopt_core.search.events import CandidateEvaluated, Subscribers
from accelopt_core.search.report import FailedCandidate, Tally
from accelopt_core.search.tasks import gather_all

#: Default of ``evaluation.maxInterpreterSpeedup`` (issue 10: "a speedup beyond a configurable
#: bound (e.g. 50x)"): rewrites of the repository's examples stay well below it under the
#: interpreter, while output caches and skipped kernels reach 1,000x to 400,000x.
MAX_INTERPRETER_SPEEDUP = 50.0
IMPLAUSIBLE = "implausible speedup"


class Trials:
    """Evaluations of one search against the harness of ``original``.

    Args:
        evaluator: :class:`accelopt_core.evaluation.Evaluator` bound to a target.
        original: the user's file (its harness is authoritative for every candidate).
        entry: the launcher that is timed.
        tally: counts evaluations, duplicates and failures.
        events: receives :class:`CandidateEvaluated` for every first evaluation.
        max_interpreter_speedup: the bound of the implausible-speedup rule (x the baseline's
            speed); default ``evaluator.settings.evaluation.max_interpreter_speedup`` when the
            evaluator has settings, else :data:`MAX_INTERPRETER_SPEEDUP`.

    Attributes:
        seen: every candidate met, by id (a candidate under evaluation included).
        baseline: the evaluated original file, once :meth:`evaluate_baseline` returned.
    """

    def __init__(
        self,
        evaluator: Any,
        original: KernelFile,
        entry: str,
        tally: Tally,
        events: Subscribers,
        *,
        max_interpreter_speedup: float | None = None,
    ) -> None:
        if max_interpreter_speedup is None:
            evaluation = getattr(getattr(evaluator, "settings", None), "evaluation", None)
            max_interpreter_speedup = getattr(
                evaluation, "max_interpreter_speedup", MAX_INTERPRETER_SPEEDUP
            )
        self.max_interpreter_speedup = float(max_interpreter_speedup)
        self._evaluator = evaluator
        self._original = original
        self._entry = entry
        self._tally = tally
        self._events = events
        self.seen: dict[str, Candidate] = {}
        self.baseline: Candidate | None = None
        self._falsifier: Falsifier | None = None  # issue 52, once the baseline is known

    @property
    def _where(self) -> dict:
        """The evaluator's keywords that say where the kernel lives: its file name, its
        project context and the entry expression (:func:`.workload.eval_keywords`); once
        the baseline is evaluated, the derived inputs it was correct on, which every later
        evaluation checks (issues 22 and 29,
        :func:`~accelopt_core.evaluation.derived.used_inputs`)."""
        where = eval_keywords(self._original)
        if self.baseline is not None:
            where["derived_inputs"] = used_inputs(self.baseline.result)
        return where

    @property
    def source_name(self) -> str:
        """The file's name, for messages of the evaluator."""
        return self._original.path.rsplit("/", 1)[-1] or "kernel.py"

    async def evaluate_baseline(self, meanwhile: Awaitable[Any]) -> Candidate:
        """Evaluate the original file (never from the cache) while ``meanwhile`` runs (e.g. the
        proposer's warm-up); the result is the search's baseline."""
        source = self._original.source
        result, _ = await gather_all(
            self._evaluator.evaluate(source, source, self._entry, use_cache=False, **self._where),
            meanwhile,
        )
        self._tally.evaluated += 1
        unconfined = warning_in(result.warnings)  # the same target runs every candidate
        if unconfined is not None:
            self._tally.warn(unconfined)
        cand = Candidate.baseline(source, result)
        self.seen[cand.id] = cand
        self.baseline = cand
        self._events.emit(CandidateEvaluated(cand))
        return cand

    async def evaluate(self, cand: Candidate) -> Candidate | None:
        """First evaluation of a new candidate: fills its ``result`` and ``speedup``, records a
        failure (:class:`~accelopt_core.search.report.FailedCandidate`). Returns None, without
        evaluating, for a candidate met before.

        An implausible interpreter speedup is evaluated once more (:meth:`_check_plausible`);
        a launch-parameter-only child under CPU timing is marked ``ignored_by_timing``."""
        if cand.id in self.seen:
            self._tally.duplicates += 1
            return None
        self.seen[cand.id] = cand  # reserved before awaiting: a concurrent duplicate is skipped
        cand.result = await self._evaluator.evaluate(
            self._original.source, cand.source, self._entry, tree=cand.tree, **self._where
        )
        self._tally.evaluated += 1
        await self._check_plausible(cand)
        self._mark_ignored_change(cand)
        await self.falsify(cand)
        self.set_speedup(cand)
        if not cand.result.ok:
            self._tally.record(FailedCandidate.of_candidate(cand))
        self._events.emit(CandidateEvaluated(cand))
        return cand

    async def evaluate_again(self, cand: Candidate, *, timing_round: bool = False) -> EvalResult:
        """A second, independent evaluation of ``cand`` in a fresh process (cache bypassed);
        ``cand`` itself is left as it is. ``timing_round``: a round of the re-timing
        (:attr:`~accelopt_core.evaluation.evaluator.Evaluator.time_again`: correctness checked
        again on seed 1 of each shape and on the timed repetitions only)."""
        again = self._evaluator.time_again if timing_round else self._evaluator.retime
        result = await again(
            self._original.source, cand.source, self._entry, tree=cand.tree, **self._where
        )
        self._tally.evaluated += 1
        return result

    async def evaluate_pair(
        self, parent: Candidate, child: Candidate
    ) -> tuple[EvalResult, EvalResult]:
        """One A/B round of the interleaved re-timing: ``parent`` then ``child``, each in a
        fresh evaluation (cache bypassed; a timing round of :meth:`evaluate_again`), the child's
        started only once the parent's ended, so both run back to back under the same load.
        Returns ``(parent's, child's)``.

        A slot of the target's pool is not pinned across the pair (the target takes one per
        evaluation), so on a target with several slots the two may run in different slots."""
        first = await self.evaluate_again(parent, timing_round=True)
        second = await self.evaluate_again(child, timing_round=True)
        return first, second

    def speedup_of(self, result: EvalResult) -> float | None:
        """Baseline latency / ``result``'s latency (None unless both are ok and timed)."""
        base = self.baseline.latency_ms if self.baseline else None
        latency = result.latency_ms if result.ok else None
        return base / latency if base and latency else None

    async def _check_plausible(self, cand: Candidate) -> None:
        """The implausible-speedup rule: an interpreter-timed result more than
        :attr:`max_interpreter_speedup` x faster than the baseline is evaluated once more; if
        the new result is still beyond the bound, ``cand.result`` becomes ``rejected`` (rule
        ``implausible speedup``, both figures in the message), else the slower of the two."""
        first = cand.result
        speedup = self.speedup_of(first)
        if first.timing != "interpreter" or speedup is None:
            return
        if speedup <= self.max_interpreter_speedup:
            return
        again = await self.evaluate_again(cand)
        again_speedup = self.speedup_of(again)
        if again.timing != "interpreter" or again_speedup is None:
            cand.result = slower_of(first, again)
            return
        if again_speedup <= self.max_interpreter_speedup:
            cand.result = slower_of(first, again)
            return
        bound = self.max_interpreter_speedup
        cand.result = dataclasses.replace(
            again,
            status="rejected",
            rule=IMPLAUSIBLE,
            message=(
                f"{IMPLAUSIBLE}: {again_speedup:,.0f}x faster than the baseline under the "
                f"Triton interpreter ({speedup:,.0f}x at first, {again_speedup:,.0f}x when "
                f"evaluated again); above the bound of {bound:g}x "
                "(evaluation.maxInterpreterSpeedup)"
            ),
        )

    def _falsifier_for_search(self) -> Falsifier | None:
        """The search's :class:`~accelopt_core.evaluation.counterexample.Falsifier`, made once
        from the baseline's result (None: off, or no space to draw from)."""
        on, seed, seeds = _search_settings(self._evaluator)
        if not on or self.baseline is None:
            return None
        if self._falsifier is None:
            space = Space.of(self.baseline.result)
            if space is None:
                return None
            found = self.baseline.result.metrics.get("derived_inputs") or {}
            deferred = [d for d in found.get("deferred") or [] if isinstance(d, dict)]
            calls = seeds + len(used_inputs(self.baseline.result))  # one evaluation's checks
            self._falsifier = Falsifier(
                self._probe, self._original.source, space, deferred=deferred, seed=seed,
                budget=2 * calls,
            )  # fmt: skip
        return self._falsifier

    async def _probe(self, source: str, examples: list[dict]) -> list[dict]:
        """The judge's verdicts of ``source`` on ``examples`` (a probe request, issue 52);
        every example ``unusable`` when the request failed before probing them."""
        where = eval_keywords(self._original)
        result = await self._evaluator.evaluate(
            self._original.source, source, self._entry, derived_probe=examples, **where
        )
        found = (result.metrics or {}).get("derived_probe")
        if isinstance(found, list) and len(found) == len(examples):
            return [v if isinstance(v, dict) else {"verdict": "unusable"} for v in found]
        why = f"the probe's evaluation ended {result.status}: {result.message}"[:300]
        return [{"verdict": "unusable", "why": why} for _ in examples]

    async def falsify(self, cand: Candidate) -> None:
        """Issue 52: before an ok candidate faster than its parent or the baseline can be
        ranked, written or remembered as a positive experience, search it for an input on
        which it disagrees with the baseline
        (:class:`~accelopt_core.evaluation.counterexample.Falsifier`); a counterexample makes
        its result ``incorrect`` (rule ``wrong on an input found by search``). Once per
        candidate (``cand.searched``); a no-op for the baseline and with the search off."""
        if cand.searched or not cand.result.ok or cand.parent_id is None:
            return
        parent = self.parent_of(cand)
        latency = cand.result.latency_ms
        faster = latency is not None and any(
            other is not None and other.result.ok and other.latency_ms and latency < other.latency_ms
            for other in (parent, self.baseline)
        )  # fmt: skip
        falsifier = self._falsifier_for_search() if faster else None
        if falsifier is None:
            return
        cand.searched = True
        outcome = await falsifier.search(cand.source)
        cand.result = falsifier.refute(cand.result, outcome)

    def _mark_ignored_change(self, cand: Candidate) -> None:
        """Mark ``cand`` ``ignored_by_timing`` when its timing mode ignores launch parameters
        and it differs from its parent only in them (with a warning on its result)."""
        parent = self.parent_of(cand)
        if parent is None or not timing_ignores_launch_params(cand.result.timing):
            return
        if not launch_only_change(parent.source, cand.source):
            return
        cand.ignored_by_timing = True
        note = (
            f"differs from its parent only in launch parameters (num_warps, num_stages, ...) "
            f"that {cand.result.timing} timing ignores: counted as equal to its parent"
        )
        cand.result = dataclasses.replace(cand.result, warnings=[*cand.result.warnings, note])

    def parent_of(self, cand: Candidate) -> Candidate | None:
        """The candidate ``cand`` was derived from (None for the baseline)."""
        return self.seen.get(cand.parent_id or "")

    def set_speedup(self, cand: Candidate) -> None:
        """``cand.speedup`` = baseline latency / its latency (None unless both are timed)."""
        cand.speedup = self.speedup_of(cand.result)


def _search_settings(evaluator: Any) -> tuple[bool, int, int]:
    """``(on, seed, seeds)`` from ``evaluation.counterexampleSearch`` / ``searchSeed`` /
    ``seeds`` of ``evaluator``'s settings (an evaluator without settings: off)."""
    evaluation = getattr(getattr(evaluator, "settings", None), "evaluation", None)
    if evaluation is None:
        return False, 0, 1
    return (
        bool(evaluation.counterexample_search),
        int(evaluation.search_seed),
        int(evaluation.seeds),
    )
