"""Tests of accelopt_cli.render: the live progress line follows the search's events, and the
profile and target reports print what a user reads (results on stdout, problems on stderr)."""

from __future__ import annotations

import io

from rich.console import Console

from accelopt_cli import render, render_target
from accelopt_core import search as s
from accelopt_core.onsite.protocol import EvalResult


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200), buf


def _ok(latency_ms: float) -> EvalResult:
    return EvalResult(
        status="ok", latency_ms=latency_ms, p20_ms=latency_ms * 0.9, p80_ms=latency_ms * 1.1,
        timing="cuda", gbps=812.5, tflops=0.25, device="NVIDIA H100 80GB HBM3",
    )  # fmt: skip


def test_progress_follows_the_search_events() -> None:
    baseline = s.Candidate.baseline("src = 1\n", _ok(2.0))
    fast = s.Candidate("c1", "src = 2\n", baseline.id, "bigger blocks", "", _ok(1.0), 1)
    wrong = s.Candidate("c2", "src = 3\n", baseline.id, "unroll", "", EvalResult("incorrect"), 1)
    progress = render.SearchProgress("softmax_kernel", 3)
    for event in (
        s.SearchStarted(baseline, 3),
        s.IterationStarted(1, 3),
        s.CandidateEvaluated(fast),
        s.CandidateEvaluated(wrong),
        s.CandidateFailed(s.FailedCandidate.of_candidate(wrong)),
        s.NewBest(fast, 2.0),
    ):
        progress.on_event(event)
    out, buf = _console()
    out.print(progress)
    text = buf.getvalue()
    assert "softmax_kernel" in text and "iteration 1/3" in text
    assert "evaluated 2 (1 correct, 1 failed)" in text and "best 2.00x (bigger blocks)" in text
    assert "baseline 2 ms · correct" in text


def test_profile_report_lines() -> None:
    (out, out_buf), (err, err_buf) = _console(), _console()
    result = _ok(0.5)
    result.warnings = ["retimed once"]
    render.print_profile(out, err, result, "k.py")
    lines = out_buf.getvalue().splitlines()
    assert lines[0] == "k.py: 0.5 ms · correct"
    assert lines[1] == (
        "latency median 0.5 ms (p20 0.45, p80 0.55) · 812.5 GB/s · 0.250 TFLOP/s · "
        "device NVIDIA H100 80GB HBM3 · timing cuda"
    )
    assert err_buf.getvalue().strip() == "warning: retimed once"


def test_target_report_failure_goes_to_stderr() -> None:
    (out, out_buf), (err, err_buf) = _console(), _console()
    report = {"target": "ssh://box", "ok": False, "error": "TargetError: refused"}
    render_target.print_target_report(out, err, report)
    assert out_buf.getvalue().strip() == "target ssh://box"
    assert err_buf.getvalue().strip() == "error: TargetError: refused"


#: Profile metrics of ``examples/nki/tensor_add.py`` on a trn1 NeuronCore as the stand-in
#: ``neuron-profile`` reports them (tests/nki/test_worker_nki.py checks the worker's copy).
NKI_METRICS = {
    "hbm_read_bytes": 2 * 256 * 1024 * 4,
    "hbm_write_bytes": 256 * 1024 * 4,
    "spill_save_bytes": 0,
    "spill_reload_bytes": 0,
    "hardware_flops": 262144,
    "tensor_engine_active_time_percent": 0.0,
    "vector_engine_active_time_percent": 61.5,
    "mm_arithmetic_intensity": 0.0,
}


def test_nki_profile_shows_its_metrics() -> None:
    (out, out_buf), (err, _) = _console(), _console()
    result = _ok(0.02)
    result.timing, result.device, result.metrics = "neuron", "trn1.2xlarge NeuronCore", NKI_METRICS
    result.gbps = 157.3
    render.print_profile(out, err, result, "tensor_add.py")
    lines = out_buf.getvalue().splitlines()
    assert "157.3 GB/s" in lines[1] and lines[1].endswith("timing neuron")
    assert lines[2] == (
        "memory: HBM 2.0 MiB read, 1.0 MiB written · spills 0 B saved, 0 B reloaded"
    )
    assert lines[3] == (
        "compute: 0.262 MFLOP · matmul arithmetic intensity 0 FLOP/B · "
        "engines active: tensor 0% · vector 62%"
    )
    assert len(lines) == 4  # a Trainium timing: no host-timing note


def test_simulated_profile_is_labelled_like_the_interpreter() -> None:
    (out, out_buf), (err, _) = _console(), _console()
    result = EvalResult(status="ok", timing="simulated", device="cpu (NKI simulator, trn1)")
    render.print_profile(out, err, result, "tensor_add.py")
    text = out_buf.getvalue()
    assert text.splitlines()[0] == "tensor_add.py: untimed · correct · simulated"
    assert "timing simulated" in text and "GB/s" not in text
    assert "NKI simulator on CPU" in text and "nothing about Trainium speed" in text
    interp = _ok(3.0)
    interp.timing = "interpreter"
    (out, out_buf), _ = _console(), _console()
    render.print_profile(out, err, interp, "k.py")
    assert "GB/s" not in out_buf.getvalue() and "Triton interpreter on CPU" in out_buf.getvalue()
