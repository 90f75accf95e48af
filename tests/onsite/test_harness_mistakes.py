"""Harness mistakes get messages about the harness, not about the candidate (issue 13): the
original file's harness runs in the reference process, whose every answer is awaited for at
most ``min(30 s, timeout / 2)``, so a hang there is reported as the harness's, naming the part,
before the evaluation's own timeout would blame the candidate. Real worker runs under the Triton
interpreter (the add example of ``tests/candidates``)."""

from __future__ import annotations

import pytest

from tests.onsite.runs import BASE, run_worker


def _harness(old: str, new: str) -> str:
    assert old in BASE
    return BASE.replace(old, new, 1)


def test_get_inputs_returning_one_tensor_is_named_as_the_harness_mistake():
    bare = _harness("    return x, y\n", "    return x + y\n")
    result, _ = run_worker(BASE, harness_source=bare, baseline_source=BASE)
    assert result.status == "runtime_error"
    assert "get_inputs(1, 'cpu') returned a Tensor, not a tuple of inputs" in result.message
    assert "return (x,)" in result.message


@pytest.mark.slow  # waits out the harness's 10 s
def test_a_reference_that_never_returns_is_the_harness_hang_not_the_candidates():
    hung = _harness("    return x + y\n", "    while True:\n        pass\n")
    result, _ = run_worker(BASE, harness_source=hung, baseline_source=BASE, timeout_s=20.0)
    assert result.status == "timeout"  # the harness's own 10 s wait, not the evaluation's 20 s
    # (20 s, not less: a loaded machine spends several seconds importing torch and triton)
    assert "harness gave no answer within 10 s" in result.message
    assert "inputs and reference of seed 1 (get_inputs, reference)" in result.message
    assert "candidate was not blamed" in result.message


@pytest.mark.slow  # waits out the evaluation's 20 s
def test_a_harness_file_that_hangs_at_import_is_named():
    hung = BASE + "\n\nwhile True:\n    pass\n"
    result, _ = run_worker(BASE, harness_source=hung, baseline_source=BASE, timeout_s=20.0)
    assert result.status == "timeout"
    assert "while loading the original file" in result.message
