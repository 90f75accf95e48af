"""Peak table, roofline and the plausibility check against numbers computed by hand from the datasheet table
(DESIGN.md, "Facts for the roofline")."""

from __future__ import annotations

import pytest

from accelopt_core.onsite.judge import roofline


@pytest.mark.parametrize(
    "device_name, expected",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM5"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200"),
        ("trn1.32xlarge NeuronCore", "Trainium1 NeuronCore-v2"),
        ("trn2.48xlarge NeuronCore", "Trainium2 NeuronCore-v3"),
        ("NVIDIA GeForce RTX 4090", None),
        ("cpu", None),
    ],
)
def test_device_names_match_their_peaks(device_name, expected):
    peak = roofline.match_peak(device_name)
    assert (peak.name if peak else None) == expected


def test_table_holds_dense_datasheet_figures_not_sparse_or_tf32():
    h100 = roofline.match_peak("NVIDIA H100 80GB HBM3")
    assert (h100.bf16_tflops, h100.fp32_tflops, h100.hbm_gbps) == (989.0, 67.0, 3350.0)
    assert h100.bf16_tflops != 1979.0 and h100.fp32_tflops != 494.0
    pcie = roofline.match_peak("NVIDIA H100 PCIe")
    assert (pcie.bf16_tflops, pcie.fp32_tflops, pcie.hbm_gbps) == (756.0, 51.0, 2000.0)
    assert roofline.match_peak("NVIDIA H200").hbm_gbps == 4800.0
    trn1 = roofline.match_peak("trn1.2xlarge NeuronCore")
    assert trn1.hbm_gbps == pytest.approx(440.234, abs=1e-3)  # 410 GiB/s in GB/s
    assert trn1.vector_tflops == pytest.approx(0.28672)  # 2 * 128 * 1.12e9 FLOP/s
    assert roofline.match_peak("trn2.48xlarge").fp32_tflops is None


def test_peak_table_is_plain_json_for_the_worker():
    import json

    table = roofline.peak_table()
    assert json.loads(json.dumps(table)) == table
    assert roofline.match_peak_entry("NVIDIA H100 PCIe", table)["hbm_gbps"] == 2000.0


def test_memory_bound_fp32_kernel_on_h100_sxm():
    # softmax-like: 1 GB moved, 5 FLOP per 4-byte element -> 1.25e9 FLOP
    # memory: 1e9 / 3350e9 s = 0.29851 ms; compute: 1.25e9 / 67e12 s = 0.018657 ms
    pct, bound = roofline.pct_of_peak(0.5, 1.25e9, 1e9, "NVIDIA H100 80GB HBM3")
    assert bound == "memory"
    assert pct == pytest.approx(0.298507 / 0.5 * 100, rel=1e-5)  # 59.70 %


def test_compute_bound_bf16_matmul_on_h200_uses_the_tensor_peak():
    # 4096^3 matmul: 2 * 4096^3 = 1.37439e11 FLOP; bytes 3 * 4096^2 * 2 = 1.00663e8 B
    flops, nbytes = 2 * 4096**3, 3 * 4096**2 * 2
    pct, bound = roofline.pct_of_peak(0.2, flops, nbytes, "NVIDIA H200", low_precision=True)
    assert bound == "compute"
    assert pct == pytest.approx(flops / 989e12 * 1e3 / 0.2 * 100, rel=1e-9)  # 69.49 %
    pct32, _ = roofline.pct_of_peak(0.2, flops, nbytes, "NVIDIA H200", low_precision=False)
    assert pct32 == pytest.approx(flops / 67e12 * 1e3 / 0.2 * 100, rel=1e-9)  # 1025.7 %: too fast


def test_roofline_fields():
    roof = roofline.roofline(
        2e9, 1e9, {"bf16_tflops": 100, "fp32_tflops": 10, "hbm_gbps": 500}, latency_ms=4.0
    )
    assert roof["memory_ms"] == pytest.approx(2.0)  # 1e9 B / 500e9 B/s
    assert roof["compute_ms"] == pytest.approx(0.2)  # 2e9 / 10e12
    assert roof["t_roof_ms"] == pytest.approx(2.0)
    assert roof["pct_of_peak"] == pytest.approx(50.0)
    assert roof["gbps"] == pytest.approx(250.0) and roof["tflops"] == pytest.approx(0.5)


def test_trainium2_peaks_are_the_datasheet_per_core_figures():
    trn2 = roofline.match_peak("trn2.48xlarge NeuronCore")
    assert trn2.bf16_tflops == pytest.approx(667 / 8) and trn2.hbm_gbps == pytest.approx(362.5)


def test_unknown_device_or_missing_work_has_no_percent():
    assert roofline.pct_of_peak(1.0, 1e9, 1e9, "cpu") == (None, None)
    assert roofline.pct_of_peak(1.0, None, None, "NVIDIA H200") == (None, None)
    assert roofline.pct_of_peak(0.0, 1e9, 1e9, "NVIDIA H200") == (None, None)
    # Trainium2 has no FP32 figure: only the memory roof applies (2.9 TB/s / 8 = 362.5 GB/s)
    pct, bound = roofline.pct_of_peak(1.0, 1e12, 3.625e8, "trn2.48xlarge")
    assert bound == "memory" and pct == pytest.approx(100.0)


# --- the timing's plausibility on the target -------------------------------------------------


def _plausible(latency_ms: float, peaks: dict, timing: str = "cuda") -> dict:
    import numpy as np

    x = np.zeros(1000, dtype=np.float32)
    result = {"status": "ok", "latency_ms": latency_ms, "device": "Fake GPU X1", "message": "m"}
    bench = {"bytes": lambda x: 1e9, "flops": lambda x: 1e9}  # 1 GB, 1 GFLOP per call
    roofline.plausibility(result, bench, (x,), peaks, timing)
    return result


FAKE_PEAKS = {"Fake GPU": {"bf16_tflops": 100.0, "fp32_tflops": 10.0, "hbm_gbps": 1000.0}}


def test_plausibility_reports_percent_of_peak():
    # t_roof = max(1e9 / 10e12, 1e9 / 1000e9) s = 1 ms (memory); at 2 ms: 50 %
    r = _plausible(2.0, FAKE_PEAKS)
    assert r["status"] == "ok"
    assert r["pct_of_peak"] == pytest.approx(50.0)
    assert r["bound"] == "memory"
    assert r["gbps"] == pytest.approx(500.0) and r["tflops"] == pytest.approx(0.5)


def test_over_100_percent_of_peak_is_rejected_as_implausible():
    r = _plausible(0.5, FAKE_PEAKS)  # 1 GB in 0.5 ms = 2000 GB/s > 1000 GB/s peak
    assert r["status"] == "rejected"
    assert r["message"].startswith("implausible: 200% of peak")


def test_interpreter_timing_gets_no_percent_of_peak():
    r = _plausible(0.5, FAKE_PEAKS, timing="interpreter")
    assert r["status"] == "ok" and "pct_of_peak" not in r
