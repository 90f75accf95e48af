"""Issue 22 end to end, as a new user meets it: ``accelopt optimize --json`` (the real CLI, in a
subprocess) on a single-shape softmax file (16×64, no ``BENCH["shapes"]``), its executor served by
the scripted OpenAI-compatible double (tests/llm_double.py, a TEST DOUBLE for the paid LLM
service) with five candidates that hard-code what the one shape happens to be and two legitimate
ones (tests/shapes/specialized.py).

The baseline's evaluation derives shapes from the harness's inputs (16→15, 16→20 rows, 64→63,
64→80 columns) and every candidate is checked on them: no shape-specialized candidate is ranked,
each one's failure names the derived shape (the fixer, which gets the judge's message, is how
the test reads it), and the dispatch with a general fallback and the block-size tuning rank.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest

from tests.adversarial.hacks import executor_reply, private_env, run_cli
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text
from tests.shapes.specialized import HARNESS, LEGITIMATE, SOFTMAX_FILE, SPECIALIZED, name_of

pytestmark = pytest.mark.slow

PLAN = "Title: one pass per row\nLoad each row once and keep it in registers."
RULE = "Title: one pass\nRule: when a row fits one block, load it once."
NO_CODE = "I cannot fix this one."

#: Small evaluations; one fixer try, so each failing candidate's message reaches the fixer.
SETTINGS = {
    "search": {"fixerAttempts": 1},
    "evaluation": {
        "seeds": 2,
        "warmupMs": 1,
        "repMs": 5,
        "timeoutS": 120,
        "cpuSlots": 2,
        "warmWorkers": True,
    },
}


@dataclass
class Run:
    """The JSON report, the fixer's prompts by candidate name, the CLI's stderr, wall s."""

    report: dict
    fixer: dict[str, str]
    stderr: str
    wall_s: float


def _script(req: RecordedRequest) -> str | None:
    if req.role == "planner":
        return PLAN
    if req.role == "summarizer":
        return RULE
    if req.role == "fixer":
        return NO_CODE
    return None  # executor replies come from the queue


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("derived-shapes-search")
    kernel = work / "softmax.py"
    kernel.write_text(SOFTMAX_FILE)
    (work / "settings.json").write_text(json.dumps({"accelopt": SETTINGS}))
    env = private_env(work)
    samples = [
        executor_reply(src + HARNESS) for src in (*SPECIALIZED.values(), *LEGITIMATE.values())
    ]
    with LLMDouble(script=_script) as double:
        double.queue(*(text(s) for s in samples), role="executor")
        env[TEST_API_KEY_ENV] = TEST_API_KEY
        t0 = time.monotonic()
        proc = run_cli(
            "optimize", str(kernel), "--json", "-T", "1", "-B", "2", "-N", "1",
            "-K", str(len(samples)), "--settings", str(work / "settings.json"),
            "--llm-base-url", double.base_url, "--llm-model", "double-model",
            "--api-key-env", TEST_API_KEY_ENV,
            env=env, cwd=work, timeout=900,
        )  # fmt: skip
        wall = time.monotonic() - t0
        fixer = {}
        for req in double.requests:
            if req.role == "fixer":
                prompt = "\n".join(str(m.get("content")) for m in req.messages)
                fixer[name_of(prompt) or "?"] = prompt
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Run(json.loads(proc.stdout), fixer, proc.stderr, wall)


def test_the_baseline_derives_four_shapes_and_uses_them(run: Run) -> None:
    derived = run.report["derived_inputs"]
    assert derived == run.report["baseline"]["result"]["metrics"]["derived_inputs"]
    parts = [p for d in derived["used"] for p in d.get("parts", [d])]
    names = [p["name"] for p in parts if p["kind"] == "shape"]
    assert names == ["x[0] 16→15", "x[0] 16→20", "x[1] 64→63", "x[1] 64→80"]
    # each shape in a slot with values (issue 29), within the first MIN_USED slots that the
    # cost budget never defers (issue 52); more where the budget allows
    assert len(derived["used"]) >= 4
    assert all(p["kind"] == "shape" for d in derived["used"][:4] for p in d.get("parts", [d])[:1])
    # the baseline reads and writes with unit column stride: column-major storage and a stride
    # of 0 along the rows (issue 52) are not its business
    skipped = [s["name"] for s in derived["skipped"]]
    assert skipped[0] == "x column-major"  # checked whatever the time: a layout of each class
    deferred = [p["name"] for d in derived.get("deferred", []) for p in d.get("parts", [d])]
    assert "x expanded along dim 1 (stride 0)" in skipped + deferred  # checked, or left to search
    print(
        f"derived-shape search: {len(SPECIALIZED) + len(LEGITIMATE)} candidates in {run.wall_s:.1f} s"
    )


def test_no_shape_specialized_candidate_is_ranked(run: Run) -> None:
    ranked = [name_of(c["source"]) for c in run.report["candidates"]]
    assert not set(ranked) & set(SPECIALIZED), f"ranked: {ranked}"


@pytest.mark.parametrize("name", sorted(SPECIALIZED))
def test_each_is_rejected_naming_the_derived_shape(run: Run, name: str) -> None:
    prompt = run.fixer.get(name)
    assert prompt is not None, f"{name} never failed (fixer saw {sorted(run.fixer)})"
    if name == "literal_strides":  # rows 64 apart: the row-padded layout (issue 29) shows it
        assert "derived input x row-padded" in prompt or "derived shape x[" in prompt
    elif name == "literal_grid":
        # a literal grid of 16 programs on 15 rows writes past the output: the interpreter's
        # heap may abort the candidate process then or on a later derived input of the rows
        # (16→20), a runtime_error naming it (a dead process cannot be asked which part it was)
        assert "wrong on derived shape x[0] 16→" in prompt or (
            "(on derived input x[0] 16→" in prompt
        ), prompt[-1500:]
    else:
        assert "wrong on derived shape x[" in prompt, prompt[-1500:]


def test_dispatch_with_fallback_and_block_tuning_rank(run: Run) -> None:
    ranked = {name_of(c["source"]): c for c in run.report["candidates"]}
    for name in LEGITIMATE:
        assert name in ranked, f"{name} not ranked; failures {run.report['failures']}"
        cand = ranked[name]
        assert cand["correct"] and cand["speedup"] > 1.0
        used = cand["result"]["metrics"]["derived_inputs"]["used"]
        assert len(used) == len(run.report["derived_inputs"]["used"])  # the baseline's slots
    assert not set(run.fixer) & set(LEGITIMATE)
