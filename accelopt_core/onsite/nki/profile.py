"""Timing an NKI kernel on a NeuronCore through its compiled NEFF and ``neuron-profile``, and the
profile metrics the planner gets.

Current SDKs have no timing call in the ``nki`` package: the Neuron runtime dumps the NEFFs it
executes (``NEURON_RT_INSPECT_ENABLE=1``, ``NEURON_RT_INSPECT_OUTPUT_DIR``); each repetition is
``neuron-profile capture -n NEFF -s NTFF --profile-nth-exec=W+1`` (W warm-up executions) and
``neuron-profile view -n NEFF -s NTFF --output-format summary-json``, whose ``total_time``
(seconds) is one latency sample. A round of repetitions whose spread (max - min) / min is over 1%
is repeated (as AccelOpt does), up to :data:`MAX_ROUNDS` rounds; the quietest round is kept.

Standard library only; ``runner`` (``subprocess.run``'s signature) is a seam for tests.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

WARMUP = 2
REPETITIONS = 5
MAX_ROUNDS = 3
NOISE = 0.01  # (max - min) / min above which a round is repeated
_DEFAULT_PROFILER = "/opt/aws/neuron/bin/neuron-profile"

#: Summary fields kept as profile metrics (bytes, FLOPs, % of the kernel's time).
METRIC_KEYS = (
    "hbm_read_bytes",
    "hbm_write_bytes",
    "sbuf_read_bytes",
    "sbuf_write_bytes",
    "psum_read_bytes",
    "psum_write_bytes",
    "spill_save_bytes",
    "spill_reload_bytes",
    "hardware_flops",
    "tensor_engine_active_time_percent",
    "vector_engine_active_time_percent",
    "scalar_engine_active_time_percent",
    "gpsimd_engine_active_time_percent",
    "mm_arithmetic_intensity",
)


class ProfileError(RuntimeError):
    """The profiler is missing, failed, or printed no usable summary."""


def inspect_env(out_dir: str) -> None:
    """Make the Neuron runtime dump the NEFFs it executes into ``out_dir`` (set before the
    first kernel call)."""
    os.environ["NEURON_RT_INSPECT_ENABLE"] = "1"
    os.environ["NEURON_RT_INSPECT_DEVICE_PROFILE"] = "1"
    os.environ["NEURON_RT_INSPECT_OUTPUT_DIR"] = out_dir


def newest_neff(out_dir: str, kernel: str) -> str:
    """The newest ``*.neff`` under ``out_dir`` whose path names ``kernel`` (else the newest
    one). Raises ProfileError when there is none."""
    found = glob.glob(os.path.join(out_dir, "**", "*.neff"), recursive=True)
    named = [p for p in found if kernel in os.path.relpath(p, out_dir)]
    if not (named or found):
        raise ProfileError(f"the runtime wrote no NEFF for '{kernel}' into {out_dir}")
    return max(named or found, key=os.path.getmtime)


def profiler() -> str:
    """Path of ``neuron-profile`` (PATH, else /opt/aws/neuron/bin). Raises ProfileError."""
    path = shutil.which("neuron-profile") or (
        _DEFAULT_PROFILER if os.path.exists(_DEFAULT_PROFILER) else None
    )
    if path is None:
        raise ProfileError("neuron-profile not found (install aws-neuronx-tools)")
    return path


def parse_summary(text: str) -> dict:
    """The metrics dict of a ``summary-json`` output: ``{"<neff>": {...}}`` or a flat dict;
    text before the first ``{`` (log lines) is skipped. Raises ProfileError."""
    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start >= 0 else None
    except ValueError as exc:
        raise ProfileError(f"neuron-profile printed no JSON summary: {exc}") from None
    if not isinstance(data, dict):
        raise ProfileError("neuron-profile printed no JSON summary")
    if "total_time" not in data:
        data = next((v for v in data.values() if isinstance(v, dict) and "total_time" in v), {})
    if "total_time" not in data:
        raise ProfileError("the profile summary has no total_time")
    return data


def _run(runner, argv: list[str]) -> str:
    done = runner(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise ProfileError(f"{' '.join(argv[:2])} failed: {(done.stderr or '').strip()[-400:]}")
    return done.stdout


def sample(neff: str, index: int, runner=subprocess.run) -> dict:
    """One capture + view of ``neff`` after :data:`WARMUP` executions: the summary dict."""
    tool = profiler()
    ntff = f"{os.path.splitext(neff)[0]}.{index}.ntff"
    _run(runner, [tool, "capture", "-n", neff, "-s", ntff, f"--profile-nth-exec={WARMUP + 1}"])
    out = _run(runner, [tool, "view", "-n", neff, "-s", ntff, "--output-format", "summary-json"])
    return parse_summary(out)


def percentile(sorted_vals: list[float], q: float) -> float:
    """Linear-interpolated ``q`` quantile (0..1) of ascending values."""
    pos = q * (len(sorted_vals) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def spread(times: list[float]) -> float:
    """(max - min) / min of the samples (0 for a single one)."""
    return (max(times) - min(times)) / min(times) if min(times) > 0 else 0.0


def time_neff(neff: str, runner=subprocess.run) -> dict:
    """Latency of ``neff`` in ms: rounds of :data:`REPETITIONS` samples until one has a spread
    of at most 1% (:data:`MAX_ROUNDS` at most; the quietest is kept). Returns ``latency_ms``
    (median), ``p20_ms``, ``p80_ms``, ``spread`` (fraction), ``rounds``, ``samples_ms`` and
    ``summary`` (the last summary dict). Raises ProfileError."""
    best: tuple[float, list[float]] | None = None
    summary: dict = {}
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):
        times = []
        for i in range(REPETITIONS):
            summary = sample(neff, (rounds - 1) * REPETITIONS + i, runner)
            times.append(float(summary["total_time"]) * 1e3)
        if best is None or spread(times) < best[0]:
            best = (spread(times), sorted(times))
        if best[0] <= NOISE:
            break
    noise, times = best  # type: ignore[misc]
    return {
        "latency_ms": percentile(times, 0.5),
        "p20_ms": percentile(times, 0.2),
        "p80_ms": percentile(times, 0.8),
        "spread": noise,
        "rounds": rounds,
        "samples_ms": times,
        "summary": summary,
    }


def metrics(summary: dict) -> dict:
    """The planner's profile metrics from a summary: :data:`METRIC_KEYS` present, plus
    ``arithmetic_intensity`` = hardware FLOPs / HBM bytes (FLOP/B) when both are known."""
    out = {k: summary[k] for k in METRIC_KEYS if isinstance(summary.get(k), (int, float))}
    hbm = out.get("hbm_read_bytes", 0) + out.get("hbm_write_bytes", 0)
    if out.get("hardware_flops") and hbm:
        out["arithmetic_intensity"] = out["hardware_flops"] / hbm
    return out
