"""Code lenses and search progress end to end (the real ``accelopt-lsp`` over stdio, VS Code's and
Neovim's capabilities): every lens runs a registered command, lenses are refreshed only for a
client that supports it, an applied improvement is retired, the progress percentage advances to
100, and a failed profile's lens is short (the diagnostic carries the message).

The LLM is tests/llm_double.py, a TEST DOUBLE for the paid OpenAI-compatible service; its
executor answers a launcher-only rewrite of examples/triton/softmax.py (a larger block: one
pass over each row chunk instead of four), which leaves the kernel's text as it was.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from accelopt_server.features import COMMANDS
from tests.llm_double import TEST_API_KEY_ENV, LLMDouble, RecordedRequest
from tests.lsp_fixtures import (
    EXAMPLES,
    LspSession,
    apply_text_edits,
    start_session,
    workspace_edit_for,
)
from tests.softmax_replies import PLAN, RULE

pytestmark = [pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]
CLIENTS = ["visual-studio-code", "neovim"]

MODULE = (EXAMPLES / "softmax.py").read_text().split("# --- benchmark harness")[0]
LAUNCHER_ONLY = "```python\n" + MODULE.replace("BLOCK_SIZE = 16", "BLOCK_SIZE = 64") + "```\n"


def llm_script(req: RecordedRequest) -> str | None:
    return {"planner": PLAN, "summarizer": RULE, "executor": LAUNCHER_ONLY}.get(req.role)


def count_lens_refreshes(s: LspSession) -> list[None]:
    """Replace the test client's ``workspace/codeLens/refresh`` handler by one that counts."""
    seen: list[None] = []

    def refresh(params: Any) -> None:
        seen.append(None)

    s.client.protocol.fm.features[types.WORKSPACE_CODE_LENS_REFRESH] = refresh
    return seen


async def rewrites(
    s: LspSession, uri: str, line: int, *, previews: bool = False
) -> list[types.CodeAction]:
    """The rewrite code actions offered on ``line`` (``previews``: only the "preview" ones a
    client with confirmable change annotations gets beside each rewrite, else only the others)."""
    return [
        a
        for a in await s.code_actions(uri, line, 6)
        if isinstance(a, types.CodeAction)
        and a.kind == types.CodeActionKind.RefactorRewrite
        and bool((a.data or {}).get("preview")) == previews
    ]


async def run_every_lens(s: LspSession, uri: str) -> list[str]:
    """Run each lens's command as Neovim's ``codelens.run()`` would (cancel last); titles."""
    lenses = await s.lenses(uri)
    for lens in sorted(lenses, key=lambda x: x.command.command == "accelopt.cancel"):
        assert lens.command is not None and lens.command.command in COMMANDS, lens
        if lens.command.command not in ("accelopt.optimize", "accelopt.profile"):
            await s.command(lens.command.command, *(lens.command.arguments or []))
    return [lens.command.title for lens in lenses]


async def check_search_view(s: LspSession, uri: str, watched: Any, job_id: str) -> None:
    """Issue 32: ``accelopt.searchView`` answered while the search ran (with the files a
    webview draws it with), its changes came as ``accelopt/searchView`` deltas, and its end as
    the finished view with the ranked candidate's code-action titles; ``accelopt.showSearch``
    writes the same search as a page."""
    assert watched["jobId"] == job_id and watched["running"] is True
    assert watched["view"]["state"] == "running"
    assert watched["assets"]["plotly"].endswith("plotly.min.js")
    assert all(Path(p).is_file() for p in watched["assets"].values())
    notes = await s.wait_for(
        lambda: [n for n in s.client.search_views if hasattr(n, "view")], what="the final view"
    )
    deltas = [n for n in s.client.search_views if hasattr(n, "delta")]
    assert deltas and any(d.delta.nodes for d in deltas), "no live update"
    final = notes[-1]
    assert final.jobId == job_id and final.view.state == "finished"
    ranked = [n for n in final.view.nodes if n.verdict == "ranked"]
    assert len(ranked) == 1 and ranked[0].diff.startswith("---")
    assert len(final.actions) == 1  # pygls renames keys that are no identifiers: ask again
    again = await s.command("accelopt.searchView", uri, "softmax_kernel")
    assert again["running"] is False and again["view"]["state"] == "finished"
    assert [n["id"] for n in again["view"]["nodes"]] == [n.id for n in final.view.nodes]
    titles = again["actions"][ranked[0].id]
    assert titles["title"].startswith("AccelOpt: ") and "x faster" in titles["title"]
    assert titles["previewTitle"] == titles["title"].replace("AccelOpt: ", "AccelOpt: preview ", 1)
    await s.command("accelopt.searchViewClosed", uri, "softmax_kernel")
    shown = await s.command("accelopt.showSearch", uri, "softmax_kernel")
    page = Path(shown["path"]).read_text()
    assert ranked[0].id in page and shown["kernel"] == "softmax_kernel"


