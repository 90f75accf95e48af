"""Peak table and roofline against numbers computed by hand from the datasheet table
(DESIGN.md, "Facts for the roofline")."""

from __future__ import annotations

import pytest

from accelopt_core import hardware
from accelopt_core.onsite import worker


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
    peak = hardware.match_peak(device_name)
    assert (peak.name if peak else None) == expected


def test_table_holds_dense_datasheet_figures_not_sparse_or_tf32():
    h100 = hardware.match_peak("NVIDIA H100 80GB HBM3")
    assert (h100.bf16_tflops, h100.fp32_tflops, h100.hbm_gbps) == (989.0, 67.0, 3350.0)
    assert h100.bf16_tflops != 1979.0 and h100.fp32_tflops != 494.0
    pcie = hardware.match_peak("NVIDIA H100 PCIe")
    assert (pcie.bf16_tflops, pcie.fp32_tflops, pcie.hbm_gbps) == (756.0, 51.0, 2000.0)
    assert hardware.match_peak("NVIDIA H200").hbm_gbps == 4800.0
    trn1 = hardware.match_peak("trn1.2xlarge NeuronCore")
    assert trn1.hbm_gbps == pytest.approx(440.234, abs=1e-3)  # 410 GiB/s in GB/s
    assert trn1.vector_tflops == pytest.approx(0.28672)  # 2 * 128 * 1.12e9 FLOP/s
    assert hardware.match_peak("trn2.48xlarge").fp32_tflops is None


def test_peak_table_is_plain_json_for_the_worker():
    import json

    table = hardware.peak_table()
    assert json.loads(json.dumps(table)) == table
    assert worker.match_peak_entry("NVIDIA H100 PCIe", table)["hbm_gbps"] == 2000.0


def test_memory_bound_fp32_kernel_on_h100_sxm():
    # softmax-like: 1 GB moved, 5 FLOP per 4-byte element -> 1.25e9 FLOP
    # memory: 1e9 / 3350e9 s = 0.29851 ms; compute: 1.25e9 / 67e12 s = 0.018657 ms
    pct, bound = hardware.pct_of_peak(0.5, 1.25e9, 1e9, "NVIDIA H100 80GB HBM3")
    assert bound == "memory"
    assert pct == pytest.approx(0.298507 / 0.5 * 100, rel=1e-5)  # 59.70 %


def test_compute_bound_bf16_matmul_on_h200_uses_the_tensor_peak():
    # 4096^3 matmul: 2 * 4096^3 = 1.37439e11 FLOP; bytes 3 * 4096^2 * 2 = 1.00663e8 B
    flops, nbytes = 2 * 4096**3, 3 * 4096**2 * 2
    pct, bound = hardware.pct_of_peak(0.2, flops, nbytes, "NVIDIA H200", low_precision=True)
    assert bound == "compute"
    assert pct == pytest.approx(flops / 989e12 * 1e3 / 0.2 * 100, rel=1e-9)  # 69.49 %
    pct32, _ = hardware.pct_of_peak(0.2, flops, nbytes, "NVIDIA H200", low_precision=False)
    assert pct32 == pytest.approx(flops / 67e12 * 1e3 / 0.2 * 100, rel=1e-9)  # 1025.7 %: too fast


def test_roofline_fields():
    roof = worker.roofline(
        2e9, 1e9, {"bf16_tflops": 100, "fp32_tflops": 10, "hbm_gbps": 500}, latency_ms=4.0
    )
    assert roof["memory_ms"] == pytest.approx(2.0)  # 1e9 B / 500e9 B/s
    assert roof["compute_ms"] == pytest.approx(0.2)  # 2e9 / 10e12
    assert roof["t_roof_ms"] == pytest.approx(2.0)
    assert roof["pct_of_peak"] == pytest.approx(50.0)
    assert roof["gbps"] == pytest.approx(250.0) and roof["tflops"] == pytest.approx(0.5)


def test_unknown_device_or_missing_work_has_no_percent():
    assert hardware.pct_of_peak(1.0, 1e9, 1e9, "cpu") == (None, None)
    assert hardware.pct_of_peak(1.0, None, None, "NVIDIA H200") == (None, None)
    assert hardware.pct_of_peak(0.0, 1e9, 1e9, "NVIDIA H200") == (None, None)
    # Trainium2 has no FP32 figure: only the memory roof applies
    pct, bound = hardware.pct_of_peak(1.0, 1e12, 3.6e8, "trn2.48xlarge")
    assert bound == "memory" and pct == pytest.approx(100.0)
