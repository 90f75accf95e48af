"""The evaluator bound to the file being optimized, and every candidate the search met.

Each distinct candidate (by :func:`~accelopt_core.search.candidate.candidate_id`) is evaluated
once: identical rewrites merge, also when they arrive concurrently.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from accelopt_core.kernelfile import KernelFile
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search.candidate import Candidate
from accelopt_core.search.events import CandidateEvaluated, Subscribers
from accelopt_core.search.report import Tally
from accelopt_core.search.tasks import gather_all


class Trials:
    """Evaluations of one search against the harness of ``original``.

    Args:
        evaluator: :class:`accelopt_core.evaluation.Evaluator` bound to a target.
        original: the user's file (its harness is authoritative for every candidate).
        entry: the launcher that is timed.
        tally: counts evaluations, duplicates and failures.
        events: receives :class:`CandidateEvaluated` for every first evaluation.

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
    ) -> None:
        self._evaluator = evaluator
        self._original = original
        self._entry = entry
        self._tally = tally
        self._events = events
        self.seen: dict[str, Candidate] = {}
        self.baseline: Candidate | None = None

    @property
    def source_name(self) -> str:
        """The file's name, for messages of the evaluator."""
        return self._original.path.rsplit("/", 1)[-1] or "kernel.py"

    async def evaluate_baseline(self, meanwhile: Awaitable[Any]) -> Candidate:
        """Evaluate the original file (never from the cache) while ``meanwhile`` runs (e.g. the
        proposer's warm-up); the result is the search's baseline."""
        source = self._original.source
        result, _ = await gather_all(
            self._evaluator.evaluate(
                source, source, self._entry, use_cache=False, source_name=self.source_name
            ),
            meanwhile,
        )
        self._tally.evaluated += 1
        cand = Candidate.baseline(source, result)
        self.seen[cand.id] = cand
        self.baseline = cand
        self._events.emit(CandidateEvaluated(cand))
        return cand

    async def evaluate(self, cand: Candidate) -> Candidate | None:
        """First evaluation of a new candidate: fills its ``result`` and ``speedup``, counts a
        failure by status. Returns None, without evaluating, for a candidate met before."""
        if cand.id in self.seen:
            self._tally.duplicates += 1
            return None
        self.seen[cand.id] = cand  # reserved before awaiting: a concurrent duplicate is skipped
        cand.result = await self._evaluator.evaluate(
            self._original.source, cand.source, self._entry, source_name=self.source_name
        )
        self._tally.evaluated += 1
        self.set_speedup(cand)
        if not cand.result.ok:
            self._tally.count_failure(cand.result.status)
        self._events.emit(CandidateEvaluated(cand))
        return cand

    async def evaluate_again(self, cand: Candidate) -> EvalResult:
        """A second, independent evaluation of ``cand`` in a fresh process (cache bypassed);
        ``cand`` itself is left as it is."""
        result = await self._evaluator.retime(
            self._original.source, cand.source, self._entry, source_name=self.source_name
        )
        self._tally.evaluated += 1
        return result

    def parent_of(self, cand: Candidate) -> Candidate | None:
        """The candidate ``cand`` was derived from (None for the baseline)."""
        return self.seen.get(cand.parent_id or "")

    def set_speedup(self, cand: Candidate) -> None:
        """``cand.speedup`` = baseline latency / its latency (None unless both are timed)."""
        base = self.baseline.latency_ms if self.baseline else None
        cand.speedup = base / cand.latency_ms if base and cand.latency_ms else None
