"""The report of a beam search, the running tally it is made from, and its JSON form."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelopt_core.proposers import Usage
from accelopt_core.search.candidate import Candidate


@dataclass
class Tally:
    """What a search counted while it ran, for its report.

    Attributes:
        evaluated: evaluations sent to the evaluator (first evaluations and re-timings).
        duplicates: rewrites skipped because a candidate with the same id was met before.
        failures: status -> count of failed evaluations (``no_code`` for a sample without
            code, ``retime_<status>`` for a failed re-timing).
        warnings: distinct messages for the report (memory not readable, ...).
    """

    evaluated: int = 0
    duplicates: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def count_failure(self, status: str) -> None:
        """One more failure of ``status``."""
        self.failures[status] = self.failures.get(status, 0) + 1

    def warn(self, message: str) -> None:
        """Record a warning for the report, once."""
        if message not in self.warnings:
            self.warnings.append(message)


def token_table(usage: Mapping[str, Usage]) -> tuple[dict[str, dict[str, Any]], float]:
    """The report's ``tokens`` (each role's :meth:`Usage.to_dict`, plus ``total``) and the total
    cost in USD."""
    total = Usage()
    for u in usage.values():
        total.add(u)
    tokens = {role: u.to_dict() for role, u in usage.items()}
    tokens["total"] = total.to_dict()
    return tokens, total.cost_usd


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
        """The rank-1 candidate, or None when nothing was verified faster."""
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
        """The inverse of :meth:`to_dict` (a saved report read back)."""
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

    async def save(self, results: Any) -> None:
        """Store this report in ``results`` (an :class:`accelopt_core.memory.ResultsStore`), keyed
        by file, kernel and original source; best effort: a failure becomes a warning."""
        try:
            await asyncio.to_thread(
                results.save, self.path, self.kernel_name, self.original_source, self.to_dict()
            )
        except Exception as exc:  # the report is still returned; saving is best effort
            self.warnings.append(f"could not save the search results: {exc}")
