"""Beam search over candidate kernels (AccelOpt, arXiv 2511.15915): the loop and beam selection,
budget, re-timing of finalists, learning into the optimization memory, the report, and typed
events."""

from accelopt_core.search.beam import (
    FIXABLE,
    BeamSearch,
    Candidate,
    CandidateEvaluated,
    IterationStarted,
    NewBest,
    SearchEvent,
    SearchFinished,
    SearchReport,
    SearchStarted,
    candidate_id,
    is_faster,
    rank_verified,
    select_beam,
)

__all__ = [
    "FIXABLE",
    "BeamSearch",
    "Candidate",
    "CandidateEvaluated",
    "IterationStarted",
    "NewBest",
    "SearchEvent",
    "SearchFinished",
    "SearchReport",
    "SearchStarted",
    "candidate_id",
    "is_faster",
    "rank_verified",
    "select_beam",
]
