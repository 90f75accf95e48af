"""``accelopt bench``'s choices without a search: which definitions run, which solution is the
best Triton one (FIB's ``get_best_trace`` over the traces, else the first by name), the rows of
a definition without a Triton solution, and a dataset root that is none."""

from __future__ import annotations

import json
from pathlib import Path

from accelopt_core.kernelfile.fib_data import best_solution, list_definitions, triton_solutions
from tests.fib.conftest import GEMM, edit_json, run_cli


def _trace(solution: str, speedup: float) -> dict:
    return {
        "definition": "gemm_n64_k64",
        "workload": {"axes": {"M": 16}, "inputs": {}, "uuid": "w16"},
        "solution": solution,
        "evaluation": {
            "status": "PASSED",
            "environment": {"hardware": "NVIDIA_H100"},
            "timestamp": "2026-01-01T00:00:00",
            "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
            "performance": {"latency_ms": 1.0, "reference_latency_ms": speedup,
                            "speedup_factor": speedup},
        },
    }  # fmt: skip


def test_the_best_triton_solution_by_fib_traces(dataset: Path) -> None:
    source = json.loads((dataset / GEMM).read_text())
    for name in ("gemm_a", "gemm_z"):
        (dataset / GEMM).with_name(f"{name}.json").write_text(json.dumps({**source, "name": name}))
    python = {**source, "name": "gemm_python"}
    python["spec"] = {**source["spec"], "language": "python"}
    (dataset / GEMM).with_name("gemm_python.json").write_text(json.dumps(python))
    solutions, broken = triton_solutions(dataset)
    names = [n for n, _ in solutions["gemm_n64_k64"]]
    assert names == ["gemm_a", "gemm_triton", "gemm_z"] and broken == {}
    assert best_solution(dataset, "gemm_n64_k64", solutions["gemm_n64_k64"])[0] == "gemm_a"
    traces = dataset / "traces" / "gemm" / "gemm_n64_k64.jsonl"
    traces.parent.mkdir(parents=True)
    rows = [_trace("gemm_triton", 1.5), _trace("gemm_z", 2.5), _trace("gemm_python", 9.0)]
    traces.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    assert best_solution(dataset, "gemm_n64_k64", solutions["gemm_n64_k64"])[0] == "gemm_z"


def test_a_broken_solution_is_named_for_its_definition(dataset: Path) -> None:
    edit_json(dataset / GEMM, lambda d: d["spec"].update(entry_point="nowhere"))
    solutions, broken = triton_solutions(dataset)
    assert "gemm_n64_k64" not in solutions
    assert broken["gemm_n64_k64"].startswith(f"{dataset / GEMM}:")
    assert "field spec.entry_point" in broken["gemm_n64_k64"]
    assert [d[0] for d in list_definitions(dataset)] == [
        "gemm_n64_k64",
        "rmsnorm_h64",
        "softmax_rows",
    ]


def _bench(*args: str, cwd: Path):
    return run_cli("bench", *args, cwd=cwd)


def test_rows_without_a_search_and_bad_roots(dataset: Path, tmp_path: Path) -> None:
    edit_json(dataset / GEMM, lambda d: d["spec"].update(entry_point="nowhere"))
    proc = _bench(str(dataset), "--definition", "gemm_n64_k64", "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    (row,) = json.loads(proc.stdout)["rows"]
    assert row["definition"] == "gemm_n64_k64" and row["verdict"].startswith("error: ")
    assert "field spec.entry_point" in row["verdict"]
    proc = _bench(str(dataset), "--definition", "nope", cwd=tmp_path)
    assert proc.returncode == 1 and "no definition named nope" in proc.stderr
    proc = _bench(str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1 and "not a FlashInfer Trace dataset" in proc.stderr
    assert "Traceback" not in proc.stderr
