"""Hardware peak table and the roofline (% of peak), as in NKIBench (AccelOpt, arXiv 2511.15915).

One table and one roofline for the host and the target: the host sends :func:`peak_table` with
every request (``EvalRequest.peaks``), the target matches its device against it and checks the
timing's plausibility (:func:`plausibility`).

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
- AWS Trainium2 datasheet (Trn2 product page and Neuron docs, Trainium2 architecture): 667 TFLOP/s
  dense BF16 and 2.9 TB/s HBM per chip of 8 NeuronCore-v3, so 83.4 TFLOP/s and 362.5 GB/s per
  core (the earlier 79 TFLOP/s had no source). No FP32 figure is used: the compute roof is left
  out for FP32 kernels. On Trainium2 the logical-core setting (LNC) is recorded with every result.

Units: TFLOP/s = 1e12 FLOP/s, GB/s = 1e9 B/s. The roofline model: Williams, Waterman,
Patterson, CACM 52(4), 2009.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from ..runtime.failures import short
from .compare import dtype_name, is_array, is_tensor

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
        "Trainium2 NeuronCore-v3",
        667.0 / 8,
        None,
        2900.0 / 8,
        source="AWS Trainium2 datasheet: 667 TFLOP/s BF16, 2.9 TB/s per chip of 8 cores",
    ),
}


def peak_table() -> dict[str, dict]:
    """The peak table in the JSON form the worker takes (``EvalRequest.peaks``):
    ``{pattern: {"name", "bf16_tflops", "fp32_tflops", "hbm_gbps", "vector_tflops", "source"}}``."""
    return {pattern: asdict(peak) for pattern, peak in PEAKS.items()}


def match_peak_entry(device_name: str, peaks: dict) -> dict | None:
    """First entry of ``peaks`` (regex pattern -> peak dict) whose pattern matches the device
    name (case-insensitive ``re.search``), else None. A pattern that is no regex is skipped."""
    for pattern, entry in (peaks or {}).items():
        try:
            if re.search(pattern, device_name or "", re.I):
                return entry
        except re.error:
            continue
    return None


def match_peak(device_name: str) -> Peak | None:
    """The peaks of a device from its runtime name (``NVIDIA H100 80GB HBM3`` -> H100 SXM5),
    or None for an unknown device (then no % of peak is reported)."""
    entry = match_peak_entry(device_name, peak_table())
    return Peak(**entry) if entry is not None else None


def roofline(
    flops: float | None,
    bytes_: float | None,
    peak: dict,
    *,
    latency_ms: float | None = None,
    low_precision: bool = False,
) -> dict:
    """Roofline time of a kernel and, given its latency, its % of peak.

    Args:
        flops: floating-point operations of one call (FLOP), or None.
        bytes_: bytes moved to/from HBM by one call (B), or None.
        peak: ``{"bf16_tflops", "fp32_tflops", "hbm_gbps"}`` (TFLOP/s = 1e12 FLOP/s,
            GB/s = 1e9 B/s); a missing or None figure drops that roof.
        latency_ms: measured median latency (ms).
        low_precision: use the BF16/FP16 dense tensor peak instead of the FP32 peak.

    Returns:
        dict with ``compute_ms = flops / peak_flops``, ``memory_ms = bytes / peak_bw``,
        ``t_roof_ms = max(compute_ms, memory_ms)``, ``bound`` ("compute" when compute_ms >
        memory_ms, else "memory"), ``peak_tflops``, ``peak_gbps``; with a latency also
        ``pct_of_peak = t_roof_ms / latency_ms * 100`` (None when t_roof_ms is 0),
        ``gbps = bytes / latency / 1e9`` and ``tflops = flops / latency / 1e12``.
        The roofline model: Williams, Waterman, Patterson, CACM 52(4), 2009.
    """
    peak_tflops = peak.get("bf16_tflops" if low_precision else "fp32_tflops")
    peak_gbps = peak.get("hbm_gbps")
    compute_ms = flops / (peak_tflops * 1e12) * 1e3 if flops and peak_tflops else 0.0
    memory_ms = bytes_ / (peak_gbps * 1e9) * 1e3 if bytes_ and peak_gbps else 0.0
    t_roof = max(compute_ms, memory_ms)
    out = {
        "compute_ms": compute_ms,
        "memory_ms": memory_ms,
        "t_roof_ms": t_roof,
        "bound": "compute" if compute_ms > memory_ms else "memory",
        "peak_tflops": peak_tflops,
        "peak_gbps": peak_gbps,
    }
    if latency_ms:
        out["pct_of_peak"] = t_roof / latency_ms * 100.0 if t_roof > 0 else None
        out["gbps"] = bytes_ / (latency_ms * 1e-3) / 1e9 if bytes_ else None
        out["tflops"] = flops / (latency_ms * 1e-3) / 1e12 if flops else None
    return out


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


def work_of(bench: dict, inputs: tuple, result: dict) -> dict[str, float]:
    """``{"flops", "bytes"}`` of one call from ``BENCH``'s functions (those it has); a function
    that raises becomes a warning in ``result``."""
    work = {}
    for key in ("flops", "bytes"):
        fn = bench.get(key)
        if fn is None:
            continue
        try:
            work[key] = float(fn(*inputs))
        except BaseException as exc:  # noqa: BLE001
            result.setdefault("warnings", []).append(f"BENCH['{key}'] failed: {short(exc)}")
    return work


def _low_precision(inputs: tuple) -> bool:
    """True when any input tensor / array is float16 or bfloat16."""
    return any(
        (is_tensor(t) or is_array(t)) and dtype_name(t) in ("float16", "bfloat16") for t in inputs
    )


def plausibility(
    result: dict,
    bench: dict,
    inputs: tuple,
    peaks: dict,
    timing: str,
    work: dict[str, float] | None = None,
) -> None:
    """Fill in a timed result's ``gbps`` / ``tflops`` from BENCH's bytes/flops and, for GPU or
    Neuron timing on a device in ``peaks``, its ``pct_of_peak`` and ``bound``. Over 100% of
    peak sets status ``rejected`` ("implausible"): the timing or the harness's figures are
    wrong (DESIGN.md, rule 5). ``result`` needs ``latency_ms`` (ms) and ``device``. ``work``:
    the ``{"flops", "bytes"}`` of one call when already known (the judge gets them from the
    reference process, :mod:`.judge.referee`), else computed from ``bench`` on ``inputs``."""
    work = work_of(bench, inputs, result) if work is None else work
    if not work:
        return
    latency = result["latency_ms"]
    roof = roofline(work.get("flops"), work.get("bytes"), {}, latency_ms=latency)
    result["gbps"], result["tflops"] = roof["gbps"], roof["tflops"]
    if timing not in ("cuda", "neuron"):
        return
    peak = match_peak_entry(result.get("device") or "", peaks)
    if peak is None:
        return
    roof = roofline(
        work.get("flops"),
        work.get("bytes"),
        peak,
        latency_ms=latency,
        low_precision=_low_precision(inputs),
    )
    pct = roof.get("pct_of_peak")
    if pct is None:
        return
    result["pct_of_peak"] = pct
    result["bound"] = roof["bound"]
    if pct > 100.0:
        result["status"] = "rejected"
        result["message"] = (
            f"implausible: {pct:.0f}% of peak ({roof['bound']} roof on {result.get('device')}); "
            "the timing or the harness's flops/bytes are wrong"
        )
