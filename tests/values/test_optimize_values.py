"""Issue 29 end to end, as a new user meets it: ``accelopt optimize --json`` (the real CLI, in a
subprocess) on a softmax, a layer norm and an fp16 RMS norm (tests/values/kernels.py), the
executor served by the scripted OpenAI-compatible double (tests/llm_double.py, a TEST DOUBLE for
the paid LLM service) with the rewrites an LLM plausibly proposes.

Five are correct on the harness's random inputs and on every derived shape, and faster: a
softmax without the max, a launcher that takes ``n_cols`` as the row stride, a one-pass
variance, a dropped epsilon, fp16 accumulation. None is ranked; each one's failure names the
derived input that shows it (the fixer, which gets the judge's message, is how the test reads
it) and is remembered as a negative experience with that reason. The legitimate rewrites (an
online softmax, a launcher that calls ``.contiguous()``, block-size tuning, a shape dispatch
with a general fallback, a Welford variance) rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from accelopt_core.memory import OptimizationMemory
from tests.llm_double import RecordedRequest
from tests.optimize_run import optimize_with_double
from tests.values.kernels import (
    LAYERNORM_CANDIDATES,
    LAYERNORM_FILE,
    RMSNORM16_CANDIDATES,
    RMSNORM16_FILE,
    SOFTMAX_CANDIDATES,
    SOFTMAX_FILE,
    name_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # three searches

PLAN = "Title: fewer passes\nRead each row fewer times."
RULE = "Title: fewer passes\nRule: fuse the passes over a row."
NO_CODE = "I cannot fix this one."

SETTINGS = {
    "search": {"fixerAttempts": 1},
    "evaluation": {"seeds": 3, "warmupMs": 1, "repMs": 5, "timeoutS": 200, "cpuSlots": 2},
}

#: kernel file name -> (its source, the candidates served, the entry).
SEARCHES = {
    "softmax.py": (SOFTMAX_FILE, SOFTMAX_CANDIDATES, "softmax"),
    "layer_norm.py": (LAYERNORM_FILE, LAYERNORM_CANDIDATES, "layer_norm"),
    "rms_norm.py": (RMSNORM16_FILE, RMSNORM16_CANDIDATES, "rms_norm"),
}
#: The nasty candidates and the words of the derived input that must show each one.
NASTY = {
    "no_max": "(large)",
    "stride_assumed": "row-padded",
    "one_pass_variance": "(offset)",
    "dropped_eps": "(tiny)",
    "fp16_accumulation": "(large)",
}
LEGITIMATE = ("online_softmax", "contiguous_copy", "block_size_tuning",
              "dispatch_with_fallback", "welford")  # fmt: skip


@dataclass
class Run:
    """Per kernel file: the JSON report; the fixer's prompts by candidate name; the
    experiences remembered."""

    reports: dict[str, dict]
    fixer: dict[str, str]
    memory: list


def _script(req: RecordedRequest) -> str | None:
    return {"planner": PLAN, "summarizer": RULE, "fixer": NO_CODE}.get(req.role)


def _search(work: Path, name: str, fixer: dict[str, str]) -> dict:
    """One search (tests/optimize_run.py) in ``work``, the three sharing its memory; the
    fixer's prompts go into ``fixer``; its report."""
    source, candidates, _entry = SEARCHES[name]
    found = optimize_with_double(
        work, name, source, candidates, SETTINGS, _script, name_of, timeout=1500
    )
    fixer.update(found.fixer)
    return found.report


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("derived-values-search")
    fixer: dict[str, str] = {}
    reports = {name: _search(work, name, fixer) for name in SEARCHES}
    with OptimizationMemory(work / "memory" / "memory") as memory:
        experiences = memory.all()
    return Run(reports, fixer, experiences)


def _ranked(run: Run) -> dict[str, dict]:
    return {
        name_of(c["source"]): c for report in run.reports.values() for c in report["candidates"]
    }


def test_no_numerics_shortcut_is_ranked(run: Run) -> None:
    ranked = _ranked(run)
    assert not set(ranked) & set(NASTY), f"ranked: {sorted(ranked)}"


@pytest.mark.parametrize("name", sorted(NASTY))
def test_each_shortcut_is_rejected_naming_the_derived_input(run: Run, name: str) -> None:
    prompt = run.fixer.get(name)
    assert prompt is not None, f"{name} never failed (fixer saw {sorted(run.fixer)})"
    line = next(ln for ln in prompt.splitlines() if "wrong on derived input" in ln)
    where = line[line.index("wrong on derived input") :].split(":", 1)[0]
    assert NASTY[name] in where, line


@pytest.mark.parametrize("name", LEGITIMATE)
def test_legitimate_rewrites_rank(run: Run, name: str) -> None:
    ranked = _ranked(run)
    failures = {k: r["failures"] for k, r in run.reports.items()}
    assert name in ranked, f"{name} not ranked; failures {failures}"
    assert ranked[name]["correct"] and ranked[name]["speedup"] > 1.0
    assert name not in run.fixer
    # checked on the harness's first seed and on every derived input its baseline was correct on
    (report,) = [
        r for r in run.reports.values() if name in {name_of(c["source"]) for c in r["candidates"]}
    ]
    result = ranked[name]["result"]
    assert result["message"].startswith("correct on 3 seeds (2 of them as derived inputs)")
    used = result["metrics"]["derived_inputs"]["used"]
    assert len(used) == len(report["derived_inputs"]["used"])


def test_shortcuts_are_remembered_as_negatives_with_the_reason(run: Run) -> None:
    negatives = [e for e in (run.memory) if (e.hack or "").startswith("wrong on derived input")]
    remembered = {name_of(e.fast_source): e for e in negatives}
    assert set(NASTY) <= set(remembered), sorted(remembered)
    for name, words in NASTY.items():
        exp = remembered[name]
        assert not exp.positive and words in exp.hack and "wrong on derived input" in exp.rule


def test_the_report_lists_every_derivation_and_why_one_was_skipped(run: Run) -> None:
    derived = run.reports["softmax.py"]["derived_inputs"]
    kinds = [p["kind"] for d in derived["used"] for p in d.get("parts", [d])]
    assert kinds.count("shape") == 4 and kinds.count("values") >= 4 and "layout" in kinds
    ops = [p.get("op") for d in derived["used"] for p in d.get("parts", [d])]
    assert {"large", "tiny", "offset", "outliers"} <= set(ops)  # never deferred (MIN_USED)
    skipped = {s["name"]: s["why"] for s in derived["skipped"]}
    assert skipped["x column-major"].startswith("the baseline is wrong on it")
