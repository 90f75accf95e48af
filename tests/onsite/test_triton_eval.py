"""The Triton evaluation: compile errors located in the file, wrong results classified (real
worker runs under the Triton interpreter), and the compile-error line translation."""

from __future__ import annotations

import ast

import pytest

from accelopt_core.onsite.runtime import failures
from tests.onsite.runs import BASE, MODES, line_of, run_worker, src

# --- compile errors ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_syntax_error_is_a_compile_error_with_its_line(mode):
    bad = BASE.replace("    n = x.numel()\n", "    n = x.numel(\n")
    result, _ = run_worker(bad, source_name="syntax.py", mode=mode)
    assert result.status == "compile_error"
    assert "SyntaxError" in result.message
    assert result.line == line_of(bad, "n = x.numel(")


@pytest.mark.slow  # shares the session's batch of worker runs
def test_triton_error_inside_the_kernel_is_a_compile_error_at_the_file_line(judged):
    r = judged["kernel_compile_error"]
    assert r.status == "compile_error", r.message
    assert "add_kernel" in r.message and "power of 2" in r.message
    assert r.line == line_of(src("kernel_compile_error.py"), "tl.arange(0, 100)")


@pytest.mark.slow  # shares the session's batch of worker runs
def test_error_while_loading_the_candidate_is_a_compile_error(judged):
    r = judged["load_error"]
    assert r.status == "compile_error"
    assert "UNDEFINED_CONSTANT" in r.message
    assert r.line == line_of(src("load_error.py"), "BLOCK_SIZE = UNDEFINED_CONSTANT")


def test_compilation_error_line_is_translated_to_the_file():
    from triton.compiler.errors import CompilationError

    source = src("add.py")
    start = source.index("def add_kernel")
    kernel_src = source[start : source.index("\n\n\ndef add(")]  # as JITFunction.src
    node = ast.parse(kernel_src).body[0].body[2]  # "mask = offs < n"
    assert node.lineno == 4  # relative to the def line
    err = CompilationError(kernel_src, node, "boom")
    assert failures.translate_compile_line(err, ast.parse(source)) == line_of(
        source, "mask = offs < n"
    )


# --- wrong results -------------------------------------------------------------------------


@pytest.mark.slow  # shares the session's batch of worker runs
def test_zeros_output_is_incorrect(judged):
    r = judged["zeros"]
    assert r.status == "incorrect"
    assert "mismatch" in r.message
    assert r.max_abs_error > 0


@pytest.mark.slow  # shares the session's batch of worker runs
def test_input_mutation_is_incorrect(judged):
    r = judged["mutates"]
    assert r.status == "incorrect"
    assert "mutated input #0" in r.message


@pytest.mark.slow  # shares the session's batch of worker runs
def test_wrong_shape_and_dtype_are_incorrect(judged):
    assert judged["wrong_shape"].status == "incorrect"
    assert "shape (2, 100)" in judged["wrong_shape"].message
    assert judged["wrong_dtype"].status == "incorrect"
    assert "dtype float64" in judged["wrong_dtype"].message


@pytest.mark.slow  # shares the session's batch of worker runs
def test_nan_output_is_incorrect(judged):
    r = judged["nan"]
    assert r.status == "incorrect"
    assert "NaN/Inf" in r.message and "(0,)" in r.message
