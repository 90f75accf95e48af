"""The tier's figures (tests/gpu/support.py): runs off the GPU too (no ``gpu`` marker), so
``.device/gpu-check``, which selects ``-m gpu``, leaves it out."""

from __future__ import annotations

from tests.gpu.support import summary


def test_a_results_figures_keep_the_sandboxs_warnings_and_only_them() -> None:
    result = {
        "status": "ok",
        "latency_ms": 0.3,
        "warnings": [
            "sandbox: candidates ran with Unix sockets named by a path reachable (turned off)",
            "sizes scaled for the CPU interpreter: batch_size 4096\u219216",
        ],
        "metrics": {"phases_s": {"timing": 1.0}},
    }
    got = summary(result)
    assert got["sandbox"] == [result["warnings"][0]]
    assert got["status"] == "ok" and got["phases_s"] == {"timing": 1.0}
    assert summary({"status": "ok"})["sandbox"] == []  # the whole sandbox
