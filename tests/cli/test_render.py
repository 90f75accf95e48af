"""Tests of accelopt_cli.render: the live progress line follows the search's events, and the
profile and target reports print what a user reads (results on stdout, problems on stderr)."""

from __future__ import annotations

import io

from rich.console import Console

from accelopt_cli import render
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
        s.NewBest(fast, 2.0),
    ):
        progress.on_event(event)
    out, buf = _console()
    out.print(progress)
    text = buf.getvalue()
    assert "softmax_kernel" in text and "iteration 1/3" in text
    assert "evaluated 2 (1 correct)" in text and "best 2.00x (bigger blocks)" in text
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
    render.print_target_report(out, err, report)
    assert out_buf.getvalue().strip() == "target ssh://box"
    assert err_buf.getvalue().strip() == "error: TargetError: refused"
