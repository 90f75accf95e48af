"""Beam search over candidate kernels (AccelOpt, arXiv 2511.15915).

Modules: :mod:`.beam` (the search: baseline, iterations, re-timing, report), :mod:`.iterations`
(the pipelined loop), :mod:`.selection` (the beam's selection rule and its certain members),
:mod:`.candidate` (candidates and the noise rule), :mod:`.proposing` (plans, samples and fixes
of one parent), :mod:`.trials` (evaluating
each distinct candidate once), :mod:`.retime` (re-timing finalists), :mod:`.learning` (experiences
for the optimization memory), :mod:`.budget` (tokens, wall time), :mod:`.report` (the report and
its failed-candidate records), :mod:`.recording` (the run's folder: plans, candidates, failures and
the agents' transcript) and :mod:`.events` (typed events)."""

from accelopt_core.search.beam import BeamSearch
from accelopt_core.search.candidate import (
    FIXABLE,
    Candidate,
    candidate_id,
    is_faster,
    rank_verified,
)
from accelopt_core.search.events import (
    CandidateEvaluated,
    CandidateFailed,
    IterationStarted,
    NewBest,
    SearchEvent,
    SearchFinished,
    SearchStarted,
)
from accelopt_core.search.report import FAILURE_STAGES, FailedCandidate, SearchReport
from accelopt_core.search.selection import select_beam

__all__ = [
    "FAILURE_STAGES",
    "FIXABLE",
    "BeamSearch",
    "Candidate",
    "CandidateEvaluated",
    "CandidateFailed",
    "FailedCandidate",
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
