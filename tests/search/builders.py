"""Candidates with given timings for the search's rule tests (plain data, no evaluation)."""

from __future__ import annotations

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search import Candidate


def cand(
    cid: str, latency: float | None, parent: str | None = "base", retimed: bool = True
) -> Candidate:
    """A candidate timed at ``latency`` ms under the interpreter (incorrect when None); a
    ``retimed`` one also had its step confirmed by the A/B re-timing."""
    result = (
        EvalResult(status="ok", latency_ms=latency, timing="interpreter")
        if latency is not None
        else EvalResult.failure("incorrect", "max abs error 1.0")
    )
    return Candidate(
        cid, f"# {cid}", parent, f"plan {cid}", "", result, 1, retimed=retimed, confirmed=retimed
    )


def spread(
    cid: str, median: float, p20: float, p80: float, parent: str | None = "base"
) -> Candidate:
    """A re-timed candidate with a median and a p20..p80 spread in ms."""
    result = EvalResult(status="ok", latency_ms=median, p20_ms=p20, p80_ms=p80, timing="cuda")
    return Candidate(cid, f"# {cid}", parent, cid, "", result, 1, retimed=True, confirmed=True)
