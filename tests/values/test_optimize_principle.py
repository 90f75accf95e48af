"""Issue 52's layouts end to end, as a user runs it: ``accelopt optimize --json`` (the real CLI)
on the 3-D ``scale3d`` of tests/values/kernels_layouts.py, the executor served by the scripted
OpenAI-compatible double (tests/llm_double.py, a TEST DOUBLE for the paid LLM service) with the
faster rewrites of tests/values/kernels_batched.py.

Three are correct on the harness's contiguous inputs and on the two layouts of issue 29 (a
padded row, column-major), and faster: each is wrong on one layout class of issue 52 (a
permutation of the batch and row dimensions, a storage offset, stride 0). None is ranked: each
is caught on a derived input of its class, or, where the budget left that class to the search,
by the counterexample search, which tries it first; the fixer reads why and the memory keeps a
negative. The two legitimate rewrites rank.
"""

from __future__ import annotations

import pytest

from accelopt_core.evaluation.counterexample import SEARCH_RULE
from accelopt_core.onsite.judge.derived_checks import DERIVED_RULE
from tests.llm_double import RecordedRequest
from tests.optimize_run import Run, optimize_with_double
from tests.values.kernels_batched import LEGITIMATE, NASTY, name_of
from tests.values.kernels_layouts import SCALE3D_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

SETTINGS = {
    "search": {"fixerAttempts": 1},
    "evaluation": {"seeds": 3, "warmupMs": 1, "repMs": 5, "timeoutS": 200, "cpuSlots": 2},
}
CANDIDATES = {**NASTY, **LEGITIMATE}


def _script(req: RecordedRequest) -> str | None:
    plan = "Title: one program per matrix\nLaunch one program per matrix."
    rule = "Title: one program per matrix\nRule: fewer, larger programs."
    return {"planner": plan, "summarizer": rule, "fixer": "I cannot fix this one."}.get(req.role)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("layouts-search")
    return optimize_with_double(
        work, "scale3d.py", SCALE3D_FILE, CANDIDATES, SETTINGS, _script, name_of
    )


def _ranked(run: Run) -> dict[str, dict]:
    return {name_of(c["source"]): c for c in run.report["candidates"]}


def test_no_layout_shortcut_is_ranked(run: Run) -> None:
    assert not set(_ranked(run)) & set(NASTY), sorted(_ranked(run))


@pytest.mark.parametrize("name", sorted(NASTY))
def test_each_is_caught_and_the_fixer_reads_why(run: Run, name: str) -> None:
    prompt = run.fixer.get(name)
    assert prompt is not None, f"{name} never failed (fixer saw {sorted(run.fixer)})"
    # wrong on one (or crashed on one: reading past the buffer can kill the interpreter)
    caught = (f"{DERIVED_RULE} x ", f"{SEARCH_RULE}, seed 1234: x ", "(on derived input x")
    assert any(words in prompt for words in caught), prompt[-1500:]


def test_each_is_remembered_as_a_negative_with_its_rule(run: Run) -> None:
    """Negatives of the same rule merge in the memory (one experience, seen twice), so each
    shortcut's rule, as the fixer read it, is what must be remembered."""
    hacks = [e.hack or "" for e in run.memory if not e.positive]
    for name in NASTY:
        lines = run.fixer[name].splitlines()
        line = next((ln for ln in lines if DERIVED_RULE in ln or SEARCH_RULE in ln), None)
        if line is None:  # a crash on a derived input: a failure to fix, not a caught rule
            assert any("(on derived input x" in ln for ln in lines), name
        elif SEARCH_RULE in line:
            assert any(h.startswith(SEARCH_RULE) for h in hacks), hacks
        else:
            part = line[line.index(DERIVED_RULE) :].split(" (", 1)[0]  # its derived input's name
            assert any(h.startswith(part) for h in hacks), (part, hacks)


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
def test_legitimate_rewrites_rank(run: Run, name: str) -> None:
    ranked = _ranked(run)
    assert name in ranked, f"{name} not ranked; failures {run.report.get('failures')}"
    assert ranked[name]["correct"] and ranked[name]["speedup"] > 1.0
    search = ranked[name]["result"]["metrics"]["derived_inputs"]["search"]
    assert search["counterexample"] is None and search["usable"] > 0
    assert name not in run.fixer
