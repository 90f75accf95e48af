"""Candidates of the beam search and the rules that compare them.

A candidate is one kernel version the search met (the baseline or a rewrite), identified by its
normalized source. :func:`is_faster` is the noise rule every comparison of the search uses;
:func:`rank_verified` is the report's ranking.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from accelopt_core.kernelfile import normalize_source
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan
from accelopt_core.textdiff import unified_diff

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

    @classmethod
    def baseline(cls, source: str, result: EvalResult, *, retimed: bool = True) -> Candidate:
        """The user's file as candidate 0: no parent, plan ``baseline``, speedup 1 when its
        evaluation is ok. It needs no re-timing (``retimed``), except as a stand-in for a
        baseline that was never timed."""
        return cls(
            id=candidate_id(source),
            source=source,
            parent_id=None,
            plan_title="baseline",
            plan_text="",
            result=result,
            iteration=0,
            speedup=1.0 if result.ok else None,
            retimed=retimed,
        )

    @classmethod
    def child(
        cls,
        parent: Candidate,
        plan: Plan,
        source: str,
        iteration: int,
        *,
        tokens: int = 0,
        fixed: bool = False,
    ) -> Candidate:
        """A rewrite of ``parent`` by ``plan``, not evaluated yet: its result reads ``timeout``
        (what a search stopped during its evaluation leaves) until the evaluation replaces it."""
        return cls(
            id=candidate_id(source),
            source=source,
            parent_id=parent.id,
            plan_title=plan.title,
            plan_text=plan.text,
            result=EvalResult("timeout"),
            iteration=iteration,
            tokens=tokens,
            fixed=fixed,
        )

    @property
    def latency_ms(self) -> float | None:
        """The median latency in ms when the candidate is correct and timed, else None."""
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
        """The inverse of :meth:`to_dict` (the ``diff`` is not read back)."""
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


def is_faster(fast: Candidate, slow: Candidate, margin: float) -> bool:
    """The noise rule: ``fast`` beats ``slow`` only if both are correct and timed, its median is
    below ``(1 - margin)`` x the other's, and (when both carry p20/p80) its p80 is below the other's
    p20, so the two timing spreads do not overlap."""
    a, b = fast.latency_ms, slow.latency_ms
    if a is None or b is None or a >= b * (1 - margin):
        return False
    p80, p20 = fast.result.p80_ms, slow.result.p20_ms
    return p80 is None or p20 is None or p80 < p20


def rank_verified(
    candidates: Iterable[Candidate], baseline: Candidate, margin: float
) -> list[Candidate]:
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
