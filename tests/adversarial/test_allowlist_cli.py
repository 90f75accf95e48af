"""Issue 53, item 6 for the gate's new rejections (item 3): a candidate that imports a module on
no list (``write_wave``) and one that loads libc through ``numpy.ctypeslib`` with only the
kernel stack (``stack_ctypeslib_system``) are listed like every other failure, through the real
CLI (a subprocess): ``accelopt optimize --json``, ``accelopt runs show`` and the memory, where
each is a ``reward-hack: <rule>`` negative; the legitimate rewrite beside them still ranks. The
setting ``gate.allowModules`` in a settings file reaches the gate.

The search's LLM is tests/llm_double.py, a TEST DOUBLE standing in for the paid
OpenAI-compatible service.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelopt_core.memory import OptimizationMemory
from accelopt_core.settings import Settings
from tests.adversarial.hacks import (
    HACKS,
    SOFTMAX,
    executor_reply,
    private_env,
    run_cli,
    settings_file,
)
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text
from tests.softmax_replies import FAST_REWRITE, PLAN, RULE

pytestmark = pytest.mark.slow

#: The candidates served, with the rule and what the message names.
SERVED = {
    "write_wave": ("gate: module not allowed", "module 'wave' is not allowed"),
    "stack_ctypeslib_system": ("gate: ctypes", "np.ctypeslib.load_library"),
}


def _script(req: RecordedRequest) -> str | None:
    if req.role == "planner":
        return PLAN
    if req.role == "summarizer":
        return RULE
    return None


def said(text_out: str) -> str:
    return " ".join(text_out.split())  # rich wraps long lines


def test_a_search_lists_remembers_and_shows_the_gates_new_rejections(tmp_path: Path) -> None:
    kernel = tmp_path / "softmax.py"
    kernel.write_text(SOFTMAX.read_text())
    env = private_env(tmp_path)
    env[TEST_API_KEY_ENV] = TEST_API_KEY
    samples = [executor_reply(HACKS[n]) for n in SERVED] + [FAST_REWRITE]
    with LLMDouble(script=_script) as double:
        double.queue(*(text(s) for s in samples), role="executor")
        proc = run_cli(
            "optimize", str(kernel), "--json", "-T", "1", "-B", "1", "-N", "1",
            "-K", str(len(samples)), "--settings", str(settings_file(tmp_path)),
            "--llm-base-url", double.base_url, "--llm-model", "double-model",
            "--api-key-env", TEST_API_KEY_ENV,
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["failures"].get("rejected", 0) >= len(SERVED), report["failures"]
    dumped = json.dumps(report)
    for rule, named in SERVED.values():
        assert rule in dumped and named in dumped, (rule, named, dumped[:3000])
    assert "accelopt.gate.allowModules" in dumped
    assert report["candidates"], "the legitimate rewrite was not ranked"
    assert all("adversarial candidate" not in c["source"] for c in report["candidates"])
    # accelopt runs show
    listed = run_cli("runs", "--json", env=env, cwd=tmp_path)
    run_id = json.loads(listed.stdout)[0]["id"]
    shown = run_cli("runs", "show", run_id, env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    for _, named in SERVED.values():  # listed as a failure of the gate stage, by its message
        assert "gate (line " in said(shown.stdout), shown.stdout[-3000:]
        assert named in said(shown.stdout), shown.stdout[-3000:]
    # the memory: a negative experience named by each rule
    memory, warning = OptimizationMemory.open(Settings(memory_dir=env["ACCELOPT_MEMORY_DIR"]))
    assert memory is not None, warning
    with memory:
        titles = {e.title: e for e in memory.all()}
    for name, (rule, _) in SERVED.items():
        exp = titles.get(f"reward-hack: {rule}")
        assert exp is not None and not exp.positive, sorted(titles)
        assert f"[adversarial candidate {name}]" in exp.fast_source


def test_allow_modules_in_a_settings_file_reaches_the_gate(tmp_path: Path) -> None:
    """``accelopt optimize`` with ``gate.allowModules: ["wave"]`` in its settings file: the
    candidate that imports wave is no longer rejected for its import (it runs, and the sandbox
    and the judge meet its write instead)."""
    kernel = tmp_path / "softmax.py"
    kernel.write_text(SOFTMAX.read_text())
    env = private_env(tmp_path)
    env[TEST_API_KEY_ENV] = TEST_API_KEY
    settings = settings_file(tmp_path)
    data = json.loads(settings.read_text())
    data["accelopt"]["gate"] = {"allowModules": ["wave"]}
    settings.write_text(json.dumps(data))
    with LLMDouble(script=_script) as double:
        double.queue(text(executor_reply(HACKS["write_wave"])), role="executor")
        proc = run_cli(
            "optimize", str(kernel), "--json", "-T", "1", "-B", "1", "-N", "1", "-K", "1",
            "--settings", str(settings),
            "--llm-base-url", double.base_url, "--llm-model", "double-model",
            "--api-key-env", TEST_API_KEY_ENV,
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    dumped = json.dumps(json.loads(proc.stdout))
    assert "module 'wave' is not allowed" not in dumped, dumped[:3000]
    assert not (Path.home() / "accelopt-escape-marker").exists()
