"""Beam search over candidate kernels (AccelOpt, arXiv 2511.15915).

Modules: :mod:`.beam` (the loop and beam selection), :mod:`.candidate` (candidates and the noise
rule), :mod:`.proposing` (plans, samples and fixes of one iteration), :mod:`.trials` (evaluating
each distinct candidate once), :mod:`.retime` (re-timing finalists), :mod:`.learning` (experiences
for the optimization memory), :mod:`.budget` (tokens, wall time), :mod:`.report` (the report) and
:mod:`.events` (typed events)."""

from accelopt_core.search.beam import BeamSearch, select_beam
from accelopt_core.search.candidate import (
    FIXABLE,
    Candidate,
    candidate_id,
    is_faster,
    rank_verified,
)
from accelopt_core.search.events import (
    CandidateEvaluated,
    IterationStarted,
    NewBest,
    SearchEvent,
    SearchFinished,
    SearchStarted,
)
from accelopt_core.search.report import SearchReport

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
