"""Malformed requests over a real stdio session: every request method the server registers, and
every command, answers malformed JSON params with a JSON-RPC error (InvalidParams), never with
silence, and the server keeps answering afterwards. Expected errors leave no traceback on the
server's standard error."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol.json_rpc import JsonRPCRequestMessage

from accelopt_server.features import COMMANDS
from accelopt_server.logs import LOGGER_NAME
from accelopt_server.server import create_server
from tests.lsp_fixtures import LspSession

pytestmark = [pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]
CLIENTS = ["visual-studio-code", "neovim"]
INVALID_PARAMS = types.ErrorCodes.InvalidParams


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``create_server`` routes the ``accelopt`` logger to its client: undo that."""
    logger = logging.getLogger(LOGGER_NAME)
    saved = (list(logger.handlers), logger.propagate, logger.level)
    yield
    logger.handlers[:] = saved[0]
    logger.propagate, logger.level = saved[1], saved[2]


def registered_requests() -> list[str]:
    """The request methods (not notifications) the server registers handlers for, beside the
    lifecycle ones (initialize/shutdown) and pygls' workspace/executeCommand."""
    fm = create_server().protocol.fm
    out = []
    for method in fm.features:
        if method in (types.INITIALIZE, types.SHUTDOWN):
            continue
        if types.METHOD_TO_TYPES[method][1] is not None:  # has a result: a request
            out.append(method)
    return out


def malformed_params(method: str, uri: str) -> list[Any]:
    """Params that do not fit the method's type: wrong JSON types where numbers, objects or
    arrays belong, or a required field missing."""
    line_as_text = {"line": "twelve", "character": 0}
    doc = {"uri": uri}
    common: list[Any] = ["a string", 42, [1, 2], {"textDocument": 42}, {"textDocument": {"uri": 7}}]
    specific: dict[str, list[Any]] = {
        types.TEXT_DOCUMENT_CODE_LENS: [{}],
        types.TEXT_DOCUMENT_HOVER: [
            {"textDocument": doc, "position": line_as_text},
            {"textDocument": doc},
        ],
        types.TEXT_DOCUMENT_CODE_ACTION: [
            {
                "textDocument": doc,
                "range": {"start": line_as_text, "end": line_as_text},
                "context": {"diagnostics": []},
            },
            {"textDocument": doc, "range": "line 3", "context": {"diagnostics": []}},
            {
                "textDocument": doc,
                "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}},
                "context": {"diagnostics": "none"},
            },
        ],
        types.CODE_ACTION_RESOLVE: [{"title": 5}, {"title": "t", "diagnostics": "none"}],
    }
    if method == types.CODE_ACTION_RESOLVE:
        return [*common[:3], *specific[method]]
    return [*common, *specific[method]]


def malformed_arguments(command: str, uri: str) -> list[Any]:
    """``workspace/executeCommand`` arguments that do not fit the command."""
    if command == "accelopt.listJobs":
        return [[42], ["x", "y"]]
    if command == "accelopt.applyCandidate":
        return [[uri, "softmax_kernel", "c1", "seven"], [42], [uri]]
    if command == "accelopt.clearResults":
        return [[42], [uri, uri]]
    return [[42], [uri, 7, 8, 9], [{"uri": uri}]]


async def raw_request(lsp: LspSession, method: str, params: Any) -> Any:
    """Send ``params`` as they are (no client-side typing); the response, or its error raised
    as :class:`JsonRpcException`. Fails the test when no response comes."""
    protocol = lsp.client.protocol
    msg_id = str(uuid.uuid4())
    future: Future[Any] = Future()
    protocol._request_futures[msg_id] = future
    protocol._send_data(
        JsonRPCRequestMessage(id=msg_id, method=method, params=params, jsonrpc="2.0")
    )
    return await asyncio.wait_for(asyncio.wrap_future(future), 10)


async def assert_invalid(lsp: LspSession, method: str, params: Any) -> None:
    with pytest.raises(JsonRpcException) as err:
        await raw_request(lsp, method, params)
    assert err.value.code == INVALID_PARAMS, (method, params, err.value)
    assert "Traceback" not in err.value.message


def test_the_fuzzed_methods_cover_the_server() -> None:
    assert set(registered_requests()) == {
        types.TEXT_DOCUMENT_CODE_LENS,
        types.TEXT_DOCUMENT_HOVER,
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CODE_ACTION_RESOLVE,
    }


@pytest.mark.parametrize("lsp", CLIENTS, indirect=True)
async def test_every_malformed_request_gets_invalid_params(
    lsp: LspSession, capfd: pytest.CaptureFixture[str]
) -> None:
    path, _ = lsp.copy_example("softmax.py")
    uri = lsp.open(path)
    assert await lsp.lens_titles(uri)
    for method in registered_requests():
        for params in malformed_params(method, uri):
            await assert_invalid(lsp, method, params)
    execute = types.WORKSPACE_EXECUTE_COMMAND
    for bad in ["not an object", {"command": 42}, {"command": "accelopt.listJobs", "arguments": 7}]:
        await assert_invalid(lsp, execute, bad)
    for command in COMMANDS:
        for args in malformed_arguments(command, uri):
            await assert_invalid(lsp, execute, {"command": command, "arguments": args})
    # still serving, and the well-formed requests are answered as before
    assert await lsp.lens_titles(uri)
    assert isinstance(await lsp.command("accelopt.listJobs"), list)
    line = lsp.line_of(uri, "def softmax_kernel")
    assert await lsp.hover(uri, line, 6) is not None
    # the code action with a string line number from the issue, over the typed client path too
    assert any("optimize" in getattr(a, "title", "") for a in await lsp.code_actions(uri, line))
    await asyncio.sleep(0.2)  # the server's stderr is forwarded by a task
    assert "Traceback" not in capfd.readouterr().err  # expected errors are no crashes


@pytest.mark.parametrize("lsp", ["neovim"], indirect=True)
async def test_bad_resolve_data_is_invalid_params(
    lsp: LspSession, capfd: pytest.CaptureFixture[str]
) -> None:
    path, _ = lsp.copy_example("softmax.py")
    uri = lsp.open(path)
    assert await lsp.lens_titles(uri)
    for data in [
        {"type": "candidate", "uri": 5, "kernel": "k", "candidateId": "c", "version": 1},
        {"type": "harness", "uri": uri, "kernel": ["softmax_kernel"], "version": "one"},
        {"type": "teleport"},
        "candidate",
    ]:
        await assert_invalid(lsp, types.CODE_ACTION_RESOLVE, {"title": "t", "data": data})
    # a stale action: ContentModified, deliberate, so no traceback either
    stale = {"type": "candidate", "uri": uri, "kernel": "k", "candidateId": "c", "version": 99}
    with pytest.raises(JsonRpcException) as err:
        await raw_request(lsp, types.CODE_ACTION_RESOLVE, {"title": "t", "data": stale})
    assert err.value.code == types.LSPErrorCodes.ContentModified
    assert await lsp.lens_titles(uri)
    await asyncio.sleep(0.2)  # the server's stderr is forwarded by a task
    assert "Traceback" not in capfd.readouterr().err
