"""The settings feature through a real LSP session (pytest-lsp, tests/lsp_fixtures.py): the
project file (``[tool.accelopt]`` in the workspace's pyproject.toml) under the editor's settings,
for clients that answer ``workspace/configuration``, never answer it, or do not have it; file
changes; each settings issue shown once.

The observable is what the server uses: ``accelopt.optimize`` answers
``searching KERNEL: B=.., N=.., K=.., T=.. on TARGET`` from the document's settings.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import client_capabilities

from tests import lsp_fixtures
from tests.lsp_fixtures import LspSession, start_session

pytestmark = [pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]

PYPROJECT = '[project]\nname = "kernels"\n\n[tool.accelopt.search]\n{search}\n'


@pytest.fixture(autouse=True)
def no_editor_search_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The editor sends no ``search`` section (the fixture's tiny B/N/K/T would hide the file)."""
    base = {k: v for k, v in lsp_fixtures.BASE_SETTINGS.items() if k != "search"}
    monkeypatch.setattr(lsp_fixtures, "BASE_SETTINGS", base)


async def start(
    tmp_path: Path,
    caps: str | types.ClientCapabilities,
    search: str,
    settings: dict[str, Any] | None = None,
) -> LspSession:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text(PYPROJECT.format(search=search))
    env = {"ACCELOPT_CONFIG": str(tmp_path / "no-user-config.toml")}
    _, session = await start_session(caps, workspace, settings=settings, env=env)
    return session


async def stop(s: LspSession) -> None:
    try:
        await asyncio.wait_for(s.client.shutdown_session(), 30)
    except Exception:
        await s.client.stop()


async def search_parameters(s: LspSession, uri: str) -> str:
    """Start a search, read the B/N/K/T it started with, cancel it and wait until it ended."""
    started = await s.command("accelopt.optimize", uri, "softmax_kernel")
    assert started["started"], started
    await s.command("accelopt.cancel", started["jobId"])

    async def ended() -> bool:
        jobs = await s.command("accelopt.listJobs")
        return all(job["state"] not in ("queued", "running") for job in jobs)

    for _ in range(600):
        if await ended():
            break
        await asyncio.sleep(0.1)
    return re.search(r"B=\d+, N=\d+, K=\d+, T=\d+", started["message"]).group(0)


def messages_with(s: LspSession, needle: str) -> list[str]:
    """The ``window/showMessage`` texts containing ``needle``."""
    return [m.message for m in s.client.messages if needle in m.message]


def hold_configuration_requests(s: LspSession) -> None:
    """From now on the client never answers ``workspace/configuration`` (as Neovim 0.7)."""

    async def hold(ls: Any, params: types.ConfigurationParams) -> list[Any]:
        await asyncio.Event().wait()
        return []

    s.client.protocol.fm.features[types.WORKSPACE_CONFIGURATION] = hold


def watched_file_changed(s: LspSession, path: Path) -> None:
    s.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=path.as_uri(), type=types.FileChangeType.Changed)]
        )
    )


async def test_project_file_under_the_editor_settings(tmp_path: Path) -> None:
    s = await start(
        tmp_path,
        "visual-studio-code",
        "beamWidth = 3\niterations = 5\nsamplesPerPlan = 2",
        settings={"search": {"samplesPerPlan": 1}},
    )
    try:
        path, _ = s.copy_example("softmax.py")
        uri = s.open(path)
        # B and T from the project file, K from the editor (over the file's 2), N the default
        assert await search_parameters(s, uri) == "B=3, N=2, K=1, T=5"
        await s.configure({"search": {"beamWidth": 4}})
        assert await search_parameters(s, uri) == "B=4, N=2, K=1, T=5"
    finally:
        await stop(s)


@pytest.mark.parametrize("caps", ["neovim@v0.7.0", "visual-studio-code"])
async def test_project_file_applies_when_configuration_is_never_answered(
    tmp_path: Path, caps: str
) -> None:
    s = await start(tmp_path, caps, "beamWidth = 3")
    try:
        path, _ = s.copy_example("softmax.py")
        uri = s.open(path)
        if caps == "visual-studio-code":  # it has the capability, but stops answering
            hold_configuration_requests(s)
            s.client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings=None)
            )
            await asyncio.sleep(0.3)  # the server now waits for its pull
        assert (await search_parameters(s, uri)).startswith("B=3,")
        # the file changes on disk and nobody says so: the next use reads it again
        (s.workspace / "pyproject.toml").write_text(PYPROJECT.format(search="beamWidth = 6"))
        assert (await search_parameters(s, uri)).startswith("B=6,")
    finally:
        await stop(s)


async def test_bad_project_value_is_shown_once_located(tmp_path: Path) -> None:
    s = await start(tmp_path, "visual-studio-code", "beamWidth = -4")
    pyproject = s.workspace / "pyproject.toml"
    try:
        shown = await s.wait_for(lambda: messages_with(s, "accelopt.search.beamWidth"))
        assert str(pyproject) in shown[0] and "[tool.accelopt]" in shown[0]
        path, _ = s.copy_example("softmax.py")
        uri = s.open(path)
        await s.configure({"maxCodeActions": 3})  # pulls again: the same issue is not re-shown
        watched_file_changed(s, pyproject)  # nothing changed in it
        assert (await search_parameters(s, uri)).startswith("B=2,")  # the default
        assert len(messages_with(s, "accelopt.search.beamWidth")) == 1

        pyproject.write_text(PYPROJECT.format(search='beamWidth = "wide"'))
        watched_file_changed(s, pyproject)
        changed = await s.wait_for(lambda: messages_with(s, "valid integer"), 30, "new issue")
        assert "accelopt.search.beamWidth" in changed[0]
        assert len(messages_with(s, "accelopt.search.beamWidth")) == 2
    finally:
        await stop(s)


async def test_saving_the_project_file_reloads_it_without_watched_files(tmp_path: Path) -> None:
    caps = client_capabilities("neovim@v0.7.0")  # no dynamic registration, no configuration
    s = await start(tmp_path, caps, "beamWidth = 3")
    pyproject = s.workspace / "pyproject.toml"
    try:
        pyproject.write_text(PYPROJECT.format(search="iterations = 0"))
        s.client.text_document_did_save(
            types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=pyproject.as_uri())
            )
        )
        # shown at once, without any request that would read the settings
        shown = await s.wait_for(lambda: messages_with(s, "accelopt.search.iterations"), 30)
        assert str(pyproject) in shown[0]
        await s.wait_for(
            lambda: [m for m in s.client.log_messages if "pyproject.toml changed" in m.message],
            30,
            "settings changed log",
        )
    finally:
        await stop(s)


async def test_invalid_editor_setting_is_shown_once(tmp_path: Path) -> None:
    """Item 3 of issue 12: not again on the first configuration pull or change."""
    s = await start(tmp_path, "visual-studio-code", "", settings={"target": "gopher://x"})
    try:
        await s.wait_for(lambda: messages_with(s, "accelopt.target"))
        path, _ = s.copy_example("softmax.py")
        s.open(path)
        await s.configure({"maxCodeActions": 3})
        await s.configure({"maxCodeActions": 4})
        await asyncio.sleep(0.3)
        (message,) = messages_with(s, "accelopt.target")
        assert "editor settings" in message and "'local'" in message
        await s.configure({"target": "local"})  # fixed ...
        await s.configure({"target": "gopher://x"})  # ... and broken again: shown again
        await s.wait_for(lambda: len(messages_with(s, "accelopt.target")) == 2)
    finally:
        await stop(s)
