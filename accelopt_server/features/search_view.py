"""The search as a picture (issue 32): the view an editor draws, kept live while it runs.

Commands:

* ``accelopt.searchView [uri, kernelName]`` -> ``{uri, kernel, jobId, running, view, assets,
  actions, message?}``: the kernel's running or last search as a view
  (:func:`accelopt_core.report.build_view`), the files a webview draws it with (``assets``:
  ``plotly``, ``script``, ``style``; None when Plotly is missing, with ``message``) and, per
  ranked candidate still offered, the titles of its code actions (``actions``: ``{id:
  {title, previewTitle}}``). Until ``accelopt.searchViewClosed`` the client then gets
  ``accelopt/searchView`` notifications ``{uri, kernel, jobId, delta}`` (what changed, at most
  every :data:`FLUSH_S` s) and, when the search ends, ``{uri, kernel, jobId, view, actions}``.
* ``accelopt.searchViewClosed [uri, kernelName]`` -> ``{watching: false}``.
* ``accelopt.showSearch [uri, kernelName?]`` -> ``{path, kernel, message}``: the same view as a
  self-contained HTML file, ``<memoryDir>/reports/<file>-<kernel>.html`` (also shown as
  ``window/showMessage``): what the "Show Search" lens runs in editors without a webview
  (Neovim); the VS Code extension opens its webview instead.

Views are made off the event loop (a thread), one at a time per search; the loop only keeps
the search's events.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from .. import present
from ..documents import uri_path
from .base import LanguageFeature, command_args
from .results import ResultsFeature

if TYPE_CHECKING:
    from accelopt_core.search import SearchEvent

    from ..context import ServerContext
    from ..jobs import SearchJob

log = logging.getLogger("accelopt.server")

#: The custom notification carrying a watched search's changes.
NOTIFICATION = "accelopt/searchView"
#: At most one notification per this many seconds per search.
FLUSH_S = 0.5


class SearchViewFeature(LanguageFeature):
    """``accelopt.searchView``, ``accelopt.searchViewClosed``, ``accelopt.showSearch`` and the
    live notifications."""

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        self._live: dict[str, Any] = {}  # job id -> LiveView
        self._locks: dict[str, asyncio.Lock] = {}
        self._watched: set[tuple[str, str]] = set()
        self._pending: set[str] = set()

    # -- the search's events (called by SearchJobsFeature) -----------------------------------

    def job_event(self, job: SearchJob, event: SearchEvent) -> None:
        """Keep ``event`` in the job's live view; a watched search sends its changes soon."""
        if self._live_of(job).apply(event) and (job.uri, job.kernel) in self._watched:
            self._schedule(job)

    def _live_of(self, job: SearchJob) -> Any:
        """The job's :class:`~accelopt_core.report.LiveView` (made on first use)."""
        live = self._live.get(job.id)
        if live is None:
            from accelopt_core.report import LiveView

            target = self.ctx.settings(job.uri).target
            live = self._live[job.id] = LiveView(uri_path(job.uri), job.kernel, target)
        return live

    def job_done(self, job: SearchJob) -> None:
        """The search ended: a watched one sends its final view; live views of older searches
        of the kernel, and of forgotten jobs, are dropped."""
        live = self._live.get(job.id)
        if live is not None and job.report is None:
            live.end(job.state)
        for jid in list(self._live):
            other = self.ctx.jobs.find(jid)
            if jid != job.id and (
                other is None or (other.uri, other.kernel) == (job.uri, job.kernel)
            ):
                self._live.pop(jid, None)
                self._locks.pop(jid, None)
        if (job.uri, job.kernel) in self._watched:
            self.ctx.tasks.spawn(self._send(job, final=True))

    def _schedule(self, job: SearchJob) -> None:
        if job.id in self._pending:
            return
        self._pending.add(job.id)
        asyncio.get_running_loop().call_later(
            FLUSH_S, lambda: self.ctx.tasks.spawn(self._send(job, final=False))
        )

    async def _send(self, job: SearchJob, *, final: bool) -> None:
        self._pending.discard(job.id)
        live = self._live.get(job.id)
        if live is None or (job.uri, job.kernel) not in self._watched:
            return
        async with self._lock(job.id):
            if final:
                view = await asyncio.to_thread(live.view)
                actions = await self._actions(job.uri, job.kernel)
                body = {"view": view, "actions": actions}
            elif not live.changed:
                return
            else:
                body = {"delta": await asyncio.to_thread(live.delta)}
        self.ctx.notify(
            NOTIFICATION, {"uri": job.uri, "kernel": job.kernel, "jobId": job.id, **body}
        )

    def _lock(self, job_id: str) -> asyncio.Lock:
        return self._locks.setdefault(job_id, asyncio.Lock())

    # -- commands ------------------------------------------------------------------------------

    async def _view(self, uri: str, kernel: str) -> tuple[dict[str, Any] | None, Any]:
        """The kernel's running or last search as a view, and its job (None without one)."""
        job = self.ctx.jobs.active_job(uri, kernel) or self._last_job(uri, kernel)
        if job is not None and (job.active or job.id in self._live):
            live = self._live_of(job)
            async with self._lock(job.id):
                return await asyncio.to_thread(live.view), job
        report = (
            self.ctx.docs.state(uri).reports.get(kernel) if uri in self.ctx.docs.states else None
        )
        if report is None:
            return None, None
        from accelopt_core.report import build_view

        return await asyncio.to_thread(lambda: build_view(report.to_dict())), None

    def _last_job(self, uri: str, kernel: str) -> SearchJob | None:
        jobs = [j for j in self.ctx.jobs.list() if (j.uri, j.kernel) == (uri, kernel)]
        return jobs[-1] if jobs else None

    async def _actions(self, uri: str, kernel: str) -> dict[str, dict[str, str]]:
        """The code-action titles of each ranked candidate still offered (the webview's
        Preview and Apply pick these actions)."""
        doc, kf = await self.ctx.docs.parsed(uri)
        if doc is None or kf is None or kernel not in kf.kernel_names:
            return {}
        offered = await self.ctx.feature(ResultsFeature).offered_candidates(uri, kf, kernel)
        return {
            c.id: {
                "title": present.candidate_title(c),
                "previewTitle": present.candidate_title(c, preview=True),
            }
            for c in offered
        }

    async def cmd_search_view(self, *args: Any) -> dict[str, Any]:
        """``accelopt.searchView [uri, kernelName]``: the view, its assets and actions; the
        kernel is watched (live notifications) until ``accelopt.searchViewClosed``."""
        uri, kernel = command_args("accelopt.searchView", args, ["uri", "kernelName"])
        from accelopt_core.report import ReportUnavailable, asset_paths

        self._watched.add((uri, kernel))
        view, job = await self._view(uri, kernel)
        out: dict[str, Any] = {
            "uri": uri,
            "kernel": kernel,
            "jobId": job.id if job is not None else None,
            "running": bool(job is not None and job.active),
            "view": view,
            "actions": await self._actions(uri, kernel) if view is not None else {},
        }
        try:
            out["assets"] = asset_paths()
        except ReportUnavailable as exc:
            out["assets"], out["message"] = None, str(exc)
        if view is None:
            out["message"] = f"no search of {kernel} yet: run AccelOpt: Optimize Kernel"
        return out

    async def cmd_search_view_closed(self, *args: Any) -> dict[str, Any]:
        """``accelopt.searchViewClosed [uri, kernelName]``: stop the live notifications."""
        uri, kernel = command_args("accelopt.searchViewClosed", args, ["uri", "kernelName"])
        self._watched.discard((uri, kernel))
        return {"watching": False}

    async def cmd_show_search(self, *args: Any) -> dict[str, Any]:
        """``accelopt.showSearch [uri, kernelName?]``: write the kernel's search (the latest
        searched kernel of the file without ``kernelName``) as an HTML file and say where."""
        uri, kernel = command_args("accelopt.showSearch", args, ["uri"], ["kernelName"])
        if kernel is None:
            jobs = [j for j in self.ctx.jobs.list() if j.uri == uri]
            reports = self.ctx.docs.state(uri).reports if uri in self.ctx.docs.states else {}
            kernel = jobs[-1].kernel if jobs else next(iter(reports), None)
        view = (await self._view(uri, kernel))[0] if kernel else None
        if view is None:
            message = f"AccelOpt: no search of {kernel or 'a kernel of this file'} yet"
            self.ctx.show(types.MessageType.Warning, message)
            return {"path": None, "kernel": kernel, "message": message}
        from accelopt_core.report import ReportUnavailable, write_html

        stem = re.sub(r"[^\w.-]+", "_", f"{Path(uri_path(uri)).stem}-{kernel}")
        where = self.ctx.settings(uri).resolved_memory_dir() / "reports" / f"{stem}.html"
        try:
            path = str(await asyncio.to_thread(write_html, view, where))
        except (ReportUnavailable, OSError) as exc:
            message = f"AccelOpt: cannot write the search report of {kernel}: {exc}"
            self.ctx.show(types.MessageType.Error, message)
            return {"path": None, "kernel": kernel, "message": message}
        message = f"AccelOpt: the search of {kernel}, as a page: {path}"
        self.ctx.show(types.MessageType.Info, message)
        return {"path": path, "kernel": kernel, "message": message}
