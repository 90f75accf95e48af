"""Issue 30 through the real ``accelopt-lsp`` over stdio: a reply with the kernel and the
launcher in two blocks becomes the ranked rewrite, and each reply that held no code shows up
with its reason in the output channel (``window/logMessage``), in the progress and in the
job's summary.

The LLM is tests/llm_double.py: a TEST DOUBLE standing in for the paid OpenAI-compatible
service (a scripted HTTP server on 127.0.0.1 that the server's real openai client talks to).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.llm_double import TEST_API_KEY_ENV, LLMDouble, RecordedRequest
from tests.lsp_fixtures import start_session
from tests.reply_styles import PLAN, PROSE, STYLES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning"),
]
RULE = "Title: wider blocks\nRule: cover a row with one block when it fits."


async def test_partial_replies_rank_and_unusable_ones_are_explained(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def script(req: RecordedRequest) -> str:
        if req.role == "planner":
            return PLAN
        if req.role == "summarizer":
            return RULE
        return "Sorry, I would rather not."  # the fixer: no code either

    with LLMDouble(script=script) as double:
        double.queue(STYLES["two_blocks"], PROSE, role="executor")
        llm = {"baseUrl": double.base_url, "model": "double-model", "apiKeyEnv": TEST_API_KEY_ENV}
        settings = {"llm": llm, "search": {"samplesPerPlan": 2}}
        client, s = await start_session("visual-studio-code", workspace, settings=settings)
        try:
            path, _ = s.copy_example("softmax.py")
            uri = s.open(path)
            started = await s.command("accelopt.optimize", uri, "softmax_kernel")
            assert started["started"], started
            token = f"accelopt-{started['jobId']}"
            await s.wait_for(
                lambda: any(
                    isinstance(v, types.WorkDoneProgressEnd) for v in s.job_progress(token)
                ),
                timeout=600,
                what="progress end",
            )
            [job] = [
                j for j in await s.command("accelopt.listJobs") if j["jobId"] == started["jobId"]
            ]
            end = s.job_progress(token)[-1]
            logs = "\n".join(m.message for m in client.log_messages)
        finally:
            await client.shutdown_session()

    assert job["state"] == "finished" and job["bestSpeedup"] > 1.03  # the two blocks ranked
    assert job["failed"] == 2  # the prose, and the fixer's prose for it
    assert end.message is not None and "2 failed (parse 2)" in end.message
    reports = [v for v in s.job_progress(token) if isinstance(v, types.WorkDoneProgressReport)]
    assert any("failed" in (r.message or "") for r in reports)
    assert logs.count("softmax_kernel: candidate failed: parse · plan 'wider blocks and more") == 2
    assert "reply held no code" in logs
