"""The view of a running search, kept from its events (issue 32): what the server sends a
webview, whole once and then only what changed."""

from __future__ import annotations

import dataclasses

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.report import LiveView, build_view
from accelopt_core.search import (
    Candidate,
    CandidateEvaluated,
    CandidateFailed,
    FailedCandidate,
    IterationStarted,
    SearchStarted,
)
from tests.report.synthetic import SOFTMAX, _ok, _source


def started() -> tuple[LiveView, Candidate]:
    base = Candidate.baseline(SOFTMAX, _ok(1.0, 1.0))
    live = LiveView("/src/softmax.py", "softmax_kernel", "local")
    assert live.apply(CandidateEvaluated(base)) and live.apply(SearchStarted(base, 3))
    live.apply(IterationStarted(1, 3))
    return live, base


def child(base: Candidate, i: int, result: EvalResult) -> Candidate:
    return Candidate(
        f"c{i}", _source(i), base.id, f"plan {i}", "", result, 1, speedup=1.0 / result.latency_ms
        if result.ok else None,
    )  # fmt: skip


def test_a_running_search_is_drawn_and_then_only_its_changes_are_sent() -> None:
    live, base = started()
    fast = child(base, 1, _ok(0.5, 1.0))
    live.apply(CandidateEvaluated(fast))
    view = live.view()
    assert view["state"] == "running" and view["meta"]["iterations"] == 3
    assert [n["verdict"] for n in view["nodes"]] == ["baseline", "pending"]
    assert view["nodes"][1]["diff"].startswith("--- a/softmax.py")
    assert live.delta()["nodes"] == []  # nothing changed

    fast.retimed = fast.confirmed = True  # the re-timing confirmed the step
    broken = child(base, 2, EvalResult.failure("compile_error", "bad tile", 40))
    live.apply(CandidateEvaluated(broken))
    live.apply(CandidateFailed(FailedCandidate.of_candidate(broken)))
    live.apply(CandidateFailed(FailedCandidate("no code", "parse", "no block", parent_id=base.id)))
    delta = live.delta()
    changed = {n["id"]: n for n in delta["nodes"]}
    assert set(changed) == {"c1", "c2", "failed-1"}
    assert changed["c1"]["verdict"] == "ranked" and delta["best"][-1]["speedup"] == 2.0
    assert changed["c2"]["stage"] == "compile" and changed["c2"]["excerpt"]
    assert delta["meta"]["failures"] == {"compile": 1, "parse": 1}

    fast.result = dataclasses.replace(fast.result, latency_ms=0.6)  # re-timed slower
    assert [n["id"] for n in live.delta()["nodes"]] == ["c1"]


def test_the_finished_search_is_the_reports_view() -> None:
    live, base = started()
    live.apply(CandidateEvaluated(child(base, 1, _ok(0.5, 1.0))))
    live.view()
    report = {"baseline": base.to_dict(), "path": "/src/softmax.py", "stopped_reason": "completed"}
    live.finish(report)
    assert live.view() == build_view(report, iterations=3)  # T of the events
    assert live.delta()["nodes"] == []


def test_a_search_that_ended_without_a_report_says_how() -> None:
    live, _ = started()
    live.end("failed")
    assert live.view()["state"] == "failed"
