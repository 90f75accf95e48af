"""The AccelOpt language server (pygls 2.x): thin LSP handlers over the feature classes.

The server watches Python files holding ``@triton.jit`` / ``@nki.jit`` kernels (others are
ignored after a cheap text test), profiles them on save, runs background beam searches and offers
their verified improvements as code actions. Handlers here only translate LSP to the feature
objects of :mod:`accelopt_server.features`; those call ``accelopt_core`` through
:class:`accelopt_server.engine_adapter.EngineAdapter`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError
from pygls.lsp.server import LanguageServer

from . import __version__
from .features import COMMANDS, Features

log = logging.getLogger("accelopt.server")


class AccelOptServer(LanguageServer):
    """The language server. ``self.features`` holds the state and the logic."""

    def __init__(self) -> None:
        super().__init__("accelopt-lsp", __version__)
        self.features = Features(self)


def create_server() -> AccelOptServer:
    """A server with every handler registered (start it with ``start_io`` / ``start_tcp``)."""
    server = AccelOptServer()
    f = server.features

    @server.feature(types.INITIALIZE)
    def initialize(ls: AccelOptServer, params: types.InitializeParams) -> None:
        f.initialize(params)

    @server.feature(types.INITIALIZED)
    @_safe(None)
    async def initialized(ls: AccelOptServer, params: types.InitializedParams) -> None:
        await f.initialized()

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: AccelOptServer, params: None) -> None:
        await f.shutdown()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @_safe(None)
    async def did_change_configuration(
        ls: AccelOptServer, params: types.DidChangeConfigurationParams
    ) -> None:
        await f.configuration_changed(params.settings)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @_safe(None)
    async def did_open(ls: AccelOptServer, params: types.DidOpenTextDocumentParams) -> None:
        await f.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    @_safe(None)
    async def did_save(ls: AccelOptServer, params: types.DidSaveTextDocumentParams) -> None:
        await f.saved(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AccelOptServer, params: types.DidCloseTextDocumentParams) -> None:
        f.closed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    @_safe(None)
    async def code_lens(
        ls: AccelOptServer, params: types.CodeLensParams
    ) -> list[types.CodeLens] | None:
        return await f.code_lenses(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @_safe(None)
    async def hover(ls: AccelOptServer, params: types.HoverParams) -> types.Hover | None:
        return await f.hover(params.text_document.uri, params.position)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.RefactorRewrite,
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.Refactor,
            ],
            resolve_provider=True,
        ),
    )
    @_safe(None)
    async def code_action(
        ls: AccelOptServer, params: types.CodeActionParams
    ) -> list[types.CodeAction | types.Command] | None:
        return await f.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: AccelOptServer, action: types.CodeAction) -> types.CodeAction:
        return await f.resolve_code_action(action)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: AccelOptServer, params: types.WorkDoneProgressCancelParams) -> None:
        f.progress_cancelled(params.token)

    for name, method in COMMANDS.items():
        server.command(name)(_command(getattr(f, method)))

    return server


def _safe(default: Any) -> Callable[[Any], Any]:
    """Keep a request or notification handler from sending a traceback to the user: an
    unexpected exception is logged (traceback on stderr, one line in window/logMessage) and the
    request gets ``default`` (no hover, no lenses, ...). JSON-RPC errors raised on purpose
    (invalid params, content modified) pass through."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        async def handler(ls: AccelOptServer, *args: Any) -> Any:
            try:
                return await fn(ls, *args)
            except JsonRpcException:
                raise
            except Exception as exc:
                log.exception("%s failed: %s", fn.__name__, exc)
                return default

        return handler

    return wrap


def _command(method: Any) -> Any:
    """Wrap a feature method as a command handler taking the raw JSON arguments; an unexpected
    exception becomes a JSON-RPC error carrying only its message."""

    async def handler(ls: AccelOptServer, *args: Any) -> Any:
        try:
            return await method(*args)
        except JsonRpcException:
            raise
        except Exception as exc:
            log.exception("%s failed: %s", method.__name__, exc)
            raise JsonRpcInternalError(f"AccelOpt: {exc}") from None

    handler.__name__ = method.__name__
    return handler
