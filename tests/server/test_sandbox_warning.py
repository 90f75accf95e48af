"""The editor is told once per session when candidates run unconfined on the target (issue 34):
a real LSP session (pytest-lsp, tests/lsp_fixtures.py) whose server has the sandbox turned off
(``ACCELOPT_SANDBOX_OFF=all``, as on a machine without Landlock, bubblewrap or namespaces)
profiles two kernel files; one ``window/showMessage`` warning names what is missing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from accelopt_core.onsite.sandbox.environment import OFF_VAR
from accelopt_core.onsite.sandbox.policy import NOTE_PREFIX
from tests.lsp_fixtures import start_session


async def test_a_session_whose_candidates_run_unconfined_warns_once(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    client, s = await start_session("visual-studio-code", workspace, env={OFF_VAR: "all"})
    try:
        for name, kernel in (("softmax.py", "softmax_kernel"), ("elementwise.py", None)):
            path, uri = s.copy_example(name)
            s.open(path)
            answer = await s.command("accelopt.profile", uri, *([kernel] if kernel else []))
            assert answer["kernels"], answer
            for result in answer["kernels"].values():
                assert any(w.startswith(NOTE_PREFIX) for w in result["warnings"]), result
        await asyncio.sleep(0.5)  # a second message would have arrived by now
        shown = [m for m in client.messages if NOTE_PREFIX in m.message]
        assert len(shown) == 1, [m.message for m in client.messages]
        assert shown[0].type == types.MessageType.Warning
        assert "no filesystem confinement" in shown[0].message
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), 30)
        except Exception:
            await client.stop()
