"""The job manager: background searches and on-save profiles as asyncio tasks.

* Search jobs: one per (document URI, kernel). At most ``capacity()`` run at once (the target's
  capacity: more searches than evaluation slots would only queue evaluations); the rest wait in
  state ``queued``. :meth:`JobManager.cancel` asks the search to stop
  (:meth:`accelopt_core.search.BeamSearch.cancel`, which returns the partial report within a
  second) and, should it not finish within ``cancel_grace_s``, cancels its task.
* Profile runs: one per document, debounced: a newer request for the same document cancels the
  older run (its evaluations are cancelled with it) and starts after ``debounce_s``.

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
from typing import Any, Literal

log = logging.getLogger("accelopt.server.jobs")

JobState = Literal["queued", "running", "finished", "cancelled", "failed"]
ACTIVE: tuple[str, ...] = ("queued", "running")


@dataclass
class SearchJob:
    """One background search.

    Attributes:
        id: ``job-N``, unique in this server process.
        uri / kernel: the document and the kernel searched.
        state: ``queued`` -> ``running`` -> ``finished`` | ``cancelled`` | ``failed``.
        iteration / iterations: current iteration t of T (0 before the first).
        best_speedup: best verified speedup so far (baseline latency / candidate latency).
        evaluated: candidates evaluated so far.
        message: last status line (or the error of a failed job).
        report: the :class:`accelopt_core.search.SearchReport` once it ended.
        version: the document version the search started from.
    """

    id: str
    uri: str
    kernel: str
    version: int | None
    search: Any
    state: JobState = "queued"
    iteration: int = 0
    iterations: int = 0
    best_speedup: float | None = None
    evaluated: int = 0
    message: str = ""
    report: Any = None
    started_at: float = field(default_factory=time.time)
    task: asyncio.Task[None] | None = None
    progress_token: str | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def status_line(self) -> str:
        """``iteration 2/4 · best 1.8x`` (the code lens text while it runs)."""
        if self.state == "queued":
            return "queued (waiting for a free target slot)"
        if self.iteration == 0:
            text = "evaluating the baseline"
        else:
            text = f"iteration {self.iteration}/{self.iterations}"
        best = f"best {self.best_speedup:.2f}x" if self.best_speedup else "no improvement yet"
        return f"{text} · {best}"

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
            "message": self.message,
        }


class JobManager:
    """Owns the server's background tasks.

    Args:
        capacity: returns how many searches may run at once (>= 1), read when a job starts.
        cancel_grace_s: how long a cancelled search may take to return its partial report
            before its task is cancelled outright (s).
        keep_finished: how many ended jobs are remembered for ``accelopt.listJobs``.
    """

    def __init__(
        self,
        capacity: Callable[[], int] = lambda: 1,
        *,
        cancel_grace_s: float = 2.0,
        keep_finished: int = 50,
    ) -> None:
        self._capacity = capacity
        self._grace = cancel_grace_s
        self._keep = keep_finished
        self._ids = itertools.count(1)
        self.jobs: dict[str, SearchJob] = {}
        self._running = 0
        self._slot_free: asyncio.Condition | None = None
        self._profiles: dict[str, asyncio.Task[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- searches -------------------------------------------------------------------------------

    def active_job(self, uri: str, kernel: str) -> SearchJob | None:
        """The queued or running job of this kernel, if any."""
        for job in self.jobs.values():
            if job.uri == uri and job.kernel == kernel and job.active:
                return job
        return None

    def find(self, job_id: str) -> SearchJob | None:
        return self.jobs.get(job_id)

    def by_token(self, token: Any) -> SearchJob | None:
        for job in self.jobs.values():
            if job.progress_token == token:
                return job
        return None

    def start_search(
        self,
        uri: str,
        kernel: str,
        version: int | None,
        search: Any,
        *,
        on_start: Callable[[SearchJob], Awaitable[None]] | None = None,
        on_event: Callable[[SearchJob, Any], None] | None = None,
        on_done: Callable[[SearchJob], None] | None = None,
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
        if hasattr(search, "subscribe"):
            search.subscribe(lambda event: self._on_event(job, event, on_event))
        job.task = self._spawn(self._run(job, on_start, on_done))
        return job, True

    def _on_event(
        self, job: SearchJob, event: Any, callback: Callable[[SearchJob, Any], None] | None
    ) -> None:
        name = type(event).__name__
        if name == "SearchStarted":
            job.iterations = getattr(event, "iterations", job.iterations)
        elif name == "IterationStarted":
            job.iteration = event.iteration
            job.iterations = event.iterations
        elif name == "CandidateEvaluated":
            job.evaluated += 1
        elif name == "NewBest":
            job.best_speedup = event.speedup
        job.message = job.status_line()
        if callback is not None:
            try:
                callback(job, event)
            except Exception:
                log.exception("search event handler failed for %s", job.id)

    async def _run(
        self,
        job: SearchJob,
        on_start: Callable[[SearchJob], Awaitable[None]] | None,
        on_done: Callable[[SearchJob], None] | None,
    ) -> None:
        acquired = False
        try:
            await self._acquire()
            acquired = True
            if job.state != "queued":  # cancelled while waiting
                return
            job.state = "running"
            job.message = job.status_line()
            if on_start is not None:
                try:
                    await on_start(job)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("could not announce %s", job.id)
            report = await job.search.run()
            job.report = report
            stopped = getattr(report, "stopped_reason", "completed")
            job.state = "cancelled" if stopped == "cancelled" else "finished"
            best = getattr(report, "best", None)
            if best is not None and best.speedup:
                job.best_speedup = best.speedup
            job.message = f"{job.state}: {stopped}"
        except asyncio.CancelledError:
            job.state = "cancelled"
            job.message = "cancelled"
        except Exception as exc:
            job.state = "failed"
            job.message = str(exc) or type(exc).__name__
            log.warning("search %s on %s failed: %s", job.id, job.kernel, job.message)
        finally:
            if acquired:
                await self._release()
            if job.state in ACTIVE:
                job.state = "cancelled"
            if on_done is not None:
                try:
                    on_done(job)
                except Exception:
                    log.exception("search completion handler failed for %s", job.id)

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
        self._spawn(self._watchdog(job))
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

    async def _acquire(self) -> None:
        if self._slot_free is None:
            self._slot_free = asyncio.Condition()
        async with self._slot_free:
            await self._slot_free.wait_for(lambda: self._running < max(1, self._capacity()))
            self._running += 1

    async def _release(self) -> None:
        assert self._slot_free is not None
        async with self._slot_free:
            self._running -= 1
            self._slot_free.notify_all()

    def list(self) -> list[SearchJob]:
        """All remembered jobs, oldest first."""
        return list(self.jobs.values())

    def _trim(self) -> None:
        ended = [j for j in self.jobs.values() if not j.active]
        for job in ended[: max(0, len(ended) - self._keep)]:
            del self.jobs[job.id]

    # -- profiles -------------------------------------------------------------------------------

    def schedule_profile(
        self, key: str, run: Callable[[], Awaitable[None]], debounce_s: float = 0.25
    ) -> asyncio.Task[Any]:
        """Run ``run()`` after ``debounce_s`` seconds, cancelling any earlier run for ``key``
        (a document URI) that is still waiting or running."""
        old = self._profiles.pop(key, None)
        if old is not None and not old.done():
            old.cancel()

        async def delayed() -> None:
            await asyncio.sleep(debounce_s)
            await run()

        task = self._spawn(delayed())
        self._profiles[key] = task
        task.add_done_callback(
            lambda t: self._profiles.pop(key, None) if self._profiles.get(key) is t else None
        )
        return task

    def profile_task(self, key: str) -> asyncio.Task[Any] | None:
        """The pending or running profile of ``key``, if any."""
        task = self._profiles.get(key)
        return task if task is not None and not task.done() else None

    def cancel_profile(self, key: str) -> bool:
        task = self._profiles.pop(key, None)
        if task is not None and not task.done():
            task.cancel()
            return True
        return False

    # -- plumbing -------------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task failed: %s", t.exception())

        task.add_done_callback(done)
        return task

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run a coroutine in the background, keeping a reference and logging its failure."""
        return self._spawn(coro)

    async def close(self) -> None:
        """Cancel everything (server shutdown) and wait for the tasks to end."""
        for job in list(self.jobs.values()):
            if job.active:
                self.cancel(job)
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self._grace + 0.5)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
