"""Writing back into a FlashInfer-Bench dataset (accelopt_core.kernelfile.fib_write): a new
solution ``<name>_accelopt`` beside the user's (never overwritten), FIB ``Trace`` records of
the baseline and the best per timed workload, all accepted by FIB's own loader. The report is
built from real search records (``SearchReport``, ``Candidate``, ``EvalResult``) holding the
per-workload rows an evaluation reports; the search itself runs in test_fib_e2e.py."""

from __future__ import annotations

from pathlib import Path

from flashinfer_bench.data import TraceSet

from accelopt_core.kernelfile.fib_write import new_solution_name, write_results
from accelopt_core.kernelfile.workload import load_workload
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search.candidate import Candidate
from accelopt_core.search.report import SearchReport
from tests.fib.conftest import RMSNORM
from tests.fib.test_dataset import DATASET


def _result(kf, latencies: list[float]) -> EvalResult:
    uuids = kf.context.fib.workloads
    rows = [
        {"shape": {"workload": u}, "timed": True, "latency_ms": ms}
        for u, ms in zip(uuids[:-1], latencies, strict=True)
    ] + [{"shape": {"workload": uuids[-1]}, "timed": False}]
    return EvalResult(
        "ok", latency_ms=sum(latencies) / len(latencies), timing="interpreter", device="cpu",
        max_abs_error=1e-6, max_rel_error=2e-6, versions={"torch": "2.13.0", "triton": "3.9.0"},
        metrics={"shapes": rows},
    )  # fmt: skip


def _report(kf) -> SearchReport:
    baseline = Candidate.baseline(kf.source, _result(kf, [3.0, 6.0, 9.0]))
    faster = kf.source.replace("BLOCK=16", "BLOCK=64")
    best = Candidate(
        id="c1", source=faster, parent_id=baseline.id, plan_title="BLOCK 16 -> 64",
        plan_text="Raise BLOCK.", result=_result(kf, [1.0, 2.0, 3.0]), iteration=1,
        speedup=3.0, rank=1, retimed=True, confirmed=True,
    )  # fmt: skip
    return SearchReport(
        path=kf.path, kernel_name="rmsnorm_kernel", entry="run", baseline=baseline,
        candidates=[best], original_source=kf.source, target="local", timing="interpreter",
        proposer="offline",
    )  # fmt: skip


def test_a_new_solution_and_traces_that_fib_loads(dataset: Path) -> None:
    original = (dataset / RMSNORM).read_bytes()
    kf = load_workload(dataset / RMSNORM)
    report = _report(kf)
    target, count = write_results(kf.context.fib, report)
    assert (dataset / RMSNORM).read_bytes() == original  # the user's solution untouched
    assert target == (dataset / RMSNORM).with_name("rmsnorm_triton_accelopt.json")
    assert count == 6  # 3 timed workloads x (baseline, best); the held-out one has no timing
    trace_set = TraceSet.from_path(str(dataset))
    new = trace_set.get_solution("rmsnorm_triton_accelopt")
    assert new.author == "accelopt" and new.definition == "rmsnorm_h64"
    assert new.spec.destination_passing_style is True
    assert "BLOCK=64" in new.get_entry_source().content
    assert new.description.startswith("AccelOpt: 3.00x faster than rmsnorm_triton")
    assert "interpreter on cpu" in new.description and "Plan: BLOCK 16 -> 64" in new.description
    traces = trace_set.traces["rmsnorm_h64"]
    by_solution = {}
    for trace in traces:
        assert trace.is_successful()
        by_solution.setdefault(trace.solution, []).append(trace.evaluation.performance.latency_ms)
    assert by_solution == {
        "rmsnorm_triton": [3.0, 6.0, 9.0],
        "rmsnorm_triton_accelopt": [1.0, 2.0, 3.0],
    }
    assert {t.workload.uuid for t in traces} == set(kf.context.fib.workloads[:-1])
    assert "Triton interpreter" in traces[0].evaluation.environment.hardware
    assert (dataset / "traces/rmsnorm/rmsnorm_h64.jsonl").is_file()


def test_a_second_write_takes_the_next_name(dataset: Path) -> None:
    kf = load_workload(dataset / RMSNORM)
    first, _ = write_results(kf.context.fib, _report(kf))
    second, _ = write_results(kf.context.fib, _report(kf))
    assert (first.stem, second.stem) == ("rmsnorm_triton_accelopt", "rmsnorm_triton_accelopt_2")
    assert len(TraceSet.from_path(str(dataset)).traces["rmsnorm_h64"]) == 12
    assert (
        new_solution_name(kf.context.fib, {"rmsnorm_triton_accelopt"})
        == "rmsnorm_triton_accelopt_2"
    )
    assert DATASET != dataset  # the committed dataset is never written
