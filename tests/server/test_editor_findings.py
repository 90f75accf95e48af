"""What a user of the editor saw in a real VS Code (issue 23), checked over the protocol: the
lens of a harness lacking only ``reference`` says so, the best improvement is the preferred
action and each improvement can be previewed (a change annotation that needs confirmation),
the server exits when its client goes, and two servers on one memory directory keep each
other's harness picks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types

from accelopt_core.settings import Settings
from accelopt_server.workloads import PICKS_FILE, WorkloadBinder
from tests.lsp_fixtures import LspSession, apply_text_edits, workspace_edit_for

pytestmark = [pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]
ROOT = Path(__file__).resolve().parents[2]
ELEMENTWISE = (ROOT / "examples" / "triton" / "elementwise.py").read_text()


async def test_lens_names_the_missing_reference(lsp: LspSession) -> None:
    text = ELEMENTWISE.replace("\ndef reference(", "\ndef expected(")
    path, _ = lsp.copy_example("elementwise.py", text)
    uri = lsp.open(path)
    assert await lsp.lens_titles(uri) == [
        "AccelOpt: the harness lacks reference(*inputs) (see Problems) · memory"
    ]
    bare = text.replace("\ndef get_inputs(", "\ndef make_inputs(").replace("BENCH = ", "SETUP = ")
    path, _ = lsp.copy_example("no_harness.py", bare)
    uri = lsp.open(path)
    titles = await lsp.lens_titles(uri)
    assert titles == ["AccelOpt: no benchmark harness (see the code action) · memory"]


@pytest.mark.slow  # a real search (offline proposer, two plans)
async def test_best_improvement_is_preferred_and_each_can_be_previewed(lsp: LspSession) -> None:
    await lsp.configure({"search": {"beamWidth": 1, "plansPerCandidate": 2, "iterations": 1}})
    path, _ = lsp.copy_example("elementwise.py", ELEMENTWISE)
    uri = lsp.open(path)
    started = await lsp.command("accelopt.optimize", uri, "add_gelu_kernel")
    assert started["started"], started
    await lsp.wait_for_lens(uri, "improvement(s), best", timeout=240)
    line = lsp.line_of(uri, "def add_gelu_kernel")
    actions = [a for a in await lsp.code_actions(uri, line, 6) if isinstance(a, types.CodeAction)]
    rewrites = [a for a in actions if a.kind == types.CodeActionKind.RefactorRewrite]
    applies = [a for a in rewrites if not a.title.startswith("AccelOpt: preview ")]
    previews = [a for a in rewrites if a.title.startswith("AccelOpt: preview ")]
    assert applies and len(previews) == len(applies)
    assert applies[0].is_preferred is True and all(not a.is_preferred for a in applies[1:])
    assert previews[0].title == applies[0].title.replace("AccelOpt: ", "AccelOpt: preview ", 1)
    assert rewrites.index(previews[0]) == rewrites.index(applies[0]) + 1

    client = lsp.client
    plain = (await client.code_action_resolve_async(applies[0])).edit
    preview = (await client.code_action_resolve_async(previews[0])).edit
    assert not plain.change_annotations
    (annotation,) = preview.change_annotations.values()
    assert annotation.needs_confirmation is True and annotation.label == applies[0].title
    edits, version = workspace_edit_for(preview, uri)
    assert version == lsp.versions[uri]
    assert all(isinstance(e, types.AnnotatedTextEdit) for e in edits)
    same, _ = workspace_edit_for(plain, uri)
    assert apply_text_edits(lsp.texts[uri], edits) == apply_text_edits(lsp.texts[uri], same)


def _message(body: dict) -> bytes:
    data = json.dumps(body).encode()
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


@pytest.mark.parametrize("goodbye", ["stdin closed", "exit"])
def test_server_exits_when_its_client_goes(goodbye: str) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "accelopt_server"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    try:
        params = {"processId": None, "rootUri": None, "capabilities": {}}
        server.stdin.write(
            _message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        )
        server.stdin.flush()
        assert server.stdout.readline().startswith(b"Content-Length")  # it answered
        if goodbye == "exit":
            server.stdin.write(_message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
            server.stdin.write(_message({"jsonrpc": "2.0", "method": "exit"}))
            server.stdin.flush()
        else:
            server.stdin.close()
        start = time.monotonic()
        assert server.wait(15) == 0
        assert time.monotonic() - start < 10
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_two_servers_on_one_memory_dir_keep_each_others_picks(tmp_path: Path) -> None:
    settings = Settings.model_validate({"memoryDir": str(tmp_path)})

    def binder() -> WorkloadBinder:
        class Adapter:
            harness_measures = None

        return WorkloadBinder(Adapter(), lambda uri: settings, lambda: [])  # type: ignore[arg-type]

    first, second = binder(), binder()
    first.read_picks()
    second.read_picks()  # both windows started before either picked
    first.choices["/ws/a.py"] = "/ws/bench_a.py"
    first.save_picks()
    second.choices["/ws/b.py"] = "/ws/bench_b.py"
    second.save_picks()
    saved = json.loads((tmp_path / PICKS_FILE).read_text())
    assert saved == {"/ws/a.py": "/ws/bench_a.py", "/ws/b.py": "/ws/bench_b.py"}
