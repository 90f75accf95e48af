"""Nsight Compute facts on CUDA (issue 21, item 5; issue 31): where ``ncu`` is on ``PATH``, a
passing profile carries ``metrics["ncu"]`` for the kernels the compile stage saw, read by the
real ``ncu`` with the GPU's clocks left alone (``--clock-control none``)."""

from __future__ import annotations

import shutil

import pytest

from tests.gpu.support import GPU, SOFTMAX, profile, record

pytestmark = GPU
#: What this module takes on an H100, seconds (55-66 s in the second and third windows); the device
#: budget skips it when less is left (conftest).
DEVICE_COST_S = 70


@pytest.mark.timeout(420)
def test_ncu_metrics_are_read_when_ncu_is_on_path(tmp_path) -> None:
    if shutil.which("ncu") is None:
        pytest.skip("ncu (Nsight Compute) is not on PATH")
    got = profile(SOFTMAX, tmp_path, ncu=True)
    gpu = got.get("metrics", {}).get("gpu", {})
    facts = got.get("metrics", {}).get("ncu")
    record("ncu/softmax", {"ncu": facts, "gpu_warnings": gpu.get("warnings")})
    assert got["status"] == "ok" and got["timing"] == "cuda", got.get("message")
    assert facts, f"no Nsight Compute facts; the stage's warnings: {gpu.get('warnings')}"
    (kernel,) = facts["kernels"]
    assert kernel["kernel"] == "softmax_kernel" and kernel["launches"] >= 1
    for key in ("achieved_occupancy", "dram_throughput", "sm_throughput"):
        assert 0.0 <= kernel[key] <= 100.0, (key, kernel)
    assert kernel["top_stalls"], kernel
