"""One ``accelopt optimize --json`` run, as a user runs it, with the executor's replies served
by the scripted OpenAI-compatible double (tests/llm_double.py, a TEST DOUBLE for the paid LLM
service): what the end-to-end tests of issue 52 read (the report, the fixer's prompts by
candidate name, the experiences remembered)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from accelopt_core.memory import OptimizationMemory
from tests.adversarial.hacks import executor_reply, private_env, run_cli
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text


@dataclass
class Run:
    """The JSON report; the fixer's prompts by candidate name; the experiences remembered."""

    report: dict
    fixer: dict[str, str]
    memory: list


def optimize_with_double(
    work: Path,
    kernel_name: str,
    source: str,
    candidates: dict[str, str],
    settings: dict,
    script: Callable[[RecordedRequest], str | None],
    name_of: Callable[[str], str | None],
    timeout: float = 1400,
) -> Run:
    """``accelopt optimize`` on ``source`` (written to ``work/kernel_name``) with ``-T 1 -N 1``
    and every candidate one executor reply of one plan (``-B``/``-K`` = their count); the
    other roles answer by ``script``; ``name_of`` names a candidate from a prompt; ``timeout``
    bounds the command, s. The memory read is the whole of ``work``'s, earlier runs' too."""
    (work / "settings.json").write_text(json.dumps({"accelopt": settings}))
    kernel = work / kernel_name
    kernel.write_text(source)
    env = private_env(work)
    fixer: dict[str, str] = {}
    n = str(len(candidates))
    with LLMDouble(script=script) as double:
        double.queue(*(text(executor_reply(c)) for c in candidates.values()), role="executor")
        env[TEST_API_KEY_ENV] = TEST_API_KEY
        proc = run_cli(
            "optimize", str(kernel), "--json", "-T", "1", "-B", n, "-N", "1", "-K", n,
            "--settings", str(work / "settings.json"), "--llm-base-url", double.base_url,
            "--llm-model", "double-model", "--api-key-env", TEST_API_KEY_ENV,
            env=env, cwd=work, timeout=timeout,
        )  # fmt: skip
        for req in double.requests:
            if req.role == "fixer":
                prompt = "\n".join(str(m.get("content")) for m in req.messages)
                fixer[name_of(prompt) or "?"] = prompt
    assert proc.returncode == 0, proc.stderr[-3000:]
    with OptimizationMemory(work / "memory" / "memory") as memory:
        experiences = memory.all()
    return Run(json.loads(proc.stdout), fixer, experiences)
