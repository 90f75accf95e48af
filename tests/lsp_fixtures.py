"""pytest-lsp fixtures: the real ``accelopt-lsp`` server over stdio, driven by a test client with
VS Code's or Neovim's recorded client capabilities.

The ``lsp`` fixture is parametrized indirectly with the client name::

    @pytest.mark.parametrize("lsp", ["visual-studio-code", "neovim"], indirect=True)
    async def test_x(lsp: LspSession): ...

Each server gets its own memory directory and tiny search settings (B=1, N=1, K=1, T=1) through
``initializationOptions``; a test changes settings with :meth:`LspSession.configure`. The server
process has the LLM double's test key in its environment (``ACCELOPT_TEST_LLM_KEY``; the double is
a stand-in for the paid LLM service, see tests/llm_double.py).
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Union

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client

from accelopt_core.textdiff import apply_hunks
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "triton"

#: Settings every test server starts with (camelCase, as an editor sends them).
BASE_SETTINGS: dict[str, Any] = {
    "search": {"beamWidth": 1, "plansPerCandidate": 1, "samplesPerPlan": 1, "iterations": 1},
    "evaluation": {"seeds": 2, "warmupMs": 1, "repMs": 5, "timeoutS": 120, "cpuSlots": 2},
    "logLevel": "debug",
}


def _merge(into: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


class LspSession:
    """A started, initialized server with helpers for the common steps."""

    def __init__(self, client: LanguageClient, workspace: Path, settings: dict[str, Any]) -> None:
        self.client = client
        self.workspace = workspace
        self.settings = settings
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}

    # -- documents ----------------------------------------------------------------------------

    def copy_example(self, name: str, text: str | None = None) -> tuple[Path, str]:
        """Write ``examples/triton/<name>`` (or ``text``) into the workspace; (path, uri)."""
        path = self.workspace / name
        path.write_text(text if text is not None else (EXAMPLES / name).read_text())
        return path, path.as_uri()

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        text = path.read_text()
        self.versions[uri] = 1
        self.texts[uri] = text
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        return uri

    def change(self, uri: str, text: str) -> int:
        """Replace the whole text (a full-document change) and bump the version."""
        self.versions[uri] += 1
        self.texts[uri] = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=uri, version=self.versions[uri]
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return self.versions[uri]

    def save(self, uri: str, write: bool = True) -> None:
        if write:
            Path(types_uri_path(uri)).write_text(self.texts[uri])
        self.client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    # -- requests -----------------------------------------------------------------------------

    async def command(self, name: str, *args: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=list(args))
        )

    async def lenses(self, uri: str) -> list[types.CodeLens]:
        return list(
            await self.client.text_document_code_lens_async(
                types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
            or []
        )

    async def lens_titles(self, uri: str) -> list[str]:
        return [lens.command.title for lens in await self.lenses(uri) if lens.command]

    async def code_actions(self, uri: str, line: int, character: int = 0) -> list[Any]:
        pos = types.Position(line=line, character=character)
        return list(
            await self.client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=types.Range(start=pos, end=pos),
                    context=types.CodeActionContext(
                        diagnostics=list(self.client.diagnostics.get(uri, []))
                    ),
                )
            )
            or []
        )

    async def hover(self, uri: str, line: int, character: int) -> types.Hover | None:
        return await self.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=character),
            )
        )

    async def configure(self, settings: dict[str, Any]) -> None:
        """Change the client's ``accelopt`` settings and notify the server."""
        _merge(self.settings, copy.deepcopy(settings))
        self.client.set_configuration(self.settings, section="accelopt")
        applied = self._settings_applied()
        self.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"accelopt": self.settings})
        )
        # the server pulls workspace/configuration, applies it and logs "settings changed"
        await self.wait_for(lambda: self._settings_applied() > applied, 60, "settings applied")

    def _settings_applied(self) -> int:
        return sum("settings changed" in m.message for m in self.client.log_messages)

    # -- waiting ------------------------------------------------------------------------------

    async def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 120.0, what: str = ""
    ) -> Any:
        """Poll ``predicate`` every 50 ms until it returns something truthy."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if loop.time() > end:
                raise AssertionError(f"timed out waiting for {what or predicate}")
            await asyncio.sleep(0.05)

    async def wait_for_lens(self, uri: str, needle: str, timeout: float = 120.0) -> list[str]:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            titles = await self.lens_titles(uri)
            if any(needle in t for t in titles):
                return titles
            if loop.time() > end:
                raise AssertionError(f"no code lens containing {needle!r}; last: {titles}")
            await asyncio.sleep(0.1)

    def line_of(self, uri: str, needle: str) -> int:
        """0-based line of the first line containing ``needle``."""
        for i, line in enumerate(self.texts[uri].splitlines()):
            if needle in line:
                return i
        raise AssertionError(f"{needle!r} not in {uri}")

    def job_progress(self, token: Any) -> list[Any]:
        return list(self.client.progress_reports.get(token, []))


def types_uri_path(uri: str) -> str:
    from pygls.uris import to_fs_path

    return to_fs_path(uri)


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP TextEdits (UTF-16 positions; ASCII test files) to ``text``."""
    from accelopt_core.kernelfile import SourceRange

    hunks = [
        (
            SourceRange(
                e.range.start.line + 1,
                e.range.start.character,
                e.range.end.line + 1,
                e.range.end.character,
            ),
            e.new_text,
        )
        for e in edits
    ]
    return apply_hunks(text, hunks)


