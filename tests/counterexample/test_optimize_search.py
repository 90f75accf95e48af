"""Issue 52 end to end, as a user runs it: ``accelopt optimize --json`` (the real CLI, in a
subprocess) on the softmax of tests/values/kernels.py, the executor served by the scripted
OpenAI-compatible double (tests/llm_double.py, a TEST DOUBLE for the paid LLM service) with the
rewrites of tests/counterexample/kernels.py.

The short-row fast path without the max is correct on the harness's inputs and on every derived
input, and faster: only the property-based search finds it wrong. It is not ranked, the fixer is
shown the shrunk counterexample with its seed, and the memory keeps it as a negative experience
with that reason. The legitimate rewrites rank, each with the search's record in its result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from accelopt_core.evaluation.counterexample import SEARCH_RULE
from accelopt_core.memory import OptimizationMemory
from tests.adversarial.hacks import executor_reply, private_env, run_cli
from tests.counterexample.kernels import CANDIDATES, name_of
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text
from tests.values.kernels import SOFTMAX_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

SETTINGS = {
    "search": {"fixerAttempts": 1},
    "evaluation": {"seeds": 3, "warmupMs": 1, "repMs": 5, "timeoutS": 200, "cpuSlots": 2},
}  # the search's seed is the default, evaluation.searchSeed = 1234


def _script(req: RecordedRequest) -> str | None:
    plan = "Title: short rows\nA fast path for short rows."
    rule = "Title: short rows\nRule: one block per short row."
    return {"planner": plan, "summarizer": rule, "fixer": "I cannot fix this one."}.get(req.role)


@dataclass
class Run:
    report: dict
    fixer: dict[str, str]
    memory: list


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("counterexample-search")
    (work / "settings.json").write_text(json.dumps({"accelopt": SETTINGS}))
    kernel = work / "softmax.py"
    kernel.write_text(SOFTMAX_FILE)
    env = private_env(work)
    fixer: dict[str, str] = {}
    n = str(len(CANDIDATES))
    with LLMDouble(script=_script) as double:
        double.queue(*(text(executor_reply(c)) for c in CANDIDATES.values()), role="executor")
        env[TEST_API_KEY_ENV] = TEST_API_KEY
        proc = run_cli(
            "optimize", str(kernel), "--json", "-T", "1", "-B", n, "-N", "1", "-K", n,
            "--settings", str(work / "settings.json"), "--llm-base-url", double.base_url,
            "--llm-model", "double-model", "--api-key-env", TEST_API_KEY_ENV,
            env=env, cwd=work, timeout=1400,
        )  # fmt: skip
        for req in double.requests:
            if req.role == "fixer":
                prompt = "\n".join(str(m.get("content")) for m in req.messages)
                fixer[name_of(prompt) or "?"] = prompt
    assert proc.returncode == 0, proc.stderr[-3000:]
    with OptimizationMemory(work / "memory" / "memory") as memory:
        experiences = memory.all()
    return Run(json.loads(proc.stdout), fixer, experiences)


def _ranked(run: Run) -> dict[str, dict]:
    return {name_of(c["source"]): c for c in run.report["candidates"]}


def test_the_search_only_shortcut_is_not_ranked_and_the_fixer_reads_why(run: Run) -> None:
    assert "short_rows_no_max" not in _ranked(run)
    prompt = run.fixer.get("short_rows_no_max")
    assert prompt is not None, f"never failed (fixer saw {sorted(run.fixer)})"
    line = next(ln for ln in prompt.splitlines() if SEARCH_RULE in ln)
    assert f"{SEARCH_RULE}, seed 1234: x " in line and "NaN/Inf" in line, line


def test_it_is_remembered_as_a_negative_with_the_counterexample(run: Run) -> None:
    negatives = [e for e in run.memory if (e.hack or "").startswith(SEARCH_RULE)]
    assert {name_of(e.fast_source) for e in negatives} == {"short_rows_no_max"}
    assert not negatives[0].positive and "seed 1234" in negatives[0].rule


@pytest.mark.parametrize("name", ["short_rows_with_max", "block64"])
def test_legitimate_rewrites_rank_with_the_search_on_record(run: Run, name: str) -> None:
    ranked = _ranked(run)
    assert name in ranked, f"{name} not ranked; failures {run.report.get('failures')}"
    search = ranked[name]["result"]["metrics"]["derived_inputs"]["search"]
    assert search["seed"] == 1234 and search["counterexample"] is None
    assert 0 < search["usable"] <= search["tried"] and search["calls"] <= search["budget"]
    assert name not in run.fixer
