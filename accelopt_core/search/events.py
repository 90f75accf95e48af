"""Typed events of a beam search, and the list of subscribers they go to.

A subscriber (the server's job manager, the CLI's progress line) tells the events apart by type;
they are emitted on the event loop, in this order: :class:`CandidateEvaluated` for the baseline,
:class:`SearchStarted`, then per iteration :class:`IterationStarted` and a
:class:`CandidateEvaluated` per evaluated rewrite, :class:`CandidateFailed` for every sample or
candidate that failed (right after its evaluation, or when its reply held no usable code),
:class:`NewBest` whenever re-timing confirms a new best, and :class:`SearchFinished` last. Iterations overlap (:mod:`.iterations`): the last
rewrites of iteration i may be evaluated after :class:`IterationStarted` of iteration i+1 (each
rewrite's ``candidate.iteration`` tells which one it belongs to).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from accelopt_core.search.candidate import Candidate
from accelopt_core.search.report import FailedCandidate, SearchReport

log = logging.getLogger("accelopt.search")


@dataclass
class SearchStarted:
    """The baseline was evaluated; the search begins."""

    baseline: Candidate
    iterations: int


@dataclass
class IterationStarted:
    """Iteration ``iteration`` (1-based) of ``iterations`` begins."""

    iteration: int
    iterations: int


@dataclass
class CandidateEvaluated:
    """A candidate (the baseline or a rewrite) got its first evaluation, ok or not."""

    candidate: Candidate


@dataclass
class CandidateFailed:
    """A sample or candidate failed: at parsing, at its call, or at its evaluation or
    re-timing (:class:`~accelopt_core.search.report.FailedCandidate` says where and why)."""

    failure: FailedCandidate


@dataclass
class NewBest:
    """A candidate beat the best so far past the noise margin (``speedup`` vs the baseline)."""

    candidate: Candidate
    speedup: float


@dataclass
class SearchFinished:
    """The search ended (completed, stopped by a budget, or cancelled) with this report."""

    report: SearchReport


SearchEvent = (
    SearchStarted
    | IterationStarted
    | CandidateEvaluated
    | CandidateFailed
    | NewBest
    | SearchFinished
)


class Subscribers:
    """The callbacks of one search: :meth:`emit` calls each with the event, in subscription
    order; a callback that raises is logged and never breaks the search."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[SearchEvent], None]] = []

    def add(self, callback: Callable[[SearchEvent], None]) -> None:
        """Call ``callback(event)`` for every later event."""
        self._callbacks.append(callback)

    def emit(self, event: SearchEvent) -> None:
        """Hand ``event`` to every subscriber."""
        for callback in list(self._callbacks):
            try:
                callback(event)
            except Exception:  # a subscriber must never break the search
                log.exception("search event subscriber failed")
