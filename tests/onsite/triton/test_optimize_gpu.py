"""Issue 21 end to end: ``accelopt optimize --json`` on a copy of examples/triton/matmul.py, its
executor served by the scripted LLM double (tests/llm_double.py, a TEST DOUBLE for the paid LLM
service) with six candidates that are correct under the CPU interpreter but fail on an H100
(tests/onsite/triton/variants.py) and one legitimate retiling. None of the six is ranked, each is
rejected with its reason (the message the search hands the fixer role); the retiling ranks."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.adversarial.hacks import executor_reply, private_env, run_cli, settings_file
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text
from tests.onsite.triton.variants import FAILING, RETILE
from tests.softmax_replies import PLAN, RULE

pytestmark = pytest.mark.slow

ROOT_MATMUL = "examples/triton/matmul.py"


def _script(req: RecordedRequest) -> str | None:
    return PLAN if req.role == "planner" else RULE if req.role == "summarizer" else None


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[str]]:
    """(the ``--json`` report, the texts of the requests the fixer role received)."""
    from pathlib import Path

    work = tmp_path_factory.mktemp("gpu-search")
    kernel = work / "matmul.py"
    shutil.copy(Path(__file__).resolve().parents[3] / ROOT_MATMUL, kernel)
    env = private_env(work)
    samples = [executor_reply(src) for src, _ in FAILING.values()] + [executor_reply(RETILE)]
    with LLMDouble(script=_script) as double:
        double.queue(*(text(s) for s in samples), role="executor")
        env[TEST_API_KEY_ENV] = TEST_API_KEY
        proc = run_cli(
            "optimize", str(kernel), "--json", "-T", "1", "-B", "1", "-N", "1",
            "-K", str(len(samples)), "--settings", str(settings_file(work, fixer_attempts=1)),
            "--llm-base-url", double.base_url, "--llm-model", "double-model",
            "--api-key-env", TEST_API_KEY_ENV, env=env, cwd=work,
        )  # fmt: skip
        fixer = [json.dumps(r.body) for r in double.requests_for("fixer")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), fixer


@pytest.fixture(scope="module")
def report(search: tuple[dict, list[str]]) -> dict:
    return search[0]


def test_no_candidate_failing_on_the_h100_is_ranked(report: dict) -> None:
    ranked = [c["source"] for c in report["candidates"]]
    for name, (source, _) in FAILING.items():
        assert source not in ranked, f"{name} was ranked although it fails on an H100"
    assert sum(report["failures"].values()) >= len(FAILING), report["failures"]


def test_the_legitimate_retiling_is_ranked(report: dict) -> None:
    legit = [c for c in report["candidates"] if "BLOCK_M = 32" in c["source"]]
    assert legit and legit[0]["correct"], report["failures"]


@pytest.mark.parametrize("name", list(FAILING))
def test_each_failing_candidate_is_rejected_with_its_reason(search, name: str) -> None:
    _, fixer = search
    reason = json.dumps(FAILING[name][1])[1:-1]  # as it appears inside the JSON request body
    assert any(reason in body for body in fixer), f"{name}: no fixer request names {reason!r}"