def workspace_edit_for(
    edit: types.WorkspaceEdit, uri: str
) -> tuple[list[types.TextEdit], int | None]:
    """(text edits for ``uri``, the document version they were computed for or None)."""
    if edit.document_changes:
        for change in edit.document_changes:
            if isinstance(change, types.TextDocumentEdit) and change.text_document.uri == uri:
                return list(change.edits), change.text_document.version
    if edit.changes and uri in edit.changes:
        return list(edit.changes[uri]), None
    raise AssertionError(f"no edit for {uri} in {edit}")


async def start_session(
    client_name: str | types.ClientCapabilities,
    workspace: Path,
    *,
    settings: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[LanguageClient, LspSession]:
    """Start ``python -m accelopt_server`` and run initialize/initialized."""
    # deep copies: configure() merges into these dicts, and BASE_SETTINGS is shared by all tests
    merged = _merge(copy.deepcopy(BASE_SETTINGS), copy.deepcopy(settings or {}))
    merged.setdefault("memoryDir", str(workspace / ".memory"))
    client = make_test_lsp_client()
    # Real editors answer dynamic registration (the server registers for configuration changes).
    client.feature(types.CLIENT_REGISTER_CAPABILITY)(lambda ls, params: None)
    client.applied_edits = []  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def _apply_edit(
        ls: Any, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult:
        client.applied_edits.append(params)  # type: ignore[attr-defined]
        return types.ApplyWorkspaceEditResult(applied=True)

    # lsprotocol reads any result item with a "command" key as a Command, but a CodeAction may
    # carry a command object too; tell them apart as VS Code does (Command.command is a string).
    converter = client.protocol._converter

    def _command_or_action(obj: Any, _: Any) -> types.Command | types.CodeAction:
        kind = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return converter.structure(obj, kind)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], _command_or_action)  # noqa: UP007

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def _lens_refresh(ls: Any, params: None) -> None:
        return None

    client.search_views = []  # type: ignore[attr-defined]

    @client.feature("accelopt/searchView")
    def _search_view(ls: Any, params: Any) -> None:  # issue 32: the live search view
        client.search_views.append(params)  # type: ignore[attr-defined]

    server_env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
    server_env.update(
        {
            TEST_API_KEY_ENV: TEST_API_KEY,
            "ACCELOPT_SHAPE": "small",
            "PYTHONUNBUFFERED": "1",
            # never the user's real ~/.config/accelopt/config.toml (tests/conftest.py)
            "ACCELOPT_CONFIG": os.environ["ACCELOPT_CONFIG"],
        }
    )
    server_env.update(env or {})
    await client.start_io(sys.executable, "-m", "accelopt_server", env=server_env, cwd=str(ROOT))
    caps = (
        client_name
        if isinstance(client_name, types.ClientCapabilities)
        else client_capabilities(client_name)
    )
    client.set_configuration(merged, section="accelopt")
    await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
            initialization_options={"accelopt": merged},
        )
    )
    return client, LspSession(client, workspace, merged)


@pytest_asyncio.fixture
async def lsp(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LspSession]:
    """An initialized session; ``request.param`` is the client name (default VS Code)."""
    name = getattr(request, "param", "visual-studio-code")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    client, session = await start_session(name, workspace)
    request.node.funcargs["_lsp_client"] = client  # lets pytest-lsp attach the server's logs
    try:
        yield session
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), 30)
        except Exception:
            await client.stop()
