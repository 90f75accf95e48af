"""Derived shapes in the judge (issue 22), through the real worker under the Triton interpreter.

The baseline's evaluation (no ``derived_shapes`` in the request) derives shapes from the harness's
inputs and keeps those where the reference runs and the baseline is correct; a candidate's
evaluation (the baseline's ``used`` list in the request) is checked on exactly those, never timed.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.targets.shipping import decode_result, encode_stdin, worker_argv
from tests.shapes.specialized import (
    HARNESS,
    MATMUL_FILE,
    MATMUL_LITERAL_K,
    SOFTMAX_FILE,
    SPECIALIZED,
)


def _run(candidate: str, harness: str, entry: str, **fields) -> EvalResult:
    fields.setdefault("timing", "none")
    req = EvalRequest(
        candidate_source=candidate,
        harness_source=harness,
        entry=entry,
        seeds=[1, 2],
        rep_ms=5.0,
        timeout_s=120.0,
        source_name="k.py",
        **fields,
    )
    proc = subprocess.run(
        worker_argv(sys.executable), input=encode_stdin(req), capture_output=True, timeout=240
    )
    return decode_result(proc.stdout, proc.stderr, proc.returncode)


# A harness whose launcher takes the column count as an int input (a scalar size argument),
# and one whose reference accepts only 64 columns.
SCALAR_SIZE = (
    SOFTMAX_FILE.replace("def softmax(x):", "def softmax(x, n):")
    .replace("    return (x.to(device),)", "    return (x.to(device), 64)")
    .replace("def reference(x):", "def reference(x, n):")
)
PICKY_REFERENCE = SOFTMAX_FILE.replace(
    "    return torch.softmax(x, dim=-1)",
    '    assert x.shape[1] == 64, "only 64 columns"\n    return torch.softmax(x, dim=-1)',
)
WITH_SHAPES = (
    SOFTMAX_FILE.replace(
        "def get_inputs(seed: int, device: str) -> tuple:",
        "def get_inputs(seed: int, device: str, rows: int = 16, cols: int = 64) -> tuple:",
    )
    .replace("torch.randn(16, 64,", "torch.randn(rows, cols,")
    .replace(
        '"atol": 1e-5}',
        '"atol": 1e-5, "shapes": [{"rows": 8, "cols": 32}, {"rows": 5, "cols": 33}]}',
    )
)

CASES = {
    "softmax": (SOFTMAX_FILE, SOFTMAX_FILE, "softmax"),
    "specialized_baseline": (SPECIALIZED["literal_columns"] + HARNESS, None, "softmax"),
    "scalar_size": (SCALAR_SIZE, SCALAR_SIZE, "softmax"),
    "picky_reference": (PICKY_REFERENCE, PICKY_REFERENCE, "softmax"),
    "with_shapes": (WITH_SHAPES, WITH_SHAPES, "softmax"),
    "matmul": (MATMUL_FILE, MATMUL_FILE, "matmul"),
}


@pytest.fixture(scope="module")
def baselines() -> dict[str, EvalResult]:
    def one(name: str) -> tuple[str, EvalResult]:
        cand, harness, entry = CASES[name]
        return name, _run(cand, harness or cand, entry)

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, CASES))


def _derived(result: EvalResult) -> dict:
    assert result.ok, result.message
    return result.metrics["derived_shapes"]


def test_baseline_finds_rows_and_columns(baselines) -> None:
    found = _derived(baselines["softmax"])
    assert [d["name"] for d in found["used"]] == [
        "x[0] 16→15",
        "x[0] 16→20",
        "x[1] 64→63",
        "x[1] 64→80",
    ]
    assert all(d["seed"] == 1 and d["shape"] is None for d in found["used"])
    assert found["skipped"] == []


def test_a_baseline_written_for_one_shape_keeps_working(baselines) -> None:
    """The baseline is the oracle: where it is wrong, the derived shape is skipped, with why."""
    found = _derived(baselines["specialized_baseline"])
    assert [d["name"] for d in found["used"]] == ["x[0] 16→15", "x[0] 16→20"]
    why = {s["name"]: s["why"] for s in found["skipped"]}
    assert set(why) == {"x[1] 64→63", "x[1] 64→80"}
    assert all(w.startswith("the baseline is wrong on it: ") for w in why.values()), why


def test_a_scalar_size_argument_is_skipped_with_its_reason(baselines) -> None:
    found = _derived(baselines["scalar_size"])
    assert [d["name"] for d in found["used"]] == ["x[0] 16→15", "x[0] 16→20"]
    (skip,) = found["skipped"]
    assert skip["name"] == "x[1] (d1 = 64)" and "input #1 (n) is the int 64" in skip["why"]


def test_a_reference_that_raises_skips_the_shape(baselines) -> None:
    found = _derived(baselines["picky_reference"])
    why = {s["name"]: s["why"] for s in found["skipped"]}
    assert set(why) == {"x[1] 64→63", "x[1] 64→80"}
    assert all(
        "the reference cannot run on it" in w and "only 64 columns" in w for w in why.values()
    )


def test_bench_shapes_harness_derives_from_its_first_shape(baselines) -> None:
    found = _derived(baselines["with_shapes"])
    assert [d["name"] for d in found["used"]][:3] == ["x[0] 8→7", "x[0] 8→10", "x[1] 32→31"]
    assert all(d["shape"] == {"rows": 8, "cols": 32} for d in found["used"])


def test_matmul_k_loop_with_a_literal_trip_count_is_rejected(baselines) -> None:
    found = _derived(baselines["matmul"])
    names = [d["name"] for d in found["used"]]
    assert names == [
        "a[0] 32→31",
        "a[0] 32→40",
        "a[1] 48→47",
        "a[1] 48→60",
        "b[1] 16→15",
        "b[1] 16→20",
    ]
    k = next(d for d in found["used"] if d["name"] == "a[1] 48→60")
    assert k["inputs"] == "a: 32×60, b: 60×16"
    result = _run(
        MATMUL_LITERAL_K + MATMUL_FILE[MATMUL_FILE.index("\n\ndef get_inputs") :],
        MATMUL_FILE,
        "matmul",
        derived_shapes=found["used"],
    )
    assert result.status == "incorrect", result.message
    assert result.message.startswith("wrong on derived shape a[1] 48→60 (a: 32×60, b: 60×16): ")


def test_candidate_is_checked_on_exactly_the_listed_shapes(baselines) -> None:
    used = _derived(baselines["softmax"])["used"]
    cand = SPECIALIZED["literal_columns"] + HARNESS
    rows_only = [d for d in used if d["symbol"] == "d0"]
    ok = _run(cand, SOFTMAX_FILE, "softmax", derived_shapes=rows_only)
    assert ok.ok, ok.message
    assert [d["name"] for d in ok.metrics["derived_shapes"]["used"]] == [
        "x[0] 16→15",
        "x[0] 16→20",
    ]
    none = _run(cand, SOFTMAX_FILE, "softmax", derived_shapes=[])
    assert none.ok and none.metrics["derived_shapes"]["used"] == []
    assert none.metrics["derived_shapes"]["skipped"] == []
    assert ok.metrics["derived_shapes"]["seconds"] > 0  # their cost, on the judge's clock
    bad = _run(cand, SOFTMAX_FILE, "softmax", derived_shapes=[*rows_only, {"name": "junk"}])
    assert bad.ok and bad.metrics["derived_shapes"]["skipped"] == [
        {"name": "junk", "why": "malformed derived-shape descriptor"}
    ]
    wrong = _run(cand, SOFTMAX_FILE, "softmax", derived_shapes=used)
    assert wrong.status == "incorrect"
    assert wrong.message.startswith("wrong on derived shape x[1] 64→63 (x: 16×63): mismatch")
