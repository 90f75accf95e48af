"""Background searches: one job per (document URI, kernel), at most ``capacity()`` at once.

At most ``capacity()`` searches run at once (the target's capacity: more searches than evaluation
slots would only queue evaluations); the rest wait in state ``queued``. :meth:`JobManager.cancel`
asks the search to stop (:meth:`accelopt_core.search.BeamSearch.cancel`, which returns the partial
report within a second) and, should it not finish within ``cancel_grace_s``, cancels its task.
A job follows its search through the search's typed events (:mod:`accelopt_core.search`).

Nothing here blocks the event loop; all callbacks run on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .tasks import BackgroundTasks

if TYPE_CHECKING:
    from accelopt_core.search import SearchEvent, SearchReport

log = logging.getLogger("accelopt.server.jobs")

JobState = Literal["queued", "running", "finished", "cancelled", "failed"]
ACTIVE: tuple[str, ...] = ("queued", "running")


class Search(Protocol):
    """What a job runs: :class:`accelopt_core.search.BeamSearch` (or a test's stand-in)."""

    def subscribe(self, callback: Callable[[SearchEvent], None]) -> None: ...

    def cancel(self) -> None: ...

    async def run(self) -> SearchReport: ...


@dataclass
class SearchJob:
    """One background search.

    Attributes:
        id: ``job-N``, unique in this server process.
        uri / kernel: the document and the kernel searched.
        state: ``queued`` -> ``running`` -> ``finished`` | ``cancelled`` | ``failed``.
        iteration / iterations: current iteration t of T (0 before the first).
        best_speedup: best verified speedup so far (baseline latency / candidate latency).
        evaluated: candidates evaluated so far (the baseline included).
        failed: samples and candidates that failed so far (issue 30: each is logged with its
            reason; the report lists them).
        planned: evaluations the search plans, 0 when unknown (see :func:`planned_evaluations`).
        percent: the work-done percentage reported so far (:meth:`percentage`).
        message: last status line (or the error of a failed job).
        report: the :class:`accelopt_core.search.SearchReport` once it ended.
        version: the document version the search started from.
    """

    id: str
    uri: str
    kernel: str
    version: int | None
    search: Search
    state: JobState = "queued"
    iteration: int = 0
    iterations: int = 0
    best_speedup: float | None = None
    evaluated: int = 0
    failed: int = 0
    planned: int = 0
    percent: int = 0
    message: str = ""
    report: SearchReport | None = None
    started_at: float = field(default_factory=time.time)
    task: asyncio.Task[None] | None = None
    progress_token: str | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def status_line(self) -> str:
        """``iteration 2/4 · best 1.8x · 3 failed`` (the code lens text while it runs)."""
        if self.state == "queued":
            return "queued (waiting for a free target slot)"
        if self.iteration == 0:
            text = "evaluating the baseline"
        else:
            text = f"iteration {self.iteration}/{self.iterations}"
        best = f"best {self.best_speedup:.2f}x" if self.best_speedup else "no improvement yet"
        failed = f" · {self.failed} failed" if self.failed else ""
        return f"{text} · {best}{failed}"

    def percentage(self) -> int:
        """Work done, 0..100: the larger of evaluations done / planned and iterations done / T,
        never decreasing, at most 99 while the search runs and 100 once it ended."""
        if not self.active:
            self.percent = 100
            return 100
        done = [max(self.iteration - 1, 0) / self.iterations] if self.iterations else []
        if self.planned:
            done.append(self.evaluated / self.planned)
        self.percent = max(self.percent, min(99, int(100 * max(done, default=0.0))))
        return self.percent

    def apply(self, event: SearchEvent) -> None:
        """Follow the search: count iterations, evaluations and the best speedup."""
        # imported here: the search module is loaded once a search exists, not at start-up
        from accelopt_core.search import (
            CandidateEvaluated,
            CandidateFailed,
            IterationStarted,
            NewBest,
            SearchStarted,
        )

        match event:
            case CandidateFailed():
                self.failed += 1
            case SearchStarted():
                self.iterations = event.iterations
            case IterationStarted():
                self.iteration = event.iteration
                self.iterations = event.iterations
            case CandidateEvaluated():
                self.evaluated += 1
            case NewBest():
                self.best_speedup = event.speedup
        self.message = self.status_line()

    def finish(self, report: SearchReport) -> None:
        """Record the report of a search that returned (completed, stopped or cancelled)."""
        self.report = report
        stopped = report.stopped_reason
        self.state = "cancelled" if stopped == "cancelled" else "finished"
        best = report.best
        if best is not None and best.speedup:
            self.best_speedup = best.speedup
        self.message = f"{self.state}: {stopped}"

    def to_dict(self) -> dict[str, Any]:
        """The ``accelopt.listJobs`` entry."""
        return {
            "jobId": self.id,
            "uri": self.uri,
            "kernel": self.kernel,
            "state": self.state,
            "iteration": self.iteration,
            "iterations": self.iterations,
            "bestSpeedup": self.best_speedup,
            "evaluated": self.evaluated,
            "failed": self.failed,
            "message": self.message,
        }


def planned_evaluations(beam_width: int, plans: int, samples: int, iterations: int) -> int:
    """Evaluations a beam search plans (B, N, K, T as in the settings): the baseline, then
    N x K rewrites of the baseline in the first iteration and B x N x K in each later one
    (the beam holds at most B parents). Re-timings of beam entrants are not counted."""
    per_parent = max(plans, 0) * max(samples, 0)
    if iterations <= 0:
        return 1
    return 1 + per_parent + (iterations - 1) * max(beam_width, 1) * per_parent


class _Slots:
    """Admits at most ``capacity()`` holders at once (read on every admission, >= 1)."""

    def __init__(self, capacity: Callable[[], int]) -> None:
        self._capacity = capacity
        self._held = 0
        self._free: asyncio.Condition | None = None

    async def acquire(self) -> None:
        if self._free is None:
            self._free = asyncio.Condition()
        async with self._free:
            await self._free.wait_for(lambda: self._held < max(1, self._capacity()))
            self._held += 1

    async def release(self) -> None:
        assert self._free is not None
        async with self._free:
            self._held -= 1
            self._free.notify_all()


OnStart = Callable[[SearchJob], Awaitable[None]]
OnEvent = Callable[[SearchJob, "SearchEvent"], None]
OnDone = Callable[[SearchJob], None]


class JobManager:
    """Owns the server's background searches.

    Args:
        capacity: returns how many searches may run at once (>= 1), read when a job starts.
        cancel_grace_s: how long a cancelled search may take to return its partial report
            before its task is cancelled outright (s).
        keep_finished: how many ended jobs are remembered for ``accelopt.listJobs``.
        tasks: where the jobs' tasks run (shared with the server's other background work, which
            :meth:`close` then waits for too); a private one by default.
    """

    def __init__(
        self,
        capacity: Callable[[], int] = lambda: 1,
        *,
        cancel_grace_s: float = 2.0,
        keep_finished: int = 50,
        tasks: BackgroundTasks | None = None,
    ) -> None:
        self._slots = _Slots(capacity)
        self._grace = cancel_grace_s
        self._keep = keep_finished
        self._tasks = tasks if tasks is not None else BackgroundTasks()
        self._ids = itertools.count(1)
        self.jobs: dict[str, SearchJob] = {}

    def active_job(self, uri: str, kernel: str) -> SearchJob | None:
        """The queued or running job of this kernel, if any."""
        for job in self.jobs.values():
            if job.uri == uri and job.kernel == kernel and job.active:
                return job
        return None

    def find(self, job_id: str) -> SearchJob | None:
        """The job with this id (while it is remembered)."""
        return self.jobs.get(job_id)

    def by_token(self, token: object) -> SearchJob | None:
        """The job whose work-done progress has this token."""
        for job in self.jobs.values():
            if job.progress_token == token:
                return job
        return None

    def list(self) -> list[SearchJob]:
        """All remembered jobs, oldest first."""
        return list(self.jobs.values())

    def start_search(
        self,
        uri: str,
        kernel: str,
        version: int | None,
        search: Search,
        *,
        on_start: OnStart | None = None,
        on_event: OnEvent | None = None,
        on_done: OnDone | None = None,
    ) -> tuple[SearchJob, bool]:
        """Start ``search`` (a :class:`~accelopt_core.search.BeamSearch`) in the background.

        Returns ``(job, True)``, or ``(existing_job, False)`` when this kernel already has an
        active job (``search`` is then not used). ``on_start`` is awaited once a slot is free,
        before the search runs (progress creation); ``on_event(job, event)`` sees every search
        event after the job's fields were updated; ``on_done(job)`` runs when the job ended in
        any state. Exceptions in the callbacks are logged and ignored.
        """
        existing = self.active_job(uri, kernel)
        if existing is not None:
            return existing, False
        job = SearchJob(
            id=f"job-{next(self._ids)}", uri=uri, kernel=kernel, version=version, search=search
        )
        self.jobs[job.id] = job
        self._trim()
        search.subscribe(lambda event: self._on_event(job, event, on_event))
        job.task = self._tasks.spawn(self._run(job, on_start, on_done))
        return job, True

    def _on_event(self, job: SearchJob, event: SearchEvent, callback: OnEvent | None) -> None:
        job.apply(event)
        if callback is not None:
            try:
                callback(job, event)
            except Exception:
                log.exception("search event handler failed for %s", job.id)

    async def _run(self, job: SearchJob, on_start: OnStart | None, on_done: OnDone | None) -> None:
        acquired = False
        try:
            await self._slots.acquire()
            acquired = True
            if job.state == "queued":  # else cancelled while waiting
                await self._execute(job, on_start)
        except asyncio.CancelledError:
            job.state = "cancelled"
            job.message = "cancelled"
        except Exception as exc:
            job.state = "failed"
            job.message = str(exc) or type(exc).__name__
            log.warning("search %s on %s failed: %s", job.id, job.kernel, job.message)
        finally:
            if acquired:
                await self._slots.release()
            if job.state in ACTIVE:
                job.state = "cancelled"
            if on_done is not None:
                try:
                    on_done(job)
                except Exception:
                    log.exception("search completion handler failed for %s", job.id)

    async def _execute(self, job: SearchJob, on_start: OnStart | None) -> None:
        job.state = "running"
        job.message = job.status_line()
        if on_start is not None:
            try:
                await on_start(job)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not announce %s", job.id)
        job.finish(await job.search.run())

    def cancel(self, job: SearchJob) -> bool:
        """Stop a job: a queued one at once, a running one through its search's ``cancel()``
        (partial report kept), with its task cancelled after the grace period if need be.
        Returns False when the job had already ended."""
        if not job.active:
            return False
        if job.state == "queued":
            job.state = "cancelled"
            job.message = "cancelled before it started"
            if job.task is not None:
                job.task.cancel()
            return True
        job.message = "cancelling"
        with contextlib.suppress(Exception):
            job.search.cancel()
        self._tasks.spawn(self._watchdog(job))
        return True

    async def _watchdog(self, job: SearchJob) -> None:
        if job.task is None:
            return
        done, _ = await asyncio.wait({job.task}, timeout=self._grace)
        if not done:
            log.warning(
                "search %s did not stop within %.1f s; cancelling its task", job.id, self._grace
            )
            job.task.cancel()

    def _trim(self) -> None:
        ended = [j for j in self.jobs.values() if not j.active]
        for job in ended[: max(0, len(ended) - self._keep)]:
            del self.jobs[job.id]

    async def close(self) -> None:
        """Cancel every active job (server shutdown) and wait for the background tasks to end."""
        for job in list(self.jobs.values()):
            if job.active:
                self.cancel(job)
        await self._tasks.close(self._grace + 0.5)