def check_progress(reports: list[Any]) -> None:
    percentages = [r.percentage for r in reports if not isinstance(r, types.WorkDoneProgressEnd)]
    assert all(p is not None and 0 <= p <= 100 for p in percentages), percentages
    assert percentages == sorted(percentages), percentages  # never decreasing
    assert percentages[-1] == 100 and isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert any(0 < p < 100 for p in percentages), percentages  # it advanced on the way


@pytest.mark.slow
@pytest.mark.parametrize("client_name", CLIENTS)
async def test_lens_commands_refresh_progress_and_applied_improvement_retired(
    client_name: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with LLMDouble(script=llm_script) as double:
        llm = {"baseUrl": double.base_url, "model": "double-model", "apiKeyEnv": TEST_API_KEY_ENV}
        client, s = await start_session(client_name, workspace, settings={"llm": llm})
        refreshes = count_lens_refreshes(s)
        try:
            path, _ = s.copy_example("softmax.py")
            uri = s.open(path)
            kline = s.line_of(uri, "def softmax_kernel")
            started = await s.command("accelopt.optimize", uri, "softmax_kernel")
            token = f"accelopt-{started['jobId']}"
            watched = await s.command("accelopt.searchView", uri, "softmax_kernel")
            running = await s.wait_for_lens(uri, "Cancel")
            assert any(t.startswith("AccelOpt: ") for t in running)
            assert running.index("Show Search") == running.index("Cancel") - 1
            await s.wait_for(
                lambda: any(
                    isinstance(v, types.WorkDoneProgressEnd) for v in s.job_progress(token)
                ),
                timeout=300,
                what="progress end",
            )
            check_progress(s.job_progress(token))
            await check_search_view(s, uri, watched, started["jobId"])
            titles = await s.wait_for_lens(uri, "1 improvement(s)")
            assert titles == await run_every_lens(s, uri)
            status = await s.command("accelopt.showStatus", uri, "softmax_kernel")
            assert status["improvements"] == 1
            supports = client_name == "visual-studio-code"  # Neovim declares no refreshSupport
            await s.wait_for(lambda: len(refreshes) >= 2 or not supports, what="lens refreshes")
            assert (len(refreshes) >= 2) == supports, refreshes

            offered = await rewrites(s, uri, kline)
            assert len(offered) == 1 and offered[0].is_preferred
            previews = await rewrites(s, uri, kline, previews=True)
            assert [a.title.startswith("AccelOpt: preview ") for a in previews] == (
                [True] if client_name == "visual-studio-code" else []
            )
            resolved = await client.code_action_resolve_async(offered[0])
            edits, _ = workspace_edit_for(resolved.edit, uri)
            applied = apply_text_edits(s.texts[uri], edits)
            assert "BLOCK_SIZE = 64" in applied and applied != s.texts[uri]
            before = len(refreshes)
            s.change(uri, applied)
            # the kernel's text is unchanged, but the improvement is in the file: retired
            assert await rewrites(s, uri, kline) == []
            titles = await s.lens_titles(uri)
            assert not any("improvement" in t for t in titles), titles
            assert (await s.command("accelopt.showStatus", uri, "softmax_kernel"))[
                "improvements"
            ] == 0
            await s.wait_for(lambda: len(refreshes) > before or not supports, what="refresh")
            # undone: offered again
            s.change(uri, (EXAMPLES / "softmax.py").read_text())
            assert len(await rewrites(s, uri, kline)) == 1
        finally:
            await client.shutdown_session()


@pytest.mark.slow
@pytest.mark.parametrize("lsp", CLIENTS, indirect=True)
async def test_failed_profile_lens_is_short_and_the_diagnostic_has_the_message(
    lsp: LspSession,
) -> None:
    path, _ = lsp.copy_example("softmax.py")
    uri = lsp.open(path)
    broken = lsp.texts[uri].replace(
        "tl.exp(x - row_max) / denominator", "tl.no_such_op(x) / denominator"
    )
    lsp.change(uri, broken)
    lsp.save(uri)
    titles = await lsp.wait_for_lens(uri, "error")
    lens = next(t for t in titles if "error" in t)
    assert re.fullmatch(r"[a-z]+ error( · line \d+)?", lens), lens
    diag = next(
        d
        for d in await lsp.wait_for(
            lambda: list(lsp.client.diagnostics.get(uri, [])), what="diagnostic"
        )
        if d.severity == types.DiagnosticSeverity.Error
    )
    assert "no_such_op" in diag.message and len(diag.message) > len(lens)
    if "line" in lens:
        assert int(lens.rsplit(" ", 1)[1]) == diag.range.start.line + 1
    # the lens re-profiles; the status command tells the whole message
    status = await lsp.command("accelopt.showStatus", uri, "softmax_kernel")
    assert "no_such_op" in status["message"] and status["profile"]["status"] != "ok"
