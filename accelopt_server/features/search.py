"""Search jobs: background beam searches with work-done progress, cancellation and a summary.

Commands:

* ``accelopt.optimize [uri, kernelName]`` -> ``{jobId, started, message?}``
* ``accelopt.cancel [jobId]`` or ``[uri, kernelName]`` -> ``{cancelled, message?}``
* ``accelopt.listJobs []`` -> ``[{jobId, uri, kernel, state, iteration, iterations,
  bestSpeedup, evaluated, failed, message}]``

Every failed sample or candidate is logged as it happens (``window/logMessage``: its stage,
plan, line and full reason), counted in the progress message, and summed up by stage when the
search ends; a search stopped because no LLM call can succeed (missing or rejected API key)
says so once, as an error.

The client's "Cancel" on the progress notification (``window/workDoneProgress/cancel``) cancels
the job too. A finished search's report goes to :class:`~.results.ResultsFeature`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from accelopt_core.devicefacts import not_timed

from ..jobs import planned_evaluations
from .base import LanguageFeature, command_args, refusal
from .results import ResultsFeature
from .search_view import SearchViewFeature

if TYPE_CHECKING:
    from accelopt_core.search import SearchEvent

    from ..jobs import SearchJob

log = logging.getLogger("accelopt.server")


class SearchJobsFeature(LanguageFeature):
    """``accelopt.optimize`` / ``accelopt.cancel`` / ``accelopt.listJobs`` and their progress."""

    async def cmd_optimize(self, *args: Any) -> dict[str, Any]:
        """``accelopt.optimize [uri, kernelName]``: start a search of the kernel."""
        uri, kernel = command_args("accelopt.optimize", args, ["uri", "kernelName"])

        def refused(message: str, job_id: str | None = None) -> dict[str, Any]:
            log.info("optimize %s refused: %s", kernel, message)
            return {"jobId": job_id, "started": False, "message": message}

        doc, kf = await self.ctx.docs.parsed(uri)
        problem = refusal(uri, doc, kf, kernel)
        if problem is not None:
            return refused(problem)
        existing = self.ctx.jobs.active_job(uri, kernel)
        if existing is not None:
            return refused(f"a search of {kernel} is already running ({existing.id})", existing.id)
        settings = self.ctx.settings(uri)
        try:
            search = await self.ctx.adapter.new_search(settings, kf, kernel)
        except Exception as exc:
            return refused(str(exc) or type(exc).__name__)
        job, started = self.ctx.jobs.start_search(
            uri,
            kernel,
            doc.version,
            search,
            on_start=self._started,
            on_event=self._event,
            on_done=self._done,
        )
        if not started:
            return refused(f"a search of {kernel} is already running ({job.id})", job.id)
        s = settings.search
        job.planned = planned_evaluations(
            s.beam_width, s.plans_per_candidate, s.samples_per_plan, s.iterations
        )
        message = (
            f"searching {kernel}: B={s.beam_width}, N={s.plans_per_candidate}, "
            f"K={s.samples_per_plan}, T={s.iterations} on {settings.target}"
        )
        log.info("%s started: %s", job.id, message)
        self.ctx.refresh_lenses()
        return {"jobId": job.id, "started": True, "message": message}

    async def _started(self, job: SearchJob) -> None:
        """The job got a target slot: begin a cancellable work-done progress if the client can."""
        self.ctx.refresh_lenses()
        if not self.ctx.capability("window.work_done_progress", False):
            return
        token = f"accelopt-{job.id}"
        try:
            await self.ctx.progress.create_async(token)
        except Exception as exc:
            log.debug("client refused progress for %s: %s", job.id, exc)
            return
        job.progress_token = token
        self.ctx.progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title=f"AccelOpt: optimizing {job.kernel}",
                cancellable=True,
                message=job.status_line(),
                percentage=0,
            ),
        )

    def _event(self, job: SearchJob, event: SearchEvent) -> None:
        """Report the search's progress (iterations, evaluations, new bests); refresh the lenses
        at its milestones (start, each iteration, each new best)."""
        from accelopt_core.search import (
            CandidateEvaluated,
            CandidateFailed,
            IterationStarted,
            NewBest,
            SearchStarted,
        )

        self.ctx.feature(SearchViewFeature).job_event(job, event)
        if isinstance(event, CandidateFailed):
            f = event.failure
            log.info("%s: candidate failed: %s\n%s", job.kernel, f.headline(), f.reason)
        if isinstance(event, NewBest):
            log.info(
                "%s: new best %.2fx — %s", job.kernel, event.speedup, event.candidate.plan_title
            )
        milestone = isinstance(event, (IterationStarted, NewBest, SearchStarted))
        if not milestone and not isinstance(event, (CandidateEvaluated, CandidateFailed)):
            return
        before = job.percent
        pct = job.percentage()
        if job.progress_token is not None and (milestone or pct != before):
            self.ctx.progress.report(
                job.progress_token,
                types.WorkDoneProgressReport(
                    message=job.status_line(), percentage=pct, cancellable=True
                ),
            )
        if milestone:
            self.ctx.refresh_lenses()

    def _done(self, job: SearchJob) -> None:
        """Keep the report, end the progress and tell the user how the search went."""
        report = job.report
        if report is not None:
            self.ctx.feature(ResultsFeature).store(job.uri, job.kernel, report)
            for warning in report.warnings:
                log.warning("%s: %s", job.kernel, warning)
            self.ctx.warn_once(report.warnings)  # candidates ran unconfined: once a session
        self.ctx.feature(SearchViewFeature).job_done(job)
        summary = _summary(job)
        if job.progress_token is not None:  # 100% first: an end carries no percentage
            self.ctx.progress.report(
                job.progress_token,
                types.WorkDoneProgressReport(message=summary, percentage=job.percentage()),
            )
            self.ctx.progress.end(job.progress_token, types.WorkDoneProgressEnd(message=summary))
        log.info("%s %s: %s", job.id, job.state, summary)
        unusable = report is not None and report.stopped_reason.startswith("LLM unusable")
        if job.state == "failed" or unusable:
            self.ctx.show(types.MessageType.Error, f"AccelOpt: {summary}")
        elif job.state != "cancelled":
            self.ctx.show(types.MessageType.Info, f"AccelOpt: {summary}")
        self.ctx.refresh_lenses()

    def progress_cancelled(self, token: int | str) -> None:
        """``window/workDoneProgress/cancel``: the user cancelled a search's progress."""
        job = self.ctx.jobs.by_token(token)
        if job is not None:
            log.info("client cancelled %s", job.id)
            self.ctx.jobs.cancel(job)

    async def cmd_cancel(self, *args: Any) -> dict[str, Any]:
        """``accelopt.cancel [jobId]`` or ``[uri, kernelName]``: stop a search (its partial
        report is kept)."""
        if len(args) == 1 and isinstance(args[0], str):
            job = self.ctx.jobs.find(args[0])
            if job is None:
                return {"cancelled": False, "message": f"no job {args[0]}"}
        else:
            uri, kernel = command_args("accelopt.cancel", args, ["uri", "kernelName"])
            job = self.ctx.jobs.active_job(uri, kernel)
            if job is None:
                return {"cancelled": False, "message": f"no search of {kernel} is running"}
        cancelled = self.ctx.jobs.cancel(job)
        self.ctx.refresh_lenses()
        if cancelled:
            return {"cancelled": True}
        return {"cancelled": False, "message": f"{job.id} already {job.state}"}

    async def cmd_list_jobs(self, *args: Any) -> list[dict[str, Any]]:
        """``accelopt.listJobs []``: every remembered job, oldest first."""
        command_args("accelopt.listJobs", args, [])
        return [job.to_dict() for job in self.ctx.jobs.list()]


