"""End-to-end: `accelopt optimize` / `profile` / `memory` as a user runs them, in subprocesses,
on the real examples, with the real worker under the Triton interpreter on CPU.

The LLM run talks to tests/llm_double.py: a TEST DOUBLE standing in for the paid OpenAI-compatible
service (a scripted HTTP server on 127.0.0.1 that the real openai client talks to).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text
from tests.report.pages import view_of
from tests.softmax_replies import FAST_REWRITE, NO_CODE, NO_COMPILE, PLAN, RULE, WRONG

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "triton" / "softmax.py"

pytestmark = pytest.mark.slow


def run_cli(
    *args: str, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
    env["ACCELOPT_MEMORY_DIR"] = str(tmp_path / "memory")
    env["ACCELOPT_CONFIG"] = str(tmp_path / "no-user-config.toml")  # never the real one
    env["PYTHONUNBUFFERED"] = "1"
    return env


def memory_list(env: dict[str, str]) -> list[dict]:
    proc = run_cli("memory", "list", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def check_report_page(page: Path, report: dict, env: dict[str, str]) -> None:
    """``--report`` wrote the search's page (issue 32): every candidate the search met and the
    experiences it added; ``accelopt report`` draws the same search again from its run."""
    assert page.stat().st_size <= 10 * 2**20
    view = view_of(page.read_text())
    ids = {n["id"] for n in view["nodes"]}
    assert {c["id"] for c in report["candidates"] + report["explored"]} <= ids
    assert report["experiences"] and len(report["experiences"]) == report["memory_added"]
    assert [e["id"] for e in view["experiences"]] == [e["id"] for e in report["experiences"]]
    again = page.with_name("again.html")
    proc = run_cli("report", report["run_id"], "-o", str(again), env=env)
    assert proc.returncode == 0 and str(again) in proc.stdout, proc.stderr
    assert view_of(again.read_text())["nodes"] == view["nodes"]


def test_optimize_offline_finds_verifies_ranks_and_remembers(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    kernel = tmp_path / "softmax.py"
    shutil.copy(SOFTMAX, kernel)
    page = tmp_path / "out" / "search.html"
    proc = run_cli(
        "optimize", str(kernel), "--json", "--write", "-T", "2", "-B", "2", "-N", "2", "-K", "1",
        "--report", str(page), env=cli_env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    check_report_page(page, report, cli_env)

    assert report["baseline"]["correct"] and report["timing"] == "interpreter"
    assert report["target"] == "local" and report["proposer"] == "offline"
    cands = report["candidates"]
    assert cands, f"no improvement found: {report['failures']}"
    assert [c["rank"] for c in cands] == list(range(1, len(cands) + 1))
    speedups = [c["speedup"] for c in cands]
    assert speedups == sorted(speedups, reverse=True) and speedups[0] > 1.03
    for c in cands:
        assert c["correct"] and c["retimed"]
        assert c["latency_ms"] < report["baseline"]["latency_ms"]
        assert c["diff"].startswith("---") and (
            "BLOCK_SIZE" in c["diff"] or "num_warps" in c["diff"]
        )
        assert "def get_inputs" in c["source"] and "BENCH = {" in c["source"]  # harness intact
    assert report["tokens"]["total"]["total_tokens"] == 0

    experiences = memory_list(cli_env)
    positives = [e for e in experiences if e["positive"]]
    assert positives and all(e["kernel_name"] == "softmax_kernel" for e in positives)
    assert max(e["speedup"] for e in positives) > 1.03

    # --write applied the best candidate (N=2: the offline proposer tries two different
    # parameters, so one of them is a block size, which really changes interpreter time;
    # num_warps alone cannot), and the written file profiles correct
    assert kernel.read_text() == cands[0]["source"] != SOFTMAX.read_text()
    assert f"wrote the best candidate ({cands[0]['speedup']:.2f}x)" in proc.stderr
    prof = run_cli("profile", str(kernel), "--json", env=cli_env)
    assert prof.returncode == 0, prof.stderr
    assert json.loads(prof.stdout)["status"] == "ok"


def test_optimize_with_llm_agents_ranks_only_the_verified_rewrite(cli_env: dict[str, str]) -> None:
    def script(req: RecordedRequest) -> str | None:
        if req.role == "planner":
            return PLAN
        if req.role == "summarizer":
            return RULE
        return None  # executor replies come from the queue; fixer gets the default (no code)

    with LLMDouble(script=script) as double:
        double.queue(
            text(FAST_REWRITE), text(NO_COMPILE), text(WRONG), text(NO_CODE), role="executor"
        )
        env = dict(cli_env, **{TEST_API_KEY_ENV: TEST_API_KEY})
        proc = run_cli(
            "optimize", str(SOFTMAX), "--json", "-T", "1", "-B", "1", "-N", "1", "-K", "4",
            "--llm-base-url", double.base_url, "--llm-model", "double-model", "--api-key-env", TEST_API_KEY_ENV,
            env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        roles = [r.role for r in double.requests]

    assert report["proposer"] == "llm"
    cands = report["candidates"]
    assert len(cands) == 1, cands
    best = cands[0]
    assert best["rank"] == 1 and best["correct"] and best["speedup"] > 1.03
    assert best["plan"] == "single-pass online softmax"
    assert "tl.sum(num, axis=0)" in best["source"] and "0.5 * num" not in best["source"]
    # every failure was classified, none ranked
    assert report["failures"].get("compile_error", 0) >= 1
    assert report["failures"].get("incorrect", 0) >= 1
    assert report["failures"].get("no_code", 0) >= 1
    # tokens were counted per role
    assert report["tokens"]["planner"]["calls"] == 1
    assert report["tokens"]["executor"]["calls"] == 4
    assert report["tokens"]["total"]["total_tokens"] > 0
    assert roles.count("fixer") >= 1  # the fixer got its one try on the failures
    # the API key never appears in what the CLI printed
    assert TEST_API_KEY not in proc.stdout + proc.stderr

    experiences = memory_list(cli_env)
    assert [e["title"] for e in experiences if e["positive"]] == ["keep the row in registers"]
    assert experiences[0]["kernel_name"] == "softmax_kernel"


def test_optimize_with_llm_endpoint_down_reports_and_keeps_baseline(
    cli_env: dict[str, str],
) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(cli_env, **{TEST_API_KEY_ENV: TEST_API_KEY})
    proc = run_cli(
        "optimize", str(SOFTMAX), "--json", "-T", "1", "-B", "1", "-N", "1", "-K", "1",
        "--llm-base-url", f"http://127.0.0.1:{port}/v1", "--llm-model", "m", "--api-key-env", TEST_API_KEY_ENV,
        env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["baseline"]["correct"]
    assert report["candidates"] == []
    assert TEST_API_KEY not in proc.stdout + proc.stderr


def test_cli_bad_inputs_give_located_errors(tmp_path: Path, cli_env: dict[str, str]) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import triton\n\n@triton.jit\ndef k(x):\n    return x +\n")
    proc = run_cli("profile", str(broken), env=cli_env)
    assert proc.returncode == 1
    assert "broken.py:5:" in proc.stderr and "Traceback" not in proc.stderr

    plain = tmp_path / "plain.py"
    plain.write_text("def f():\n    return 1\n")
    proc = run_cli("optimize", str(plain), env=cli_env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "kernel" in proc.stderr.lower()

    missing = run_cli("profile", str(tmp_path / "nope.py"), env=cli_env)
    assert (
        missing.returncode == 1
        and "nope.py" in missing.stderr
        and "Traceback" not in missing.stderr
    )

    no_harness = tmp_path / "noharness.py"
    src = SOFTMAX.read_text()
    no_harness.write_text(src[: src.index("# --- benchmark harness")])
    proc = run_cli("optimize", str(no_harness), env=cli_env)
    assert proc.returncode == 1 and "harness" in proc.stderr and "Traceback" not in proc.stderr

    unknown = run_cli("optimize", str(SOFTMAX), "--kernel", "nope_kernel", env=cli_env)
    assert unknown.returncode == 1 and "softmax_kernel" in unknown.stderr


def test_optimize_with_unusable_memory_dir_warns_and_still_optimizes(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the memory directory should be\n")
    env = dict(cli_env, ACCELOPT_MEMORY_DIR=str(blocker / "memory"))
    # one plan is enough: what is checked is the warning and a search that still runs
    proc = run_cli("optimize", str(SOFTMAX), "--json", "-T", "1", "-B", "1", "-N", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "optimization memory" in proc.stderr and "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert report["baseline"]["correct"] and report["memory_added"] == 0
    assert blocker.read_text() == "a file where the memory directory should be\n"  # nothing lost
