"""Issue 53, item 6 for the ``file written`` rejection (items 4-5): listed like every other
failure, through the real CLI (a subprocess, the real worker under the Triton interpreter):
``accelopt profile`` (text and ``--json``), ``accelopt optimize --json``, ``accelopt runs show``
and the memory, where it is a ``reward-hack: file written`` negative.

The search's LLM is tests/llm_double.py, a TEST DOUBLE standing in for the paid
OpenAI-compatible service. Its candidate calls a helper of the original file that writes
``~/probe.wav``; the original never calls it, so the original ranks, and the static gate, which
judges only what a candidate changes, lets the call through: only the judge can see the write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelopt_core.memory import OptimizationMemory
from accelopt_core.onsite.sandbox.writes import WRITE_RULE
from accelopt_core.settings import Settings
from tests.adversarial.hacks import SOFTMAX, executor_reply, private_env, run_cli, settings_file
from tests.adversarial.test_search import _script  # planner and summarizer scripted
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, text
from tests.softmax_replies import FAST_REWRITE

pytestmark = pytest.mark.slow

LAUNCHER = '    """Softmax over the last dimension of a 2-D fp32 tensor."""\n'
NOTE = '''

def _note():
    """Leaves a trace in the home directory (never called by the original)."""
    with open(os.path.expanduser("~/probe.wav"), "wb") as f:
        f.write(b"RIFF")
'''
CALL = "    _note()\n"
WRITTEN = "wrote ~/probe.wav during the call"


def with_note(calls: bool) -> str:
    """The softmax example with :data:`NOTE` after its imports; ``calls``: the launcher calls
    it first."""
    src = SOFTMAX.read_text()
    assert LAUNCHER in src and "\nimport triton.language as tl\n" in src
    src = src.replace(
        "\nimport triton.language as tl\n", "\nimport triton.language as tl\n" + NOTE, 1
    )
    return src.replace(LAUNCHER, LAUNCHER + CALL, 1) if calls else src


def said(text_out: str) -> str:
    return " ".join(text_out.split())  # rich wraps long lines


def test_profile_names_the_file_the_kernel_wrote(tmp_path: Path) -> None:
    path = tmp_path / "softmax.py"
    path.write_text(with_note(calls=True))
    env = private_env(tmp_path)
    settings = str(settings_file(tmp_path))
    shown = run_cli(
        "profile", str(path), "--settings", settings, env=env, cwd=tmp_path, timeout=280
    )
    assert shown.returncode == 1, shown.stderr[-2000:]
    assert "rejected" in said(shown.stdout) and WRITTEN in said(shown.stdout), shown.stdout
    assert not (tmp_path / "probe.wav").exists()
    as_json = run_cli(
        "profile", str(path), "--json", "--settings", settings, env=env, cwd=tmp_path, timeout=280
    )
    result = json.loads(as_json.stdout)
    assert result["status"] == "rejected", result
    assert result["message"].startswith(WRITTEN), result["message"]


def test_a_search_lists_remembers_and_shows_the_write(tmp_path: Path) -> None:
    kernel = tmp_path / "softmax.py"
    kernel.write_text(with_note(calls=False))
    env = private_env(tmp_path)
    samples = [executor_reply(with_note(calls=True)), FAST_REWRITE]
    with LLMDouble(script=_script) as double:
        double.queue(*(text(s) for s in samples), role="executor")
        env[TEST_API_KEY_ENV] = TEST_API_KEY
        proc = run_cli(
            "optimize", str(kernel), "--json", "-T", "1", "-B", "1", "-N", "1", "-K", "2",
            "--settings", str(settings_file(tmp_path)),
            "--llm-base-url", double.base_url, "--llm-model", "double-model",
            "--api-key-env", TEST_API_KEY_ENV,
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["failures"].get("rejected", 0) >= 1, report["failures"]
    assert WRITTEN in json.dumps(report), json.dumps(report)[:3000]
    assert report["candidates"], "the legitimate rewrite was not ranked"
    assert all(CALL not in c["source"] for c in report["candidates"])
    # accelopt runs show
    listed = run_cli("runs", "--json", env=env, cwd=tmp_path)
    run_id = json.loads(listed.stdout)[0]["id"]
    shown = run_cli("runs", "show", run_id, env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert WRITTEN in said(shown.stdout), shown.stdout[-3000:]
    # the memory: a negative experience named by the rule
    memory, warning = OptimizationMemory.open(Settings(memory_dir=env["ACCELOPT_MEMORY_DIR"]))
    assert memory is not None, warning
    with memory:
        hacks = [e for e in memory.all() if e.title == f"reward-hack: {WRITE_RULE}"]
    assert hacks and not hacks[0].positive, [e.title for e in memory.all()]
    assert CALL in hacks[0].fast_source