def _summary(job: SearchJob) -> str:
    """One line on how a search ended (the progress end and the message shown), with the
    failed candidates counted by stage."""
    report = job.report
    if job.state == "failed":
        return f"search of {job.kernel} failed: {job.message}"
    failed = _failed(report.failed_candidates) if report is not None else ""
    if report is not None and report.stopped_reason.startswith("LLM unusable"):
        return f"search of {job.kernel} stopped: {report.stopped_reason}"
    if report is not None and report.candidates:
        best = report.candidates[0]
        return (
            f"{job.kernel}: {len(report.candidates)} verified improvement(s), best "
            f"{best.speedup:.2f}x ({report.stopped_reason}){failed}; see the code actions on "
            "the kernel"
        )
    untimed = not_timed(report.baseline.result.metrics) if report is not None else None
    if untimed:  # issue 21: the kernel compiles for the GPU, the interpreter cannot run it
        return f"{job.kernel}: not ranked: ranking needs timing on a GPU target; {untimed}"
    stopped = report.stopped_reason if report is not None else job.state
    return f"{job.kernel}: no verified improvement ({stopped}){failed}"


def _failed(failed: list) -> str:
    """``; 3 failed (parse 1, compile 2): reasons in the AccelOpt output`` or ``""``."""
    if not failed:
        return ""
    from accelopt_core.search.report import failure_counts  # loaded once a search exists

    counts = ", ".join(f"{stage} {n}" for stage, n in failure_counts(failed).items())
    return f"; {len(failed)} failed ({counts}): reasons in the AccelOpt output"
