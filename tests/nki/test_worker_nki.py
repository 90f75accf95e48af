"""The worker's NKI path with the NKI test double: simulated correctness, classified bad
kernels with their lines, the Trainium timing path with the stand-in profiler, and the legacy
namespace's detection."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.nki.conftest import device_env, double_env, run_nki


def _line(source: str, needle: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if needle in ln)


def test_simulated_candidate_is_correct_and_labelled(example) -> None:
    src = example("tensor_add")
    result = run_nki(src, src, "tensor_add", double_env())
    assert result.ok, result.message
    assert result.timing == "simulated" and result.latency_ms > 0
    assert result.pct_of_peak is None  # CPU time says nothing about Trainium
    assert result.versions["nki"] == "0.3.0+double" and result.versions["nki_api"] == "nki"
    assert result.summary().endswith("correct · simulated")


def test_without_sdk_is_a_runtime_error(example) -> None:
    src = example("tensor_add")
    result = run_nki(src, src, "tensor_add", {k: v for k, v in double_env().items()
                                             if k != "PYTHONPATH"})  # fmt: skip
    assert result.status == "runtime_error" and "no NKI SDK" in result.message


@pytest.mark.parametrize(
    ("edit", "needle", "status", "words"),
    [
        # reads half-written SBUF: the other half is the NaN fill of new buffers
        ("nisa.dma_copy(dst=a, src=a_input[r, c])",
         "def tensor_add_kernel", "incorrect", "NaN-filled"),
        ("a = nl.ndarray((nl.tile_size.pmax, TILE_F)",
         "a = nl.ndarray((2 * nl.tile_size.pmax", "runtime_error", "exceeds the 128 partitions"),
        ("    return out\n", "def tensor_add_kernel", "incorrect", "shape (256, 512) differs"),
    ],
    ids=["uninitialised-read", "partitions", "wrong-shape"],
)  # fmt: skip
def test_bad_kernels_are_classified_with_their_line(example, edit, needle, status, words) -> None:
    base = example("tensor_add")
    bad = {
        "nisa.dma_copy(dst=a, src=a_input[r, c])": base.replace(
            "nisa.dma_copy(dst=a, src=a_input[r, c])",
            "nisa.dma_copy(dst=a[0:64], src=a_input[r, c][0:64])",
        ),
        "a = nl.ndarray((nl.tile_size.pmax, TILE_F)": base.replace(
            "a = nl.ndarray((nl.tile_size.pmax, TILE_F)", "a = nl.ndarray((2 * nl.tile_size.pmax, TILE_F)"
        ),
        "    return out\n": base.replace("    return out\n", "    return out[0:256, 0:512]\n"),
    }[edit]  # fmt: skip
    result = run_nki(bad, base, "tensor_add", double_env())
    assert result.status == status, result.message
    assert words in result.message
    assert result.line == _line(bad, needle)


def test_trainium_timing_repeats_a_noisy_round_and_reports_peak(example, tmp_path) -> None:
    src = example("tensor_add")
    # round 1: 10..12 us (spread 20% > 1%): repeated; round 2: 10.00..10.05 us (0.5%): kept
    times = ",".join(["10e-6", "12e-6", "10e-6", "11e-6", "10e-6"]
                     + ["10.00e-6", "10.02e-6", "10.05e-6", "10.01e-6", "10.03e-6"])  # fmt: skip
    result = run_nki(src, src, "tensor_add", device_env(tmp_path, times))
    assert result.ok, result.message
    assert result.timing == "neuron" and result.device == "trn1 NeuronCore"
    assert result.metrics["rounds"] == 2 and result.metrics["spread_pct"] == pytest.approx(0.5)
    assert result.latency_ms == pytest.approx(0.01002)
    assert result.p20_ms == pytest.approx(0.010008) and result.p80_ms == pytest.approx(0.010034)
    # 3 MiB over 410 GiB/s = 7.14 us of roofline time in 10.02 us
    assert result.bound == "memory" and result.pct_of_peak == pytest.approx(71.3, abs=0.2)
    assert result.metrics["neuron_core"] == "0"
    m = result.metrics
    assert m["hbm_read_bytes"] == 2 * 256 * 1024 * 4 and m["hbm_write_bytes"] == 256 * 1024 * 4
    assert m["vector_engine_active_time_percent"] > 0 and "arithmetic_intensity" in m


def test_trainium_implausible_timing_is_rejected(example, tmp_path) -> None:
    src = example("tensor_add")
    result = run_nki(src, src, "tensor_add", device_env(tmp_path, "1e-6"))
    assert result.status == "rejected" and "implausible" in result.message


LEGACY_DETECT = """
import json
from accelopt_core.onsite.runtime import stacks as nki_sdk
print(json.dumps([nki_sdk.detect_api(), nki_sdk.versions_entry()]))
"""


def test_legacy_namespace_is_detected_where_it_is_all_there_is(tmp_path) -> None:
    pkg = tmp_path / "neuronxcc" / "nki"
    pkg.mkdir(parents=True)
    (tmp_path / "neuronxcc" / "__init__.py").write_text("__version__ = '2.21.18209.0'\n")
    (pkg / "__init__.py").write_text("def simulate_kernel(kernel, *args): ...\n")
    env = {k: v for k, v in double_env(PYTHONPATH=str(tmp_path)).items()}
    out = subprocess.run(
        [sys.executable, "-c", LEGACY_DETECT], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert out.strip() == (
        '[{"api": "neuronxcc.nki", "version": "2.21.18209.0"}, '
        '{"neuronxcc": "2.21.18209.0", "nki_api": "neuronxcc.nki"}]'
    )
    both = double_env(PYTHONPATH=f"{tmp_path}:{double_env()['PYTHONPATH']}")
    out = subprocess.run(
        [sys.executable, "-c", LEGACY_DETECT], capture_output=True, text=True, env=both, check=True
    ).stdout
    assert '"api": "nki"' in out  # the current package wins where both are there
