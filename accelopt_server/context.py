"""The narrow view of the language server that features get: :class:`ServerContext`.

A feature never sees the server object. It gets the state it works on (documents, settings,
engines, background jobs), the few messages it sends to the client (show a message, publish
diagnostics, ask for a code-lens refresh, work-done progress, pull configuration, register a
capability, apply an edit), the client's capabilities, and a way to reach a sibling feature.
The server (:mod:`accelopt_server.server`) builds one context and hands it to every feature.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lsprotocol import types
from pygls.capabilities import get_capability

from accelopt_core.onsite.sandbox.policy import warning_in
from accelopt_core.settings import Settings, SettingsIssue

from .config import ConfigManager
from .documents import DocumentStore
from .engine_adapter import EngineAdapter
from .jobs import JobManager
from .logs import Redactor, install_log_handler
from .tasks import BackgroundTasks
from .workloads import WorkloadBinder

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer
    from pygls.progress import Progress

log = logging.getLogger("accelopt.server")

#: At most one workspace/codeLens/refresh per this many seconds.
LENS_REFRESH_S = 0.3


class Feature(Protocol):
    """A feature as the context keeps it: an object bound to one context. The lifecycle hooks
    the server calls are those of :class:`accelopt_server.features.base.LanguageFeature`, which
    every feature subclasses; the context itself needs only this (so it imports no feature)."""

    ctx: ServerContext


F = TypeVar("F", bound=Feature)


class ServerContext:
    """What a feature may use of the server.

    Attributes:
        config: settings per scope (:class:`~accelopt_server.config.ConfigManager`).
        adapter: the one way into ``accelopt_core``
            (:class:`~accelopt_server.engine_adapter.EngineAdapter`).
        docs: open documents, their parses, profiles and reports
            (:class:`~accelopt_server.documents.DocumentStore`).
        workloads: harness discovery and the binding of each parse to its harness and import
            closure (:class:`~accelopt_server.workloads.WorkloadBinder`).
        tasks: background tasks and debounced per-document runs (profiles).
        jobs: background searches (:class:`~accelopt_server.jobs.JobManager`).
        redact: removes secrets from every text sent to the client.

    Args:
        ls: the pygls language server whose messages the context sends.
    """

    def __init__(self, ls: LanguageServer) -> None:
        self._ls = ls
        self.redact = Redactor()
        self.config = ConfigManager(self._report_settings_issues)
        self.adapter = EngineAdapter()
        self.docs = DocumentStore(self.adapter, lambda: ls.workspace)
        self.workloads = WorkloadBinder(self.adapter, self.settings, self.docs.folders)
        self.docs.binder = self.workloads
        self.tasks = BackgroundTasks()
        self.jobs = JobManager(self.adapter.capacity, tasks=self.tasks)
        self.log_handler = install_log_handler(ls.window_log_message, self.redact)
        self._features: dict[type[Feature], Feature] = {}
        self._lens_refresh: asyncio.TimerHandle | None = None
        self._warned: set[str] = set()

    # -- features -------------------------------------------------------------------------------

    def add_feature(self, feature: Feature) -> None:
        """Register a feature (hooks are called in registration order)."""
        self._features[type(feature)] = feature

    @property
    def features(self) -> Sequence[Feature]:
        """Every registered feature, in registration order."""
        return tuple(self._features.values())

    def feature(self, cls: type[F]) -> F:
        """The registered feature of class ``cls`` (a sibling). Raises KeyError if absent."""
        return self._features[cls]  # type: ignore[return-value]

    # -- the client -----------------------------------------------------------------------------

    @property
    def server_version(self) -> str | None:
        return self._ls.version

    def capability(self, path: str, default: Any = None) -> Any:
        """A client capability by dotted path (``"window.work_done_progress"``), else
        ``default``."""
        try:
            return get_capability(self._ls.client_capabilities, path, default)
        except Exception:
            return default

    def bind_loop(self) -> None:
        """Attach the log forwarding to the running event loop (call from ``initialize``)."""
        self.log_handler.bind(asyncio.get_running_loop())

    def show(self, kind: types.MessageType, text: str) -> None:
        """``window/showMessage`` with secrets removed."""
        self._ls.window_show_message(types.ShowMessageParams(type=kind, message=self.redact(text)))

    def warn_once(self, warnings: Sequence[str]) -> None:
        """``window/showMessage`` (a warning) for the sandbox's warning among ``warnings``
        (candidates ran unconfined on the target), once per session and text."""
        note = warning_in(list(warnings))
        if note is not None and note not in self._warned:
            self._warned.add(note)
            self.show(types.MessageType.Warning, f"AccelOpt: {note}")

    def notify(self, method: str, params: Any) -> None:
        """A custom notification (``accelopt/searchView``) to the client."""
        self._ls.protocol.notify(method, params)

    def publish_diagnostics(
        self, uri: str, diagnostics: list[types.Diagnostic], version: int | None
    ) -> None:
        """``textDocument/publishDiagnostics``."""
        self._ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    @property
    def progress(self) -> Progress:
        """Server-initiated work-done progress (``create_async``, ``begin``, ``report``,
        ``end``)."""
        return self._ls.work_done_progress

    async def workspace_configuration(self, params: types.ConfigurationParams) -> list[Any]:
        """``workspace/configuration``: the client's settings for each requested item."""
        return await self._ls.workspace_configuration_async(params)

    async def ask(self, kind: types.MessageType, text: str, choices: list[str]) -> str | None:
        """``window/showMessageRequest``: the title of the choice the user made, None when
        dismissed or when the client cannot ask."""
        if not choices or self.capability("window.show_message", None) is None:
            return None
        params = types.ShowMessageRequestParams(
            type=kind,
            message=self.redact(text),
            actions=[types.MessageActionItem(title=c) for c in choices],
        )
        answer = await self._ls.window_show_message_request_async(params)
        return answer.title if answer is not None else None

    async def register_capability(self, params: types.RegistrationParams) -> None:
        """``client/registerCapability``."""
        await self._ls.client_register_capability_async(params)

    async def apply_edit(
        self, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult:
        """``workspace/applyEdit``."""
        return await self._ls.workspace_apply_edit_async(params)

    def refresh_lenses(self) -> None:
        """Ask the client to re-request code lenses (throttled to one per
        :data:`LENS_REFRESH_S`; only if it supports refresh)."""
        if not self.capability("workspace.code_lens.refresh_support", False):
            return
        if self._lens_refresh is not None:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._lens_refresh = None
            try:
                self._ls.workspace_code_lens_refresh(None)
            except Exception as exc:
                log.debug("codeLens refresh failed: %s", exc)

        self._lens_refresh = loop.call_later(LENS_REFRESH_S, fire)

    # -- state ----------------------------------------------------------------------------------

    def settings(self, uri: str | None) -> Settings:
        """The settings of a document's scope (the server-wide ones for None)."""
        return self.config.for_uri(uri)

    def _report_settings_issues(self, issues: list[SettingsIssue]) -> None:
        for issue in issues:
            self.show(types.MessageType.Warning, f"AccelOpt: {issue}")
            log.warning("%s", issue)

    async def close(self) -> None:
        """Stop every background job and task, then close the engines (server shutdown)."""
        await self.jobs.close()
        await self.adapter.close()
