"""Hardware peak table and the roofline (% of peak), as in NKIBench (AccelOpt, arXiv 2511.15915).

The numbers are per device (per NeuronCore for Trainium), dense, from the vendors' datasheets
(DESIGN.md, "Facts for the roofline"):

- NVIDIA H100 Tensor Core GPU datasheet (2023): H100 SXM5 989 TFLOP/s BF16/FP16 dense tensor,
  67 TFLOP/s FP32, 3.35 TB/s HBM3; H100 PCIe 756 / 51 TFLOP/s, 2.0 TB/s. The datasheet's
  1979 TFLOP/s is the 2:4-sparse BF16 figure and 494 TFLOP/s is TF32: neither is used here.
- NVIDIA H200 Tensor Core GPU datasheet (2024): compute as H100 SXM5 (989 / 67 TFLOP/s),
  4.8 TB/s HBM3e. (H200 NVL has lower compute; its name also matches "H200", which can only
  under-state its % of peak.)
- AWS Neuron documentation, Trainium / NeuronCore-v2 architecture: 95 TFLOP/s BF16,
  23.75 TFLOP/s FP32 (matmul), 410 GiB/s (= 440.2 GB/s) HBM per NeuronCore; NKIBench also counts
  the vector-engine peak 2 * 128 lanes * 1.12 GHz = 0.28672 TFLOP/s.
- AWS Neuron documentation, Trainium2 / NeuronCore-v3: 79 TFLOP/s BF16, ~0.36 TB/s HBM per core
  (no FP32 figure: the compute roof is left out for FP32 kernels).

Units: TFLOP/s = 1e12 FLOP/s, GB/s = 1e9 B/s. The roofline arithmetic lives in
:func:`accelopt_core.onsite.worker.roofline` (one implementation, shipped to targets).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from accelopt_core.onsite.worker import match_peak_entry, roofline

_GIB = 2**30 / 1e9  # GB per GiB


@dataclass(frozen=True)
class Peak:
    """Theoretical peaks of one device.

    Attributes:
        name: device name (``H100 SXM5``).
        bf16_tflops: BF16/FP16 dense tensor peak, TFLOP/s.
        fp32_tflops: FP32 peak, TFLOP/s (None when the datasheet gives none).
        hbm_gbps: HBM bandwidth, GB/s (1e9 B/s).
        vector_tflops: vector-engine peak, TFLOP/s (Trainium, NKIBench), else None.
        source: where the numbers come from.
    """

    name: str
    bf16_tflops: float
    fp32_tflops: float | None
    hbm_gbps: float
    vector_tflops: float | None = None
    source: str = ""


#: Device-name regex (case-insensitive ``re.search``) -> peaks. First match wins, so the more
#: specific patterns come first.
PEAKS: dict[str, Peak] = {
    r"H100.*PCIe": Peak("H100 PCIe", 756.0, 51.0, 2000.0, source="NVIDIA H100 datasheet"),
    r"H100.*(SXM|HBM3)": Peak("H100 SXM5", 989.0, 67.0, 3350.0, source="NVIDIA H100 datasheet"),
    r"H200": Peak("H200", 989.0, 67.0, 4800.0, source="NVIDIA H200 datasheet"),
    r"trn1|Trainium1|NeuronCore-v2": Peak(
        "Trainium1 NeuronCore-v2",
        95.0,
        23.75,
        410 * _GIB,
        vector_tflops=2 * 128 * 1.12e9 / 1e12,
        source="AWS Neuron docs, Trainium architecture; NKIBench vector peak",
    ),
    r"trn2|Trainium2|NeuronCore-v3": Peak(
        "Trainium2 NeuronCore-v3", 79.0, None, 360.0, source="AWS Neuron docs, Trainium2"
    ),
}


def peak_table() -> dict[str, dict]:
    """The peak table in the JSON form the worker takes (``EvalRequest.peaks``):
    ``{pattern: {"name", "bf16_tflops", "fp32_tflops", "hbm_gbps", "vector_tflops", "source"}}``."""
    return {pattern: asdict(peak) for pattern, peak in PEAKS.items()}


def match_peak(device_name: str) -> Peak | None:
    """The peaks of a device from its runtime name (``NVIDIA H100 80GB HBM3`` -> H100 SXM5),
    or None for an unknown device (then no % of peak is reported)."""
    entry = match_peak_entry(device_name, peak_table())
    return Peak(**entry) if entry is not None else None


def pct_of_peak(
    latency_ms: float,
    flops: float | None,
    bytes_: float | None,
    device_name: str,
    low_precision: bool = False,
) -> tuple[float | None, str | None]:
    """% of the roofline peak and which roof bounds it.

    ``t_roof = max(flops / peak_flops, bytes / peak_bw)``; ``pct = t_roof / latency * 100``.
    Peak FLOP/s is the BF16/FP16 tensor figure when ``low_precision`` else FP32.

    Args:
        latency_ms: measured median latency (ms).
        flops: FLOP per call, or None. bytes_: HBM bytes per call, or None.
        device_name: runtime device name, matched against :data:`PEAKS`.
        low_precision: any floating input is fp16/bf16.

    Returns:
        ``(pct, bound)`` with bound ``"memory"`` or ``"compute"``; ``(None, None)`` for an
        unknown device, no work figures, or a non-positive latency.
    """
    peak = match_peak_entry(device_name, peak_table())
    if peak is None or not latency_ms or latency_ms <= 0:
        return None, None
    roof = roofline(flops, bytes_, peak, latency_ms=latency_ms, low_precision=low_precision)
    if roof.get("pct_of_peak") is None:
        return None, None
    return roof["pct_of_peak"], roof["bound"]
