"""The job manager's queueing / cancellation (with a scripted search object in place of a beam
search), and how a job follows the search's typed events."""

from __future__ import annotations

import asyncio

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search import (
    Candidate,
    CandidateEvaluated,
    IterationStarted,
    NewBest,
    SearchFinished,
    SearchStarted,
)
from accelopt_server.jobs import JobManager, SearchJob


class ScriptedSearch:
    """Stands in for BeamSearch: runs until cancelled or released; records what happened."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = False
        self.started = asyncio.Event()

    def subscribe(self, callback) -> None:  # noqa: ANN001
        self.callback = callback

    def cancel(self) -> None:
        self.cancelled = True
        self.release.set()

    async def run(self):  # noqa: ANN201
        self.started.set()
        await self.release.wait()
        return type(
            "Report",
            (),
            {"stopped_reason": "cancelled" if self.cancelled else "completed", "best": None},
        )()


async def test_jobs_one_per_kernel_capacity_and_cancel() -> None:
    jobs = JobManager(lambda: 1, cancel_grace_s=0.5)
    a, b = ScriptedSearch(), ScriptedSearch()
    done: list[str] = []
    job_a, started = jobs.start_search("u", "k1", 1, a, on_done=lambda j: done.append(j.id))
    assert started
    again, started_again = jobs.start_search("u", "k1", 1, ScriptedSearch())
    assert again is job_a and not started_again
    job_b, _ = jobs.start_search("u", "k2", 1, b, on_done=lambda j: done.append(j.id))
    await a.started.wait()
    await asyncio.sleep(0.05)
    assert job_a.state == "running" and job_b.state == "queued"  # capacity 1
    assert jobs.cancel(job_a)
    await asyncio.wait_for(b.started.wait(), 2)
    assert job_a.state == "cancelled" and job_b.state == "running"
    b.release.set()
    await asyncio.wait_for(job_b.task, 2)
    assert job_b.state == "finished" and done == [job_a.id, job_b.id]
    assert not jobs.cancel(job_b)


def _candidate(latency_ms: float) -> Candidate:
    result = EvalResult(status="ok", latency_ms=latency_ms, timing="interpreter")
    return Candidate(
        id="c", source="", parent_id=None, plan_title="p", plan_text="", result=result, iteration=1
    )


async def test_job_follows_the_search_events_by_type() -> None:
    jobs = JobManager()
    search = ScriptedSearch()
    seen: list[str] = []
    job, _ = jobs.start_search(
        "u", "k", 1, search, on_event=lambda j, e: seen.append(type(e).__name__)
    )
    assert isinstance(job, SearchJob)
    await asyncio.wait_for(search.started.wait(), 2)
    baseline = _candidate(2.0)
    search.callback(SearchStarted(baseline=baseline, iterations=4))
    assert job.iterations == 4 and job.iteration == 0
    search.callback(IterationStarted(iteration=2, iterations=4))
    search.callback(CandidateEvaluated(candidate=baseline))
    search.callback(CandidateEvaluated(candidate=baseline))
    search.callback(NewBest(candidate=_candidate(1.0), speedup=2.0))
    assert (job.iteration, job.evaluated, job.best_speedup) == (2, 2, 2.0)
    assert job.message == "iteration 2/4 · best 2.00x"
    search.callback(SearchFinished(report=None))  # type: ignore[arg-type]
    assert job.evaluated == 2  # other events change nothing
    assert seen == [
        "SearchStarted",
        "IterationStarted",
        "CandidateEvaluated",
        "CandidateEvaluated",
        "NewBest",
        "SearchFinished",
    ]
    search.release.set()
    await asyncio.wait_for(job.task, 2)
    await jobs.close()
