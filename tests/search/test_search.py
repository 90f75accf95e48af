"""A whole BeamSearch (accelopt_core.search.beam) with the real evaluator (worker subprocesses,
Triton interpreter on CPU), the offline proposer and a real optimization memory: the order of its
events, what reaches the memory (only steps confirmed by re-timing), and cancellation."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile
from accelopt_core.memory import OptimizationMemory, ResultsStore
from accelopt_core.proposers.offline import OfflineProposer
from accelopt_core.search import (
    BeamSearch,
    CandidateEvaluated,
    IterationStarted,
    NewBest,
    SearchEvent,
    SearchFinished,
    SearchStarted,
)
from accelopt_core.settings import SearchSettings

pytestmark = pytest.mark.slow


async def test_search_events_memory_and_results(
    add_file: KernelFile, evaluator: Evaluator, tmp_path: Path
) -> None:
    memory = OptimizationMemory(tmp_path / "memory")
    results = ResultsStore(tmp_path / "results")
    settings = SearchSettings(iterations=1, beam_width=1, plans_per_candidate=2)
    proposer = OfflineProposer()
    search = BeamSearch(
        add_file, "add_kernel", settings, evaluator, proposer, memory=memory, results=results
    )
    events: list[SearchEvent] = []
    search.subscribe(events.append)
    report = await search.run()

    assert report.stopped_reason == "completed" and report.iterations_run == 1
    kinds = [type(e) for e in events]
    assert kinds[:3] == [CandidateEvaluated, SearchStarted, IterationStarted]
    assert kinds[-1] is SearchFinished and events[-1].report is report  # type: ignore[union-attr]
    assert kinds.count(CandidateEvaluated) == 1 + 2  # the baseline and the two rewrites
    for event in events:
        if isinstance(event, NewBest):  # only after re-timing confirmed it
            assert event.candidate.retimed and event.speedup > 1
    # T=1: every rewrite's parent is the baseline, so a confirmed step is a ranked candidate,
    # and only confirmed steps become positive experiences.
    ranked = {c.source for c in report.candidates}
    assert all(c.retimed and c.rank for c in report.candidates)
    assert {e.fast_source for e in memory.all(positive=True)} == ranked
    assert report.memory_added == len(memory)
    assert search.best is None or search.best in report.candidates
    saved = results.load(add_file.path, "add_kernel", add_file.source)
    assert saved == report.to_dict()


async def test_cancel_returns_the_partial_report_and_kills_the_workers(
    add_file: KernelFile, evaluator: Evaluator, tmp_path: Path
) -> None:
    results = ResultsStore(tmp_path / "results")
    search = BeamSearch(
        add_file, "add_kernel", SearchSettings(), evaluator, OfflineProposer(), results=results
    )
    search.subscribe(lambda e: search.cancel() if isinstance(e, IterationStarted) else None)
    report = await search.run()
    assert report.stopped_reason == "cancelled"
    assert report.baseline.result.ok and report.candidates == []
    assert evaluator.target.active_pids == set()
    assert results.load(add_file.path, "add_kernel", add_file.source) is None  # not saved
