"""Layouts by principle in the judge (issue 52 item 2), through the real worker under the Triton
interpreter: the baseline of a 3-D kernel that passes every stride is correct on every layout
class, so its evaluation uses them all; each launcher rewrite of tests/values/kernels_layouts.py
is correct on the harness's own inputs and on issue 29's derivations (a last-dimension slice,
the last two dimensions swapped) and ``incorrect`` on the new layout of its class, named in the
message; the legitimate rewrites stay correct on every layout the baseline uses.
"""

from __future__ import annotations

import pytest
import torch

from accelopt_core.onsite.judge import derived_inputs, derived_layouts
from accelopt_core.onsite.protocol import EvalResult
from tests.onsite.runs import run_entry
from tests.values.kernels_layouts import LEGITIMATE, NASTY, SCALE3D_FILE

#: Real evaluations under the interpreter (two baseline runs and a dozen candidate runs).
pytestmark = pytest.mark.slow

SEEDS = [1, 2, 3]
#: Issue 29's layouts: every rewrite here is correct on them.
TODAY = ("x row-padded", "x column-major")


def _run(candidate: str, **fields) -> EvalResult:
    return run_entry(candidate, SCALE3D_FILE, "scale3d", seeds=SEEDS, timeout_s=200.0, **fields)


def _layouts() -> dict[str, dict]:
    """Every layout derived for the harness's 4×8×16 input, by name, made from seed 2 (as a
    baseline's evaluation would; the list a candidate's request carries), independent of the
    judge's budget, which decides how many every candidate is checked on."""
    found, skipped = derived_layouts.plan_layouts((torch.zeros(4, 8, 16),), ["x"], torch)
    assert skipped == []
    return {p["name"]: dict(p, seed=2, shape=None) for p in found}


def _named(result: EvalResult) -> str:
    """The derived input a result's message names (``wrong on derived input NAME (x: ...``)."""
    return next(n for n in _layouts() if result.message.startswith(f"wrong on derived input {n} ("))


def test_the_baseline_that_passes_every_stride_is_correct_on_every_layout() -> None:
    layouts = _layouts()
    assert len(layouts) == 12  # 5 permutations, 3 slices, an offset, 3 stride-0 dimensions
    assert {derived_layouts.layout_class(p) for p in layouts.values()} == {
        "layout: permuted",
        "layout: sliced",
        "layout: offset",
        "layout: expanded",
    }
    result = _run(SCALE3D_FILE, derived_inputs=list(layouts.values()))
    assert result.ok, result.message
    found = result.metrics["derived_inputs"]
    assert [d["name"] for d in found["used"]] == list(layouts) and found["skipped"] == []


def test_the_baselines_evaluation_drops_no_layout_silently() -> None:
    result = _run(SCALE3D_FILE)
    assert result.ok, result.message
    found = result.metrics["derived_inputs"]
    used = {p["name"] for d in found["used"] for p in derived_inputs.parts(d)}
    skipped = {s["name"] for s in found["skipped"]}
    # left to the search: a part alone, or in a slot the budget deferred whole
    deferred = {p["name"] for d in found.get("deferred", []) for p in derived_inputs.parts(d)}
    assert set(_layouts()) <= used | skipped | deferred
    assert set(TODAY) <= used  # the commonest patterns come first: never cut


@pytest.mark.parametrize("name", ["batch_extent", "flat_buffer", "packed_if_full"])
def test_each_rewrite_passes_issue_29s_layouts_and_fails_on_every_layout(name: str) -> None:
    candidate = NASTY[name][0]
    layouts = _layouts()
    today = _run(candidate, derived_inputs=[layouts[n] for n in TODAY])
    assert today.ok, f"{name} should pass the harness and issue 29's layouts: {today.message}"
    result = _run(candidate, derived_inputs=list(layouts.values()))
    assert result.status == "incorrect", result.message
    assert _named(result) not in TODAY, result.message
    assert result.rule.startswith("wrong on derived input ")


@pytest.mark.parametrize("name", list(NASTY))
def test_each_rewrite_is_wrong_on_the_layout_of_its_class_alone(name: str) -> None:
    candidate, klass, part_name = NASTY[name]
    part = _layouts()[part_name]
    assert derived_layouts.layout_class(part) == klass
    result = _run(candidate, derived_inputs=[part])
    assert result.status == "incorrect", result.message
    assert result.message.startswith(f"wrong on derived input {part_name} (x: 4×8×16, strides ")


@pytest.mark.parametrize("name", list(LEGITIMATE))
def test_legitimate_rewrites_stay_correct_on_every_layout(name: str) -> None:
    result = _run(LEGITIMATE[name], derived_inputs=list(_layouts().values()))
    assert result.ok, f"{name}: {result.message}"
    assert result.metrics["derived_inputs"]["skipped"] == []
