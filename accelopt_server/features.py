"""The server's features: what each LSP request and command does.

One :class:`Features` object per server holds the state (settings per scope, documents, jobs,
engines) and implements every handler of :mod:`accelopt_server.server`. Core work goes through
:class:`~accelopt_server.engine_adapter.EngineAdapter`; background work through
:class:`~accelopt_server.jobs.JobManager`. No method blocks the event loop.

Commands (``workspace/executeCommand``; arguments as JSON arrays):

* ``accelopt.optimize [uri, kernelName]`` -> ``{jobId, started, message?}``
* ``accelopt.cancel [jobId]`` or ``[uri, kernelName]`` -> ``{cancelled, message?}``
* ``accelopt.profile [uri, kernelName?]`` -> ``{kernels: {name: EvalResult dict + summary,
  version}, message?}``
* ``accelopt.showMemory [uri, kernelName]`` -> markdown
* ``accelopt.clearResults [uri?]`` -> ``{cleared, reports, profiles}``
* ``accelopt.listJobs []`` -> ``[{jobId, uri, kernel, state, iteration, iterations,
  bestSpeedup, evaluated, message}]``
* ``accelopt.applyCandidate [uri, kernelName, candidateId, version]`` -> ``{applied, message?}``
  (for clients without ``codeAction/resolve``: the edit goes out as ``workspace/applyEdit``)
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcContentModified, JsonRpcInvalidParams

from accelopt_core.kernelfile import split_lines
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.settings import Settings, SettingsIssue

from . import present
from .config import ConfigManager
from .diagnostics import NO_HARNESS, parse_diagnostics, profile_diagnostic
from .documents import DocumentStore, ProfileEntry
from .edits import (
    RebaseConflict,
    from_lsp_position,
    rebase,
    text_edits,
    to_lsp_position,
    to_lsp_range,
)
from .engine_adapter import EngineAdapter
from .jobs import JobManager, SearchJob
from .logs import LOGGER_NAME, LspLogHandler, Redactor, set_level

if TYPE_CHECKING:
    from pygls.workspace import TextDocument

    from .server import AccelOptServer

log = logging.getLogger("accelopt.server")

COMMANDS: dict[str, str] = {
    "accelopt.optimize": "cmd_optimize",
    "accelopt.cancel": "cmd_cancel",
    "accelopt.profile": "cmd_profile",
    "accelopt.showMemory": "cmd_show_memory",
    "accelopt.clearResults": "cmd_clear_results",
    "accelopt.listJobs": "cmd_list_jobs",
    "accelopt.applyCandidate": "cmd_apply_candidate",
}

#: Delay between a save and its profile; a newer save within it replaces the older (s).
PROFILE_DEBOUNCE_S = 0.25
#: At most one workspace/codeLens/refresh per this many seconds.
LENS_REFRESH_S = 0.3


def _contains(rng: Any, line: int, col: int) -> bool:
    """True when (1-based line, col) lies in a SourceRange (end inclusive)."""
    return (rng.start_line, rng.start_col) <= (line, col) <= (rng.end_line, rng.end_col)


class Features:
    """State and logic behind every handler."""

    def __init__(self, ls: AccelOptServer) -> None:
        self.ls = ls
        self.redact = Redactor()
        self.config = ConfigManager(self._report_settings_issues)
        self.adapter = EngineAdapter()
        self.docs = DocumentStore(self.adapter)
        self.jobs = JobManager(self.adapter.capacity)
        self.log_handler = LspLogHandler(self._send_log, self.redact)
        self._lens_refresh: asyncio.TimerHandle | None = None
        root = logging.getLogger(LOGGER_NAME)
        root.addHandler(self.log_handler)
        root.propagate = False
        stderr = logging.StreamHandler()  # tracebacks of unexpected errors, for bug reports
        stderr.setLevel(logging.ERROR)
        root.addHandler(stderr)
        set_level("info")

    # -- plumbing -------------------------------------------------------------------------------

    def _cap(self, path: str, default: Any = None) -> Any:
        try:
            return get_capability(self.ls.client_capabilities, path, default)
        except Exception:
            return default

    def _send_log(self, params: types.LogMessageParams) -> None:
        self.ls.window_log_message(params)

    def show(self, kind: types.MessageType, text: str) -> None:
        """``window/showMessage`` with secrets removed."""
        self.ls.window_show_message(types.ShowMessageParams(type=kind, message=self.redact(text)))

    def _report_settings_issues(self, issues: list[SettingsIssue]) -> None:
        for issue in issues:
            self.show(types.MessageType.Warning, f"AccelOpt: {issue}")
            log.warning("%s", issue)

    def _document(self, uri: str) -> TextDocument | None:
        """The open document, or a file on disk; None for unknown URIs."""
        ws = self.ls.workspace
        if unquote(uri) in ws.text_documents:
            return ws.get_text_document(uri)
        if uri.startswith("file:"):
            from .documents import uri_path

            path = uri_path(uri)
            if os.path.isfile(path):
                return ws.get_text_document(uri)
        return None

    async def _parsed(self, uri: str) -> tuple[TextDocument | None, Any]:
        doc = self._document(uri)
        if doc is None:
            return None, None
        try:
            source = doc.source
        except OSError as exc:
            log.warning("cannot read %s: %s", uri, exc)
            return None, None
        return doc, await self.docs.kernel_file(uri, source, doc.version)

    def settings(self, uri: str | None) -> Settings:
        return self.config.for_uri(uri)

    def refresh_lenses(self) -> None:
        """Ask the client to re-request code lenses (throttled; only if it supports refresh)."""
        if not self._cap("workspace.code_lens.refresh_support", False):
            return
        if self._lens_refresh is not None:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._lens_refresh = None
            try:
                self.ls.workspace_code_lens_refresh(None)
            except Exception as exc:
                log.debug("codeLens refresh failed: %s", exc)

        self._lens_refresh = loop.call_later(LENS_REFRESH_S, fire)

    # -- lifecycle ------------------------------------------------------------------------------

    def initialize(self, params: types.InitializeParams) -> None:
        self.log_handler.bind(asyncio.get_running_loop())
        root = params.root_uri
        if root is None and params.workspace_folders:
            root = params.workspace_folders[0].uri
        self.config.set_init_options(params.initialization_options, root)
        self._apply_settings()

    async def initialized(self) -> None:
        await self._refresh_settings([])
        if self._cap("workspace.did_change_configuration.dynamic_registration", False):
            self.jobs.spawn(self._register_configuration())
        s = self.config.global_settings
        log.info(
            "AccelOpt %s ready: target %s, memory %s, LLM %s",
            self.ls.version,
            s.target,
            s.resolved_memory_dir(),
            s.llm.model or "none (offline proposer)",
        )

    async def _register_configuration(self) -> None:
        try:
            await self.ls.client_register_capability_async(
                types.RegistrationParams(
                    registrations=[
                        types.Registration(
                            id="accelopt-configuration",
                            method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                            register_options=types.DidChangeConfigurationRegistrationOptions(
                                section="accelopt"
                            ),
                        )
                    ]
                )
            )
        except Exception as exc:
            log.debug("client did not register for configuration changes: %s", exc)

    async def _refresh_settings(self, scopes: list[str]) -> None:
        fetch = (
            self.ls.workspace_configuration_async
            if self._cap("workspace.configuration", False)
            else None
        )
        await self.config.refresh(fetch, scopes)
        self._apply_settings()

    def _apply_settings(self) -> None:
        settings = self.config.all_settings()
        set_level(self.config.global_settings.log_level)
        names: set[str] = set()
        for s in settings:
            names.add(s.llm.api_key_env)
            for role in ("planner", "executor", "summarizer", "fixer"):
                names.add(s.llm.role(role).api_key_env or "")
        self.redact.update(names)

    async def configuration_changed(self, pushed: Any) -> None:
        self.config.set_pushed(pushed)
        self.config.reset_reported()
        scopes = [uri for uri, st in self.docs.states.items() if st.kernel_file is not None]
        await self._refresh_settings(scopes)
        if not any(job.active for job in self.jobs.list()):  # a running search keeps its engine
            await self.adapter.retire(self.config.all_settings(), set())
        log.info("settings changed: target %s", self.config.global_settings.target)
        self.refresh_lenses()

    async def shutdown(self) -> None:
        await self.jobs.close()
        await self.adapter.close()

    # -- documents ------------------------------------------------------------------------------

    async def opened(self, uri: str) -> None:
        doc, kf = await self._parsed(uri)
        if kf is None or not (kf.kernels or kf.syntax_error):
            return
        await self._refresh_settings([uri])
        self.publish(uri)
        await self._load_saved_reports(uri, kf)
        self.refresh_lenses()

    async def saved(self, uri: str) -> None:
        doc, kf = await self._parsed(uri)
        if doc is None or kf is None:
            if doc is not None and uri in self.docs.states:  # kernels were removed
                self.docs.drop(uri)
                self._publish_raw(uri, [], doc.version)
            return
        self.publish(uri)
        await self._load_saved_reports(uri, kf)
        settings = self.settings(uri)
        if (
            settings.profile_on_save
            and kf.kernels
            and kf.harness is not None
            and kf.harness.complete
        ):
            version, source_kf = doc.version, kf
            self.jobs.schedule_profile(
                uri, lambda: self.run_profile(uri, version, source_kf), PROFILE_DEBOUNCE_S
            )
        self.refresh_lenses()

    def closed(self, uri: str) -> None:
        self.jobs.cancel_profile(uri)
        self.docs.drop(uri)
        self.config.forget(uri)
        self._publish_raw(uri, [], None)

    async def _load_saved_reports(self, uri: str, kf: Any) -> None:
        """Offer the persisted results of kernels whose file still matches (after a restart)."""
        st = self.docs.state(uri)
        settings = self.settings(uri)
        for kernel in kf.kernels:
            if kernel.name in st.reports and self.docs.report_matches(
                st.reports[kernel.name], kf, kernel.name
            ):
                continue
            if self.jobs.active_job(uri, kernel.name) is not None:
                continue
            try:
                report = await self.adapter.saved_report(settings, kf, kernel.name)
            except Exception as exc:
                log.warning("could not read saved results for %s: %s", kernel.name, exc)
                continue
            if report is not None:
                await asyncio.to_thread(self.docs.report_matches, report, kf, kernel.name)
                st.reports[kernel.name] = report
                log.info(
                    "restored %d saved improvement(s) of %s", len(report.candidates), kernel.name
                )

    # -- diagnostics ----------------------------------------------------------------------------

    def publish(self, uri: str) -> None:
        """Publish the parse diagnostics and the last profiles' failures of a document."""
        doc = self._document(uri)
        st = self.docs.states.get(uri)
        if doc is None or st is None or st.kernel_file is None:
            return
        lines = split_lines(st.kernel_file.source)
        codec = doc.position_codec
        diagnostics = parse_diagnostics(st.kernel_file, lines, codec)
        for items in st.profile_diagnostics.values():
            diagnostics.extend(items)
        self._publish_raw(uri, diagnostics, doc.version)

    def _publish_raw(
        self, uri: str, diagnostics: list[types.Diagnostic], version: int | None
    ) -> None:
        self.ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    # -- profiling ------------------------------------------------------------------------------

    async def run_profile(
        self, uri: str, version: int | None, kf: Any, only: str | None = None
    ) -> dict[str, EvalResult]:
        """Profile a file version: one evaluation per harness entry (shared by the kernels it
        launches), all at once. Updates lenses and diagnostics; returns results per kernel."""
        st = self.docs.state(uri)
        settings = self.settings(uri)
        groups: dict[str, list[str]] = {}
        for kernel in kf.kernels:
            if only is not None and kernel.name != only:
                continue
            entry = kf.entry_for(kernel.name)
            if entry:
                groups.setdefault(entry, []).append(kernel.name)
        if not groups:
            return {}
        st.profiling = True
        self.refresh_lenses()
        try:
            outcomes = await asyncio.gather(
                *(self.adapter.profile(settings, kf, names[0]) for names in groups.values())
            )
        finally:
            st.profiling = False
        lines = split_lines(kf.source)
        doc = self._document(uri)
        codec = doc.position_codec if doc is not None else self.ls.workspace.position_codec
        results: dict[str, EvalResult] = {}
        for names, result in zip(groups.values(), outcomes, strict=True):
            failed_line_reported = False
            for name in names:
                results[name] = result
                st.profiles[name] = ProfileEntry(result, version)
                st.profile_diagnostics[name] = []
                if not result.ok and not (failed_line_reported and result.line):
                    kernel = kf.kernel(name)
                    st.profile_diagnostics[name] = [
                        profile_diagnostic(kernel, result, lines, codec)
                    ]
                    failed_line_reported = True
                log.info("profile of %s: %s", name, result.summary())
        self.publish(uri)
        self.refresh_lenses()
        return results

    async def cmd_profile(self, *args: Any) -> dict[str, Any]:
        uri, kernel = _args("accelopt.profile", args, ["uri"], ["kernelName"])
        doc, kf = await self._parsed(uri)
        if doc is None:
            return {"kernels": {}, "message": f"unknown document {uri}"}
        if kf is None or not kf.kernels:
            return {"kernels": {}, "message": f"no Triton or NKI kernel in {uri}"}
        if kernel is not None and kernel not in {k.name for k in kf.kernels}:
            return {"kernels": {}, "message": _unknown_kernel(kernel, kf)}
        if kf.harness is None or not kf.harness.complete:
            return {"kernels": {}, "message": _no_harness(kf)}
        version = doc.version
        task = self.jobs.schedule_profile(
            uri, lambda: self.run_profile(uri, version, kf, kernel), 0.0
        )
        # A newer profile of this file (a save) replaces this one: answer with its results.
        for _ in range(10):
            try:
                await asyncio.shield(task)
                break
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
                newer = self.jobs.profile_task(uri)
                if newer is None:
                    return {"kernels": {}, "message": "the profile was cancelled"}
                task = newer
        st = self.docs.state(uri)
        out = {}
        for name, entry in st.profiles.items():
            if kernel is None or name == kernel:
                out[name] = {
                    **entry.result.to_dict(),
                    "summary": entry.result.summary(),
                    "version": entry.version,
                }
        return {"kernels": out}

    # -- searches -------------------------------------------------------------------------------

    async def cmd_optimize(self, *args: Any) -> dict[str, Any]:
        uri, kernel = _args("accelopt.optimize", args, ["uri", "kernelName"])

        def refused(message: str, job_id: str | None = None) -> dict[str, Any]:
            log.info("optimize %s refused: %s", kernel, message)
            return {"jobId": job_id, "started": False, "message": message}

        doc, kf = await self._parsed(uri)
        if doc is None:
            return refused(f"unknown document {uri}")
        if kf is None or not kf.kernels:
            return refused(f"no Triton or NKI kernel in {uri}")
        if kernel not in {k.name for k in kf.kernels}:
            return refused(_unknown_kernel(kernel, kf))
        existing = self.jobs.active_job(uri, kernel)
        if existing is not None:
            return refused(f"a search of {kernel} is already running ({existing.id})", existing.id)
        settings = self.settings(uri)
        try:
            search = await self.adapter.new_search(settings, kf, kernel)
        except Exception as exc:
            return refused(str(exc) or type(exc).__name__)
        job, started = self.jobs.start_search(
            uri,
            kernel,
            doc.version,
            search,
            on_start=self._job_started,
            on_event=self._job_event,
            on_done=self._job_done,
        )
        if not started:
            return refused(f"a search of {kernel} is already running ({job.id})", job.id)
        s = settings.search
        message = (
            f"searching {kernel}: B={s.beam_width}, N={s.plans_per_candidate}, "
            f"K={s.samples_per_plan}, T={s.iterations} on {settings.target}"
        )
        log.info("%s started: %s", job.id, message)
        self.refresh_lenses()
        return {"jobId": job.id, "started": True, "message": message}

    async def _job_started(self, job: SearchJob) -> None:
        self.refresh_lenses()
        if not self._cap("window.work_done_progress", False):
            return
        token = f"accelopt-{job.id}"
        try:
            await self.ls.work_done_progress.create_async(token)
        except Exception as exc:
            log.debug("client refused progress for %s: %s", job.id, exc)
            return
        job.progress_token = token
        self.ls.work_done_progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title=f"AccelOpt: optimizing {job.kernel}",
                cancellable=True,
                message=job.status_line(),
                percentage=0,
            ),
        )

    def _job_event(self, job: SearchJob, event: Any) -> None:
        name = type(event).__name__
        if name == "NewBest":
            log.info(
                "%s: new best %.2fx — %s", job.kernel, event.speedup, event.candidate.plan_title
            )
        if job.progress_token is not None and name in (
            "IterationStarted",
            "NewBest",
            "SearchStarted",
        ):
            pct = 0
            if job.iterations:
                pct = int(100 * max(job.iteration - 1, 0) / job.iterations)
            self.ls.work_done_progress.report(
                job.progress_token,
                types.WorkDoneProgressReport(
                    message=job.status_line(), percentage=pct, cancellable=True
                ),
            )
        if name in ("IterationStarted", "NewBest", "SearchStarted"):
            self.refresh_lenses()

    def _job_done(self, job: SearchJob) -> None:
        report = job.report
        if report is not None:
            st = self.docs.state(job.uri)
            st.reports[job.kernel] = report
            self.adapter.memory_changed()
        n = len(getattr(report, "candidates", []) or [])
        if job.state == "failed":
            summary = f"search of {job.kernel} failed: {job.message}"
        elif n:
            summary = (
                f"{job.kernel}: {n} verified improvement(s), best {report.best.speedup:.2f}x "
                f"({report.stopped_reason}); see the code actions on the kernel"
            )
        else:
            stopped = getattr(report, "stopped_reason", job.state)
            summary = f"{job.kernel}: no verified improvement ({stopped})"
        for warning in getattr(report, "warnings", []) or []:
            log.warning("%s: %s", job.kernel, warning)
        if job.progress_token is not None:
            self.ls.work_done_progress.end(
                job.progress_token, types.WorkDoneProgressEnd(message=summary)
            )
        log.info("%s %s: %s", job.id, job.state, summary)
        if job.state == "failed":
            self.show(types.MessageType.Error, f"AccelOpt: {summary}")
        elif job.state != "cancelled":
            self.show(types.MessageType.Info, f"AccelOpt: {summary}")
        self.refresh_lenses()

    def progress_cancelled(self, token: Any) -> None:
        job = self.jobs.by_token(token)
        if job is not None:
            log.info("client cancelled %s", job.id)
            self.jobs.cancel(job)

    async def cmd_cancel(self, *args: Any) -> dict[str, Any]:
        if len(args) == 1 and isinstance(args[0], str):
            job = self.jobs.find(args[0])
            if job is None:
                return {"cancelled": False, "message": f"no job {args[0]}"}
        else:
            uri, kernel = _args("accelopt.cancel", args, ["uri", "kernelName"])
            job = self.jobs.active_job(uri, kernel)
            if job is None:
                return {"cancelled": False, "message": f"no search of {kernel} is running"}
        cancelled = self.jobs.cancel(job)
        self.refresh_lenses()
        return (
            {"cancelled": cancelled}
            if cancelled
            else {"cancelled": False, "message": f"{job.id} already {job.state}"}
        )

    async def cmd_list_jobs(self, *args: Any) -> list[dict[str, Any]]:
        return [job.to_dict() for job in self.jobs.list()]

    # -- code lenses ----------------------------------------------------------------------------

    async def code_lenses(self, uri: str) -> list[types.CodeLens] | None:
        doc, kf = await self._parsed(uri)
        if doc is None or kf is None:
            return None
        st = self.docs.state(uri)
        lines = split_lines(kf.source)
        runnable = kf.harness is not None and kf.harness.complete
        lenses: list[types.CodeLens] = []
        for kernel in kf.kernels:
            start = to_lsp_position(lines, doc.position_codec, kernel.range.start_line - 1, 0)
            rng = types.Range(start=start, end=start)

            def lens(
                title: str, command: str = "", args: list[Any] | None = None, rng: Any = rng
            ) -> None:
                cmd = types.Command(title=title, command=command, arguments=args)
                lenses.append(types.CodeLens(range=rng, command=cmd))

            job = self.jobs.active_job(uri, kernel.name)
            if job is not None:
                lens(f"AccelOpt: {job.status_line()}")
                lens("Cancel", "accelopt.cancel", [job.id])
                continue
            if not runnable:
                # clickable, and it names the kernel so editors can find it (Show Memory works
                # without a harness; the code action inserts a harness skeleton)
                lens(
                    "AccelOpt: no benchmark harness (see the code action) · memory",
                    "accelopt.showMemory",
                    [uri, kernel.name],
                )
                continue
            entry = st.profiles.get(kernel.name)
            if st.profiling:
                lens("AccelOpt: profiling…")
            elif entry is not None:
                lens(entry.result.summary(), "accelopt.profile", [uri, kernel.name])
            else:
                lens("Profile", "accelopt.profile", [uri, kernel.name])
            report = st.reports.get(kernel.name)
            if (
                report is not None
                and report.candidates
                and self.docs.report_matches(report, kf, kernel.name)
            ):
                lens(
                    f"{len(report.candidates)} improvement(s), best {report.candidates[0].speedup:.2f}x "
                    "(code actions)"
                )
            lens("Optimize", "accelopt.optimize", [uri, kernel.name])
        return lenses

    # -- hover ----------------------------------------------------------------------------------

    async def hover(self, uri: str, position: types.Position) -> types.Hover | None:
        doc, kf = await self._parsed(uri)
        if doc is None or kf is None:
            return None
        lines = split_lines(kf.source)
        where = from_lsp_position(lines, doc.position_codec, position)
        if where is None:
            return None
        line, col = where
        kernel = kf.kernel_at(line, col)
        if kernel is None:
            return None
        settings = self.settings(uri)
        markdown = "markdown" in (self._cap("text_document.hover.content_format", []) or [])
        if _contains(kernel.name_range, line, col):
            st = self.docs.state(uri)
            entry = st.profiles.get(kernel.name)
            device = entry.result.device if entry is not None else None
            text = _kernel_source(kf, kernel)
            pos, neg, problem = await self.adapter.memory_for_kernel(
                settings, text, kernel.backend, device, settings.search.memory_top_k or 3
            )
            job = self.jobs.active_job(uri, kernel.name)
            value = present.kernel_hover(
                kernel,
                entry.result if entry else None,
                entry.version if entry else None,
                doc.version,
                present.experiences_markdown(pos, neg, problem),
                job.status_line() if job else None,
            )
            rng = kernel.name_range
        else:
            call = next(((n, r) for n, r in kernel.api_calls if _contains(r, line, col)), None)
            if call is None:
                return None
            experiences, problem = await self.adapter.memory_mentioning(
                settings, call[0], kernel.backend
            )
            value = present.api_hover(call[0], experiences, problem)
            rng = call[1]
        kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
        return types.Hover(
            contents=types.MarkupContent(kind=kind, value=value),
            range=to_lsp_range(lines, doc.position_codec, rng),
        )

    async def cmd_show_memory(self, *args: Any) -> str:
        uri, kernel_name = _args("accelopt.showMemory", args, ["uri", "kernelName"])
        doc, kf = await self._parsed(uri)
        if doc is None or kf is None:
            return f"_AccelOpt: no Triton or NKI kernel in {uri}_"
        if kernel_name not in {k.name for k in kf.kernels}:
            return f"_AccelOpt: {_unknown_kernel(kernel_name, kf)}_"
        kernel = kf.kernel(kernel_name)
        settings = self.settings(uri)
        pos, neg, problem = await self.adapter.memory_for_kernel(
            settings, _kernel_source(kf, kernel), kernel.backend, None, 10
        )
        report = self.docs.state(uri).reports.get(kernel_name)
        return present.memory_document(kernel, pos, neg, problem, report)

    async def cmd_clear_results(self, *args: Any) -> dict[str, Any]:
        (uri,) = _args("accelopt.clearResults", args, [], ["uri"])
        states = (
            [self.docs.states[uri]]
            if uri in self.docs.states
            else ([] if uri else list(self.docs.states.values()))
        )
        reports = profiles = 0
        for st in states:
            reports += len(st.reports)
            profiles += len(st.profiles)
            st.reports.clear()
            st.profiles.clear()
            st.profile_diagnostics.clear()
            self.publish(st.uri)
        cleared = 0
        from .documents import uri_path

        seen: set[str] = set()
        for settings in [self.settings(uri)] if uri else self.config.all_settings():
            key = str(settings.resolved_memory_dir())
            if key in seen:
                continue
            seen.add(key)
            try:
                cleared += await self.adapter.clear_results(
                    settings, uri_path(uri) if uri else None
                )
            except Exception as exc:
                log.warning("could not clear saved results: %s", exc)
        self.refresh_lenses()
        return {"cleared": cleared, "reports": reports, "profiles": profiles}

    # -- code actions ---------------------------------------------------------------------------

    async def code_actions(
        self, params: types.CodeActionParams
    ) -> list[types.CodeAction | types.Command] | None:
        uri = params.text_document.uri
        doc, kf = await self._parsed(uri)
        if doc is None or kf is None or not kf.kernels:
            return None
        lines = split_lines(kf.source)
        start = from_lsp_position(lines, doc.position_codec, params.range.start)
        end = from_lsp_position(lines, doc.position_codec, params.range.end) or start
        if start is None:
            return None
        kernels = [
            k for k in kf.kernels if k.range.start_line <= end[0] and k.range.end_line >= start[0]
        ]
        if not kernels:
            return None
        only = list(params.context.only or [])
        literal = self._cap("text_document.code_action.code_action_literal_support") is not None
        resolve = "edit" in (
            self._cap("text_document.code_action.resolve_support.properties", []) or []
        ) and bool(self._cap("text_document.code_action.data_support", False))
        tags = list(self._cap("text_document.code_action.tag_support.value_set", []) or [])
        llm_tag = types.CodeActionTag.LlmGenerated in tags or 1 in tags
        settings = self.settings(uri)
        st = self.docs.state(uri)
        actions: list[types.CodeAction] = []
        for kernel in kernels:
            if kf.harness is None:
                diags = [d for d in params.context.diagnostics if d.code == NO_HARNESS]
                data = {
                    "type": "harness",
                    "uri": uri,
                    "kernel": kernel.name,
                    "version": doc.version,
                }
                action = types.CodeAction(
                    title=f"AccelOpt: insert a benchmark harness for {kernel.name}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=diags or None,
                    data=data,
                )
                if not resolve:
                    action.edit = self._harness_edit(doc, kf, kernel.name)
                    action.data = None
                actions.append(action)
            report = st.reports.get(kernel.name)
            if (
                report is not None
                and report.candidates
                and self.docs.report_matches(report, kf, kernel.name)
            ):
                llm = getattr(report, "proposer", "") == "llm"
                for cand in report.candidates[: settings.max_code_actions]:
                    args = [uri, kernel.name, cand.id, doc.version]
                    action = types.CodeAction(
                        title=present.candidate_title(cand),
                        kind=types.CodeActionKind.RefactorRewrite,
                        tags=[types.CodeActionTag.LlmGenerated] if (llm and llm_tag) else None,
                    )
                    if resolve:
                        action.data = {
                            "type": "candidate",
                            "uri": uri,
                            "kernel": kernel.name,
                            "candidateId": cand.id,
                            "version": doc.version,
                        }
                    else:
                        action.command = types.Command(
                            title=action.title, command="accelopt.applyCandidate", arguments=args
                        )
                    actions.append(action)
            if kf.harness is not None and kf.harness.complete:
                job = self.jobs.active_job(uri, kernel.name)
                if job is not None:
                    title = f"AccelOpt: cancel the search of {kernel.name} ({job.status_line()})"
                    command = types.Command(
                        title=title, command="accelopt.cancel", arguments=[job.id]
                    )
                else:
                    title = f"AccelOpt: optimize {kernel.name} (beam search)"
                    command = types.Command(
                        title=title, command="accelopt.optimize", arguments=[uri, kernel.name]
                    )
                actions.append(
                    types.CodeAction(
                        title=title, kind=types.CodeActionKind.Refactor, command=command
                    )
                )
        if only:
            actions = [a for a in actions if any(str(a.kind).startswith(str(o)) for o in only)]
        if not literal:
            return [a.command for a in actions if a.command is not None] or None
        return actions or None

    def _workspace_edit(
        self, doc: TextDocument, edits: list[types.TextEdit]
    ) -> types.WorkspaceEdit:
        if self._cap("workspace.workspace_edit.document_changes", False):
            return types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(
                            uri=doc.uri, version=doc.version
                        ),
                        edits=edits,
                    )
                ]
            )
        return types.WorkspaceEdit(changes={doc.uri: edits})

    def _harness_edit(self, doc: TextDocument, kf: Any, kernel_name: str) -> types.WorkspaceEdit:
        source = doc.source
        skeleton = self.adapter.harness_skeleton(kf, kernel_name)
        sep = "" if source.endswith("\n") or not source else "\n"
        new = f"{source}{sep}\n\n{skeleton.rstrip()}\n"
        return self._workspace_edit(doc, text_edits(source, new, doc.position_codec))

    def _candidate_edit(
        self, uri: str, kernel: str, candidate_id: str, version: Any
    ) -> tuple[TextDocument, types.WorkspaceEdit, str]:
        """The edit applying a candidate to the document version it was offered for.

        Raises:
            JsonRpcContentModified: the document changed since (or the lines the candidate
                rewrites were edited), or the candidate is no longer known.
        """
        doc = self._document(uri)
        if doc is None:
            raise JsonRpcContentModified(f"AccelOpt: {uri} is not open any more")
        if version != doc.version:
            raise JsonRpcContentModified(
                f"AccelOpt: the document changed (version {version} -> {doc.version}) since this "
                "improvement was offered; ask for the code actions again"
            )
        report = self.docs.state(uri).reports.get(kernel)
        cand = next(
            (c for c in getattr(report, "candidates", []) or [] if c.id == candidate_id), None
        )
        if report is None or cand is None:
            raise JsonRpcContentModified(
                f"AccelOpt: candidate {candidate_id} of {kernel} is no longer available"
            )
        current = doc.source
        try:
            merged = rebase(report.original_source, cand.source, current)
        except RebaseConflict as exc:
            raise JsonRpcContentModified(f"AccelOpt: cannot apply {candidate_id}: {exc}") from exc
        edit = self._workspace_edit(doc, text_edits(current, merged, doc.position_codec))
        return doc, edit, present.candidate_title(cand)

    async def resolve_code_action(self, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        kind = data.get("type")
        if kind == "candidate":
            try:
                _, edit, _ = self._candidate_edit(
                    data.get("uri", ""),
                    data.get("kernel", ""),
                    data.get("candidateId", ""),
                    data.get("version"),
                )
            except JsonRpcContentModified as exc:
                log.info("%s", exc.message)
                self.show(types.MessageType.Warning, exc.message)
                raise
            action.edit = edit
        elif kind == "harness":
            uri = data.get("uri", "")
            doc, kf = await self._parsed(uri)
            if doc is None or kf is None or data.get("version") != doc.version:
                raise JsonRpcContentModified(
                    "AccelOpt: the document changed; ask for the code actions again"
                )
            if data.get("kernel") not in {k.name for k in kf.kernels}:
                raise JsonRpcContentModified(f"AccelOpt: no kernel {data.get('kernel')} any more")
            action.edit = self._harness_edit(doc, kf, data["kernel"])
        return action

    async def cmd_apply_candidate(self, *args: Any) -> dict[str, Any]:
        uri, kernel, cand_id, version = _args(
            "accelopt.applyCandidate", args, ["uri", "kernelName", "candidateId", "version"]
        )
        try:
            _, edit, title = self._candidate_edit(uri, kernel, cand_id, version)
        except JsonRpcContentModified as exc:
            return {"applied": False, "message": exc.message}
        result = await self.ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label=title)
        )
        if not result.applied:
            return {
                "applied": False,
                "message": result.failure_reason or "the client did not apply the edit",
            }
        return {"applied": True}


