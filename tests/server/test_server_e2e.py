"""End-to-end: the real ``accelopt-lsp`` over stdio, with VS Code's and Neovim's client capabilities.

Kernels run under the Triton interpreter on CPU (timings labelled ``interpreter``). The LLM is
tests/llm_double.py, a TEST DOUBLE standing in for the paid OpenAI-compatible service: a scripted
HTTP server on 127.0.0.1 that the server's real openai client talks to.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import client_capabilities

from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest
from tests.lsp_fixtures import (
    EXAMPLES,
    LspSession,
    apply_text_edits,
    start_session,
    workspace_edit_for,
)
from tests.softmax_replies import FAST_REWRITE, PLAN, RULE

# The `lsp` fixtures come from tests/lsp_fixtures.py (a conftest plugin).
pytestmark = [
    pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning"),
]
CLIENTS = ["visual-studio-code", "neovim"]


def llm_script(req: RecordedRequest) -> str | None:
    if req.role == "planner":
        return PLAN
    if req.role == "summarizer":
        return RULE
    if req.role == "executor":
        return FAST_REWRITE
    return None


def kernel_lens(titles: list[str]) -> str:
    return next(
        t for t in titles if " ms" in t or "error" in t or "incorrect" in t or "timeout" in t
    )


# --- profile on save, diagnostics ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("lsp", CLIENTS, indirect=True)
async def test_save_profiles_then_broken_kernel_gets_located_diagnostic(lsp: LspSession) -> None:
    path, _ = lsp.copy_example("softmax.py")
    uri = lsp.open(path)
    assert await lsp.lens_titles(uri) == ["Profile", "Optimize"]

    lsp.save(uri)
    titles = await lsp.wait_for_lens(uri, "interpreter")
    assert "correct" in kernel_lens(titles) and " ms" in kernel_lens(titles)
    await lsp.wait_for(lambda: uri in lsp.client.diagnostics, what="diagnostics")
    assert list(lsp.client.diagnostics[uri]) == []

    # Break the kernel: a name that does not exist in triton.language.
    broken = lsp.texts[uri].replace(
        "tl.exp(x - row_max) / denominator", "tl.no_such_op(x) / denominator"
    )
    lsp.change(uri, broken)
    lsp.save(uri)
    diags = await lsp.wait_for(
        lambda: list(lsp.client.diagnostics.get(uri, [])), what="a failure diagnostic"
    )
    failure = [d for d in diags if d.severity == types.DiagnosticSeverity.Error]
    assert failure, diags
    assert failure[0].source == "accelopt" and "softmax_kernel" in failure[0].message
    # located on the kernel (its name or the failing line), never at the top of the file
    start = lsp.line_of(uri, "def softmax_kernel") - 1
    end = lsp.line_of(uri, "def softmax(x)")
    assert start <= failure[0].range.start.line < end, failure[0]

    # Fix it again: the diagnostic is cleared.
    lsp.change(uri, (EXAMPLES / "softmax.py").read_text())
    lsp.save(uri)
    await lsp.wait_for(
        lambda: uri in lsp.client.diagnostics and not list(lsp.client.diagnostics[uri]),
        what="cleared diagnostics",
    )


# --- optimize with the scripted LLM, apply, persistence -----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("client_name", CLIENTS)
async def test_optimize_progress_actions_apply_hover_stale_and_restart(
    client_name: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with LLMDouble(script=llm_script) as double:
        llm = {"baseUrl": double.base_url, "model": "double-model", "apiKeyEnv": TEST_API_KEY_ENV}
        caps = client_capabilities(client_name)
        if client_name == "visual-studio-code":  # a client that understands the LLM-generated tag
            caps.text_document.code_action.tag_support = types.CodeActionTagOptions(
                value_set=[types.CodeActionTag.LlmGenerated]
            )
        client, s = await start_session(caps, workspace, settings={"llm": llm})
        try:
            path, _ = s.copy_example("softmax.py")
            uri = s.open(path)
            started = await s.command("accelopt.optimize", uri, "softmax_kernel")
            assert started["started"] is True and started["jobId"], started
            job_id = started["jobId"]
            again = await s.command("accelopt.optimize", uri, "softmax_kernel")
            assert again["started"] is False and again["jobId"] == job_id

            # server-initiated progress: begin, report(s), end
            token = f"accelopt-{job_id}"
            await s.wait_for(
                lambda: any(
                    isinstance(v, types.WorkDoneProgressEnd) for v in s.job_progress(token)
                ),
                timeout=300,
                what="progress end",
            )
            kinds = [type(v).__name__ for v in s.job_progress(token)]
            assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
            assert "WorkDoneProgressReport" in kinds
            assert s.job_progress(token)[0].cancellable is True
            jobs = await s.command("accelopt.listJobs")
            job = next(j for j in jobs if j["jobId"] == job_id)
            assert job["state"] == "finished" and job["bestSpeedup"] > 1.0

            # ranked code actions on the kernel, resolved into a versioned minimal edit
            kline = s.line_of(uri, "def softmax_kernel")
            actions = await s.code_actions(uri, kline, 6)
            rewrites = [
                a
                for a in actions
                if isinstance(a, types.CodeAction)
                and a.kind == types.CodeActionKind.RefactorRewrite
            ]
            assert rewrites, actions
            assert (
                rewrites[0].title.startswith("AccelOpt: ")
                and "single-pass online softmax" in rewrites[0].title
            )
            assert "x faster" in rewrites[0].title
            expected_tags = (
                [types.CodeActionTag.LlmGenerated] if client_name == "visual-studio-code" else None
            )
            assert (list(rewrites[0].tags) if rewrites[0].tags else None) == expected_tags
            resolved = await client.code_action_resolve_async(rewrites[0])
            edits, version = workspace_edit_for(resolved.edit, uri)
            if client_name == "visual-studio-code":
                assert version == s.versions[uri]  # TextDocumentEdit carries the version
            new_text = apply_text_edits(s.texts[uri], edits)
            assert "num / tl.sum(num, axis=0)" in new_text and "def get_inputs" in new_text
            assert len(edits) < len(new_text.splitlines())  # hunks, not a whole-file replacement

            # hover on the kernel name shows the experience the search stored
            hover = await s.hover(
                uri, kline, s.texts[uri].splitlines()[kline].index("softmax_kernel") + 2
            )
            assert hover is not None and "keep the row in registers" in hover.contents.value
            # and on an API call the stored rule mentions (tl.sum)
            sum_line = s.line_of(uri, "denominator = tl.sum(")
            api = await s.hover(
                uri, sum_line, s.texts[uri].splitlines()[sum_line].index("tl.sum") + 4
            )
            assert api is not None and "keep the row in registers" in api.contents.value

            # an old action on an edited document is refused (the edit is outside the kernel)
            s.change(uri, s.texts[uri] + "# my note\n")
            with pytest.raises(JsonRpcException) as refused:
                await client.code_action_resolve_async(rewrites[0])
            assert refused.value.code == types.LSPErrorCodes.ContentModified

            # apply the fresh edit, save: the file profiles correct and faster than before
            before = await s.command("accelopt.profile", uri, "softmax_kernel")
            actions = await s.code_actions(uri, kline, 6)
            fresh = next(
                a
                for a in actions
                if isinstance(a, types.CodeAction)
                and a.kind == types.CodeActionKind.RefactorRewrite
            )
            resolved = await client.code_action_resolve_async(fresh)
            edits, _ = workspace_edit_for(resolved.edit, uri)
            applied = apply_text_edits(s.texts[uri], edits)
            assert applied.endswith("# my note\n")  # the user's own edit survives the rewrite
            assert "num / tl.sum(num, axis=0)" in applied
            s.change(uri, applied)
            s.save(uri)
            after = await s.command("accelopt.profile", uri, "softmax_kernel")
            b, a = before["kernels"]["softmax_kernel"], after["kernels"]["softmax_kernel"]
            assert a["status"] == "ok" and a["timing"] == "interpreter"
            assert a["latency_ms"] < b["latency_ms"]
            assert TEST_API_KEY not in "".join(m.message for m in client.log_messages)
        finally:
            await client.shutdown_session()

        # restart: the saved results come back as code actions while the source matches
        # (this time as a client without codeAction/resolve: the action carries a command)
        path.write_text((EXAMPLES / "softmax.py").read_text())
        caps = client_capabilities(client_name)
        caps.text_document.code_action.resolve_support = None
        client, s = await start_session(caps, workspace, settings={"llm": llm})
        try:
            uri = s.open(path)
            kline = s.line_of(uri, "def softmax_kernel")

            async def rewrites_offered() -> list[types.CodeAction]:
                return [
                    a
                    for a in await s.code_actions(uri, kline, 6)
                    if isinstance(a, types.CodeAction)
                    and a.kind == types.CodeActionKind.RefactorRewrite
                ]

            for _ in range(300):  # the restarted server loads the saved report in a thread
                if await rewrites_offered():
                    break
                await asyncio.sleep(0.1)
            offered = await rewrites_offered()
            assert offered and offered[0].command.command == "accelopt.applyCandidate"
            result = await s.command(offered[0].command.command, *offered[0].command.arguments)
            assert result == {"applied": True}
            sent = client.applied_edits[-1].edit
            edits, _ = workspace_edit_for(sent, uri)
            assert "num / tl.sum(num, axis=0)" in apply_text_edits(s.texts[uri], edits)
        finally:
            await client.shutdown_session()


@pytest.mark.slow
@pytest.mark.parametrize("lsp", CLIENTS, indirect=True)
async def test_cancel_mid_search_via_command_and_progress(lsp: LspSession) -> None:
    await lsp.configure({"search": {"iterations": 20, "beamWidth": 2, "plansPerCandidate": 2}})
    path, _ = lsp.copy_example("softmax.py")
    uri = lsp.open(path)
    started = await lsp.command("accelopt.optimize", uri, "softmax_kernel")
    assert started["started"], started
    token = f"accelopt-{started['jobId']}"
    await lsp.wait_for(lambda: lsp.job_progress(token), what="progress begin")
    titles = await lsp.wait_for_lens(uri, "Cancel")
    assert any(t.startswith("AccelOpt: ") for t in titles)

    # The client cancels the progress (the user clicked "Cancel" on the notification).
    lsp.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    await lsp.wait_for(
        lambda: any(isinstance(v, types.WorkDoneProgressEnd) for v in lsp.job_progress(token)),
        timeout=10,
        what="the search to stop",
    )
    jobs = await lsp.command("accelopt.listJobs")
    assert next(j for j in jobs if j["jobId"] == started["jobId"])["state"] == "cancelled"

    # And through the command, by (uri, kernel).
    second = await lsp.command("accelopt.optimize", uri, "softmax_kernel")
    assert second["started"], second
    assert (await lsp.command("accelopt.cancel", uri, "softmax_kernel"))["cancelled"] is True
    token2 = f"accelopt-{second['jobId']}"
    await lsp.wait_for(
        lambda: any(isinstance(v, types.WorkDoneProgressEnd) for v in lsp.job_progress(token2)),
        timeout=10,
        what="the second search to stop",
    )
    assert (await lsp.command("accelopt.cancel", second["jobId"]))["cancelled"] is False
