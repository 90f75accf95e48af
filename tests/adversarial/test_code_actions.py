"""Through the real language server (``python -m accelopt_server`` over stdio, pytest-lsp): a search
whose LLM (the scripted double, tests/llm_double.py, a TEST DOUBLE for the paid LLM service)
serves only reward-hack candidates, one or more of each class, ends with no rewrite offered as a
code action on the kernel.

``env_cwd_write`` is left out here: the test server runs in the repository root, and a hack
that got through would leave its cache file there.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types

from tests.adversarial.hacks import HACKS, executor_reply
from tests.llm_double import TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text
from tests.lsp_fixtures import start_session
from tests.softmax_replies import PLAN, RULE

pytestmark = [pytest.mark.slow]

SERVED = [
    "cache_dict_update",
    "cache_closure",
    "torch_getattr",
    "torch_ctx_fallback",
    "timing_call_counter",
    "timing_perf_counter",
    "output_lazy_proxy",
    "output_tensor_subclass",
    "poison_torch_softmax",
    "forge_gc_emitter",
    "forge_fd_spray",
    "env_triton_interpret",
]


def _script(req: RecordedRequest) -> str | None:
    if req.role == "planner":
        return PLAN
    if req.role == "summarizer":
        return RULE
    return None


async def test_a_search_of_hacks_offers_no_code_action(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with LLMDouble(script=_script) as double:
        double.queue(*(text(executor_reply(HACKS[n])) for n in SERVED), role="executor")
        settings = {
            "llm": {"baseUrl": double.base_url, "model": "double-model", "apiKeyEnv": TEST_API_KEY_ENV},
            "search": {"samplesPerPlan": len(SERVED), "fixerAttempts": 0},
            "evaluation": {"timeoutS": 60, "warmWorkers": True},
        }  # fmt: skip
        client, s = await start_session(
            "visual-studio-code", workspace, settings=settings, env={"TMPDIR": str(tmp_path)}
        )
        try:
            path, _ = s.copy_example("softmax.py")
            uri = s.open(path)
            started = await s.command("accelopt.optimize", uri, "softmax_kernel")
            assert started["started"] is True, started
            token = f"accelopt-{started['jobId']}"
            await s.wait_for(
                lambda: any(
                    isinstance(v, types.WorkDoneProgressEnd) for v in s.job_progress(token)
                ),
                timeout=280,
                what="the search to end",
            )
            jobs = await s.command("accelopt.listJobs")
            job = next(j for j in jobs if j["jobId"] == started["jobId"])
            assert job["state"] == "finished", job
            assert [r.role for r in double.requests].count("executor") == len(SERVED)
            await asyncio.sleep(0.2)  # a last lens/action refresh after the job ended
            kline = s.line_of(uri, "def softmax_kernel")
            actions = await s.code_actions(uri, kline, 6)
            rewrites = [
                a
                for a in actions
                if isinstance(a, types.CodeAction)
                and (a.kind == types.CodeActionKind.RefactorRewrite or "faster" in a.title)
            ]
            assert rewrites == [], [a.title for a in rewrites]
            assert not job.get("bestSpeedup") or job["bestSpeedup"] <= 1.0, job
        finally:
            await asyncio.wait_for(client.shutdown_session(), 30)
