"""``accelopt.showSettings`` through a real LSP session: the effective settings and where each
came from, so an editor shows the target the server will use (issue 12: VS Code's status bar
said ``local`` while the project file named another target)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.lsp_fixtures import start_session

pytestmark = [pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]

PROJECT = (
    '[tool.accelopt]\ntarget = "ssh://gpu-box:2222"\n\n[tool.accelopt.search]\nbeamWidth = 3\n'
)


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim@v0.7.0"])
async def test_show_settings_reports_the_project_files_target(tmp_path: Path, caps: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    pyproject = workspace / "pyproject.toml"
    pyproject.write_text(PROJECT)
    env = {"ACCELOPT_CONFIG": str(tmp_path / "no-user-config.toml")}
    client, s = await start_session(caps, workspace, env=env)
    try:
        path, uri = s.copy_example("softmax.py")
        s.open(path)
        for args in ([], [uri]):  # server-wide, and the document's scope
            shown = await s.command("accelopt.showSettings", *args)
            assert shown["target"] == "ssh://gpu-box:2222"
            assert shown["targetSource"] == f"project file {pyproject}"
            # the editor's settings (the test client sends B=1) win over the file's B=3
            assert shown["settings"]["search.beamWidth"] == 1
            assert shown["sources"]["search.beamWidth"] == "editor settings"
            assert shown["sources"]["llm.model"] == "default"
        with pytest.raises(JsonRpcException) as bad:
            await s.command("accelopt.showSettings", 42)
        assert bad.value.code == -32602
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), 30)
        except Exception:
            await client.stop()
