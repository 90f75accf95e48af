"""The compile stage inside a real evaluation (warm workers, issue 21): each way a candidate
fails on an H100 is ``incorrect`` with its reason and line (also when only a later shape shows
it), a legitimate retiling passes with sm_90 facts, spills are a warning, a failing autotune
config is a failure of that config, and an unusable cache home is no compile failure."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from tests.onsite.runs import WarmRunner
from tests.onsite.triton.variants import FAILING, MATMUL, RETILE

pytestmark = pytest.mark.slow

SOFTMAX = (
    __import__("pathlib").Path(__file__).resolve().parents[3] / "examples/triton/softmax.py"
).read_text()

#: A 1,024-wide block in one warp (32 floats per thread per array) capped at 32 registers per
#: thread (``maxnreg``, as a rewrite chasing occupancy would): ptxas spills. (A whole 8,192-wide
#: row in one warp spills without a cap, but ptxas takes 15 s over it cold.)
SPILL = SOFTMAX.replace("    BLOCK_SIZE = 16\n", "    BLOCK_SIZE = 1024\n").replace(
    "        num_warps=1,\n", "        num_warps=1,\n        maxnreg=32,\n"
)

#: 64 warps (2,048 threads per block) only for the last of BENCH["shapes"] (5x33): the stage
#: fails on a later input set than the first, while the judge has already checked the first.
LATE_WARPS = SOFTMAX.replace(
    "        num_warps=1,\n", "        num_warps=1 if n_cols != 33 else 64,\n"
)

AUTOTUNED = MATMUL.replace(
    "@triton.jit\ndef matmul_kernel(",
    "@triton.autotune(configs=[triton.Config({}, num_warps=1, num_stages=1),"
    " triton.Config({}, num_warps=64, num_stages=1)], key=['M'])\n@triton.jit\ndef matmul_kernel(",
).replace("        num_warps=1,\n        num_stages=1,\n", "")


def _request(harness: str, candidate: str, entry: str) -> EvalRequest:
    return EvalRequest(
        candidate_source=candidate,
        harness_source=harness,
        entry=entry,
        source_name=f"{entry}.py",
        seeds=[1, 2],
        timeout_s=600,
    )


def _evaluate_all(cases: list[tuple[str, tuple[str, str, str]]]) -> dict[str, EvalResult]:
    """``cases`` one after another on one warm worker, which must survive them all."""
    runner = WarmRunner()
    try:
        return {name: runner.run(_request(*case)) for name, case in cases}
    finally:
        assert runner.close() == 0


CASES = {name: (MATMUL, src, "matmul") for name, (src, _) in FAILING.items()}
CASES.update(
    retile=(MATMUL, RETILE, "matmul"),
    spill=(SOFTMAX, SPILL, "softmax"),
    autotune=(MATMUL, AUTOTUNED, "matmul"),
    late=(SOFTMAX, LATE_WARPS, "softmax"),
)


@pytest.fixture(scope="module")
def results() -> dict[str, EvalResult]:
    """Every case's result, the cases split between two warm workers that run side by side."""
    cases = list(CASES.items())
    with ThreadPoolExecutor(2) as pool:
        halves = list(pool.map(_evaluate_all, [cases[0::2], cases[1::2]]))
    return {name: result for half in halves for name, result in half.items()}


@pytest.mark.parametrize("name", list(FAILING))
def test_failure_kind_is_incorrect_with_reason(results, name: str) -> None:
    result = results[name]
    assert result.status == "incorrect", result.message
    assert FAILING[name][1] in result.message
    assert result.line is not None


def test_legitimate_retiling_passes_with_sm90_facts(results) -> None:
    result = results["retile"]
    assert result.ok, result.message
    gpu = result.metrics["gpu"]
    assert (gpu["device"], gpu["arch"]) == ("H100 SXM5", "sm_90")
    first = gpu["kernels"][0]
    assert first["config"] == "BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=2"
    assert first["registers"] > 0 and first["threads"] == 128
    assert first["sass"]["tensor_core_op"] in ("HMMA", "HGMMA")
    assert 0 < first["occupancy"]["percent"] <= 100


def test_spills_are_a_warning(results) -> None:
    result = results["spill"]
    assert result.ok, result.message
    kernel = result.metrics["gpu"]["kernels"][0]
    assert kernel["spill_stores"] > 0 and kernel["sass"]["stl"] > 0
    assert kernel["registers"] <= 32
    assert kernel["config"] == "BLOCK_SIZE=1024, num_warps=1, num_stages=3, maxnreg=32"
    assert any("spill stores" in w and "maxnreg=32" in w for w in result.metrics["gpu"]["warnings"])


def test_failing_autotune_config_is_a_failure_of_that_config(results) -> None:
    result = results["autotune"]
    assert result.status == "incorrect", result.message
    assert "threads per block 2,048 > 1,024" in result.message
    assert "autotune config BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=64" in result.message


def test_a_failure_on_a_later_shape_only_is_that_failure(results) -> None:
    result = results["late"]
    assert result.status == "incorrect", result.message
    assert "threads per block 2,048 > 1,024" in result.message
    assert "BLOCK_SIZE=16, num_warps=64" in result.message and result.line is not None


def test_an_unusable_cache_home_is_no_compile_failure(tmp_path) -> None:
    """A read-only or broken ``HOME`` (here: a cache home beneath a file, which not even root
    can make) moves the compile caches to a private temporary root: the baseline still
    compiles for sm_90, instead of failing on the cache's ``Permission denied``."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(blocker / "cache"), TMPDIR=str(tmp_path / "tmp"))
    runner = WarmRunner(env=env)
    try:
        result = runner.run(_request(SOFTMAX, SOFTMAX, "softmax"))
    finally:
        assert runner.close() == 0
    assert result.ok, result.message
    assert result.metrics["gpu"]["kernels"][0]["kernel"] == "softmax_kernel"
    fallback = tmp_path / "tmp" / f"accelopt-compile-{os.getuid()}" / "triton"
    assert any(fallback.iterdir())  # the worker's own entries (triton_key's memo) are there
    # and nothing the evaluation compiled: it compiled into caches of its own (issue 53)
    assert not any(p.suffix == ".cubin" for p in fallback.rglob("*"))