def _kernel_source(kf: Any, kernel: Any) -> str:
    return "".join(split_lines(kf.source)[kernel.range.start_line - 1 : kernel.range.end_line])


def _unknown_kernel(name: Any, kf: Any) -> str:
    known = ", ".join(k.name for k in kf.kernels) or "none"
    return f"no kernel named {name!r} in this file (kernels: {known})"


def _no_harness(kf: Any) -> str:
    problems = "; ".join(p.message for p in (kf.harness.problems if kf.harness else []))
    return "the file has no complete benchmark harness (get_inputs, reference, BENCH)" + (
        f": {problems}" if problems else ""
    )


def _args(
    command: str, args: tuple[Any, ...], required: list[str], optional: list[str] | None = None
) -> tuple[Any, ...]:
    """Check a command's JSON arguments: required strings first, then optional ones.

    Raises:
        JsonRpcInvalidParams: wrong count or type, with the expected signature in the message.
    """
    optional = optional or []
    names = required + optional
    usage = f"{command} expects [{', '.join(required + [n + '?' for n in optional])}]"
    if not len(required) <= len(args) <= len(names):
        raise JsonRpcInvalidParams(f"{usage}, got {len(args)} argument(s)")
    values = list(args) + [None] * (len(names) - len(args))
    for name, value in zip(names, values, strict=True):
        if value is None and name in optional:
            continue
        if name == "version":
            if value is not None and not isinstance(value, int):
                raise JsonRpcInvalidParams(f"{usage}: version must be an integer")
        elif not isinstance(value, str) or not value:
            raise JsonRpcInvalidParams(f"{usage}: {name} must be a non-empty string, got {value!r}")
    return tuple(values)
