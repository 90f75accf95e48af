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

import pytest

from accelopt_core.evaluation.counterexample import SEARCH_RULE
from tests.counterexample.kernels import CANDIDATES, name_of
from tests.llm_double import RecordedRequest
from tests.optimize_run import Run, optimize_with_double
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


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("counterexample-search")
    return optimize_with_double(
        work, "softmax.py", SOFTMAX_FILE, CANDIDATES, SETTINGS, _script, name_of
    )


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
