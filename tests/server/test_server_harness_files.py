"""Harnesses in their own files, through the real ``accelopt-lsp`` over stdio (issue 13).

The workspace is a copy of tests/byok/project (the ``minikern`` package: kernel modules with
relative imports under ``minikern/ops``, harness files importing them under
``minikern/benchmarks``). Opening a kernel module without a harness of its own finds the harness
file that measures it (``accelopt.harnessGlobs``), several are picked from
(``accelopt.pickHarness``), and the no-harness quick fix creates ``bench_<module>.py`` next to
the module. Kernels run under the Triton interpreter on CPU.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.lsp_fixtures import LspSession, apply_text_edits, start_session

pytestmark = [pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]

PROJECT = Path(__file__).resolve().parents[1] / "byok" / "project"
FORWARD = "_rms_norm_forward_kernel"


def copy_project(tmp_path: Path, drop: tuple[str, ...] = ()) -> Path:
    """tests/byok/project copied to ``tmp_path/ws`` (caches left out), ``drop``'s files (paths
    relative to the copy) removed."""
    workspace = tmp_path / "ws"
    shutil.copytree(PROJECT, workspace, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in drop:
        (workspace / rel).unlink()
    return workspace


async def session(tmp_path: Path, client: str, drop: tuple[str, ...] = ()) -> LspSession:
    workspace = copy_project(tmp_path, drop)
    _, s = await start_session(client, workspace)
    return s


async def stop(s: LspSession) -> None:
    await s.client.shutdown_session()


def lenses_of(lenses: list[types.CodeLens], line: int) -> list[types.Command]:
    return [lens.command for lens in lenses if lens.command and lens.range.start.line == line]


def watched(s: LspSession, path: Path, kind: types.FileChangeType) -> None:
    s.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=path.as_uri(), type=kind)])
    )


async def test_kernel_module_is_profiled_through_the_discovered_harness(tmp_path: Path) -> None:
    s = await session(
        tmp_path, "visual-studio-code", drop=("minikern/benchmarks/bench_rms_norm_backward.py",)
    )
    try:
        path = s.workspace / "minikern" / "ops" / "rms_norm.py"
        uri = s.open(path)
        line = s.line_of(uri, f"def {FORWARD}") - 1  # the lens sits on the decorator
        titles = [c.title for c in lenses_of(await s.lenses(uri), line)]
        assert titles == ["Profile", "Optimize"]
        # the no-harness note is gone: the harness file measures this module
        await s.wait_for(lambda: uri in s.client.diagnostics, what="diagnostics")
        assert not [d for d in s.client.diagnostics[uri] if d.code == "no-harness"]

        out = await s.command("accelopt.profile", uri, FORWARD)
        result = out["kernels"][FORWARD]
        assert result["status"] == "ok", result
        assert result["latency_ms"] > 0 and "interpreter" in result["summary"]
        titles = await s.wait_for_lens(uri, "ms")
        assert any("correct" in t and " ms" in t for t in titles), titles

        # the module's code actions offer the search (the harness makes it runnable)
        actions = await s.code_actions(uri, line + 1, 6)
        optimize = [a for a in actions if a.command and a.command.command == "accelopt.optimize"]
        assert optimize and list(optimize[0].command.arguments) == [uri, FORWARD]
    finally:
        await stop(s)


async def test_several_harnesses_are_picked_from_and_remembered(tmp_path: Path) -> None:
    s = await session(tmp_path, "visual-studio-code")
    asked: list[types.ShowMessageRequestParams] = []
    answer = {"title": "minikern/benchmarks/bench_rms_norm_backward.py"}

    def show_message_request(params: types.ShowMessageRequestParams) -> Any:
        asked.append(params)
        return types.MessageActionItem(title=answer["title"])

    s.client.protocol.fm.features[types.WINDOW_SHOW_MESSAGE_REQUEST] = show_message_request
    try:
        path = s.workspace / "minikern" / "ops" / "rms_norm.py"
        uri = s.open(path)
        line = s.line_of(uri, f"def {FORWARD}") - 1
        (pick,) = lenses_of(await s.lenses(uri), line)
        assert pick.command == "accelopt.pickHarness" and "2 harness files" in pick.title
        actions = await s.code_actions(uri, line + 1, 6)
        assert any(a.command and a.command.command == "accelopt.pickHarness" for a in actions)

        # a file that does not measure the module is refused
        other = str(s.workspace / "minikern" / "benchmarks" / "bench_scale_shift.py")
        refused = await s.command("accelopt.pickHarness", uri, other)
        assert refused["harness"] is None and "does not measure" in refused["message"]

        out = await s.command("accelopt.pickHarness", uri)
        assert [a.title for a in asked[0].actions] == [
            "minikern/benchmarks/bench_rms_norm.py",
            "minikern/benchmarks/bench_rms_norm_backward.py",
        ]
        backward = s.workspace / "minikern" / "benchmarks" / "bench_rms_norm_backward.py"
        assert out["harness"] == str(backward)
        titles = [c.title for c in lenses_of(await s.lenses(uri), line)]
        assert titles == ["Profile", "Optimize", "harness bench_rms_norm_backward.py"]

        # the pick is remembered: a save of the harness file re-binds to the same one
        s.client.text_document_did_save(
            types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=backward.as_uri())
            )
        )
        titles = [c.title for c in lenses_of(await s.lenses(uri), line)]
        assert titles[-1] == "harness bench_rms_norm_backward.py"

        # dismissing the question keeps the pick
        answer["title"] = "something else"
        out = await s.command("accelopt.pickHarness", uri)
        assert out["harness"] is None and out["message"] == "no harness picked"
        assert [c.title for c in lenses_of(await s.lenses(uri), line)] == titles
    finally:
        await stop(s)


async def test_no_harness_quick_fix_creates_a_harness_file(tmp_path: Path) -> None:
    s = await session(
        tmp_path, "visual-studio-code", drop=("minikern/benchmarks/bench_scale_shift.py",)
    )
    try:
        path = s.workspace / "minikern" / "ops" / "scale_shift.py"
        uri = s.open(path)
        diags = await s.wait_for(
            lambda: list(s.client.diagnostics.get(uri, [])), what="no-harness note"
        )
        note = next(d for d in diags if d.code == "no-harness")
        line = note.range.start.line
        assert "no benchmark harness" in (await s.lens_titles(uri))[0]

        actions = await s.code_actions(uri, line, 6)
        fix = next(a for a in actions if a.kind == types.CodeActionKind.QuickFix)
        assert fix.title.startswith("AccelOpt: create bench_scale_shift.py")
        resolved = await s.client.code_action_resolve_async(fix)
        create, edit = resolved.edit.document_changes
        created = path.parent / "bench_scale_shift.py"
        assert isinstance(create, types.CreateFile) and create.uri == created.as_uri()
        assert create.options.overwrite is False
        assert isinstance(edit, types.TextDocumentEdit) and edit.text_document.uri == create.uri
        text = edit.edits[0].new_text
        assert "from minikern.ops.scale_shift import scale_shift\n" in text
        assert '"entry": scale_shift,' in text and "def get_inputs(" in text
        compile(text, "bench_scale_shift.py", "exec")
        assert not created.exists()  # the client creates it

        # the client applies the edit; the file watcher reports it: the module is measured now
        created.write_text(text)
        watched(s, created, types.FileChangeType.Created)
        titles = await s.wait_for_lens(uri, "Optimize", timeout=30)
        assert titles == ["Profile", "Optimize"]
        await s.wait_for(
            lambda: not [d for d in s.client.diagnostics[uri] if d.code == "no-harness"],
            what="the no-harness note cleared",
        )

        created.unlink()
        watched(s, created, types.FileChangeType.Deleted)
        titles = await s.wait_for_lens(uri, "no benchmark harness", timeout=30)
    finally:
        await stop(s)


async def test_harness_document_works_like_the_command_line(tmp_path: Path) -> None:
    s = await session(tmp_path, "visual-studio-code")
    try:
        harness = s.workspace / "minikern" / "benchmarks" / "bench_rms_norm.py"
        kernel = s.workspace / "minikern" / "ops" / "rms_norm.py"
        huri = s.open(harness)
        await s.wait_for_lens(huri, "AccelOpt: profile rms_norm.py", timeout=30)
        (lens,) = await s.lenses(huri)
        assert lens.range.start.line == s.line_of(huri, "BENCH = {")
        assert lens.command.command == "accelopt.profile"
        assert list(lens.command.arguments) == [kernel.as_uri()]

        s.save(huri)  # profile on save: the harness's save profiles the kernel module
        titles = await s.wait_for_lens(huri, f"{FORWARD}: ")
        forward = next(t for t in titles if t.startswith(f"{FORWARD}: "))
        assert " ms" in forward and "correct" in forward, titles

        # opening a harness picked it for the module (two harness files measure it)
        kuri = s.open(kernel)
        line = s.line_of(kuri, f"def {FORWARD}") - 1
        titles = [c.title for c in lenses_of(await s.lenses(kuri), line)]
        assert titles[0] == forward.split(": ", 1)[1]
        assert titles[1].startswith("AccelOpt · sm_90: ") and " regs · occupancy " in titles[1]
        assert titles[2:] == ["Optimize", "harness bench_rms_norm.py"]

        # a harness whose entry comes from a module without kernels: a located warning
        broken = harness.with_name("bench_broken.py")
        broken.write_text(
            "from minikern.utils import calculate_settings\n\n"
            "BENCH = {'entry': calculate_settings}\n"
        )
        buri = s.open(broken)
        (diag,) = await s.wait_for(lambda: s.client.diagnostics.get(buri), what="a warning")
        assert diag.severity == types.DiagnosticSeverity.Warning and diag.code == "harness-error"
        assert "minikern.utils.calculate_settings" in diag.message
        assert await s.lenses(buri) == []

        # a harness file outside accelopt.harnessGlobs counts once opened, as on the CLI
        outside = s.workspace / "tools" / "perf_rms.py"
        outside.parent.mkdir()
        outside.write_text(harness.read_text())
        ouri = s.open(outside)
        # another harness: the module's profiles (by bench_rms_norm.py) are dropped
        await s.wait_for_lens(ouri, "AccelOpt: profile rms_norm.py", timeout=30)
        titles = [c.title for c in lenses_of(await s.lenses(kuri), line)]
        assert titles[-1] == "harness perf_rms.py"
    finally:
        await stop(s)


RELU = '''"""ReLU with its harness inside, in a package: it needs ``..utils`` to import."""

import torch
import triton
import triton.language as tl

from ..utils import calculate_settings


@triton.jit
def _relu_kernel(X, Y, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(Y + offsets, tl.maximum(tl.load(X + offsets, mask=mask), 0.0), mask=mask)


def relu(x):
    y = torch.empty_like(x)
    block, _ = calculate_settings(x.numel())
    _relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK_SIZE=block)
    return y


def get_inputs(seed, device):
    return (torch.randn(100, generator=torch.Generator().manual_seed(seed)).to(device),)


def reference(x):
    return torch.relu(x)


BENCH = {"entry": relu}
'''


async def test_module_in_a_package_with_its_harness_inside_runs_with_its_imports(
    tmp_path: Path,
) -> None:
    s = await session(tmp_path, "neovim")
    try:
        path = s.workspace / "minikern" / "ops" / "relu.py"
        path.write_text(RELU)
        uri = s.open(path)
        assert await s.lens_titles(uri) == ["Profile", "Optimize"]
        out = await s.command("accelopt.profile", uri, "_relu_kernel")
        result = out["kernels"]["_relu_kernel"]
        # the relative import resolves only when the module runs inside its package
        assert result["status"] == "ok", result
    finally:
        await stop(s)


@pytest.mark.slow
async def test_search_through_a_discovered_harness_edits_the_kernel_module(
    tmp_path: Path,
) -> None:
    s = await session(tmp_path, "visual-studio-code")  # no LLM: the offline proposer
    try:
        path = s.workspace / "minikern" / "ops" / "scale_shift.py"
        harness = s.workspace / "minikern" / "benchmarks" / "bench_scale_shift.py"
        before = harness.read_text()
        uri = s.open(path)
        started = await s.command("accelopt.optimize", uri, "_scale_shift_kernel")
        assert started["started"], started
        await s.wait_for_lens(uri, "improvement(s)", timeout=240)
        line = s.line_of(uri, "def _scale_shift_kernel")
        rewrites = [
            a
            for a in await s.code_actions(uri, line, 6)
            if a.kind == types.CodeActionKind.RefactorRewrite
        ]
        assert rewrites and "faster" in rewrites[0].title
        resolved = await s.client.code_action_resolve_async(rewrites[0])
        (change,) = resolved.edit.document_changes
        assert change.text_document.uri == uri  # the kernel module, never the harness
        new = apply_text_edits(s.texts[uri], list(change.edits))
        assert new != s.texts[uri]
        compile(new, "scale_shift.py", "exec")
        assert harness.read_text() == before
    finally:
        await stop(s)
