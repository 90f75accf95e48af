"""FlashInfer-Bench end to end on CPU (issue 35), through the ``accelopt`` CLI in a
subprocess with the offline proposer (no LLM): ``optimize SOLUTION.json --write`` on the
rmsnorm (destination-passing style, a scalar input) adds a solution and traces that FIB's own
loader reads, leaving the user's untouched; ``profile`` on the gemm (its solution returns its
output); ``bench ROOT`` on the softmax (a safetensors workload) prints its row, writes the CSV,
and a second run resumes (skips it). Kernels run under the Triton interpreter: slow."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from flashinfer_bench.data import TraceSet

from tests.byok.conftest import CLI, make_cli
from tests.fib.conftest import CHECKOUT, GEMM, RMSNORM

pytestmark = pytest.mark.slow

TINY = ("--offline", "-T", "1", "-B", "1", "-N", "1")


@pytest.fixture
def cli(tmp_path: Path) -> CLI:
    """The CLI of this checkout (its root first on PYTHONPATH), run outside the dataset."""
    made = make_cli(tmp_path / "cli")
    made.env["PYTHONPATH"] = str(CHECKOUT)
    return made


@pytest.fixture
def settings(tmp_path: Path) -> str:
    """A settings file with 2 correctness seeds (5 by default): tiny searches."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"accelopt.evaluation.seeds": 2}), "utf-8")
    return str(path)


def test_optimize_write_adds_a_solution_and_traces(cli: CLI, dataset: Path, settings: str) -> None:
    original = (dataset / RMSNORM).read_bytes()
    rc, report, err = cli.json(
        "optimize", dataset / RMSNORM, *TINY, "-K", "2", "--write", "--settings", settings
    )
    assert rc == 0, err
    assert report["fib"]["definition"] == "rmsnorm_h64"
    assert report["baseline"]["result"]["status"] == "ok"
    assert report["baseline"]["result"]["timing"] == "interpreter"
    rows = report["baseline"]["result"]["metrics"]["shapes"]
    assert [r["shape"]["workload"] for r in rows] == report["fib"]["workloads"]
    assert [r["timed"] for r in rows] == [True, True, True, False]
    assert report["candidates"], "a larger BLOCK is faster under the interpreter"
    best = report["candidates"][0]
    assert (dataset / RMSNORM).read_bytes() == original
    trace_set = TraceSet.from_path(str(dataset))
    new = trace_set.get_solution("rmsnorm_triton_accelopt")
    assert new is not None and new.author == "accelopt"
    assert new.description.startswith(
        f"AccelOpt: {best['speedup']:.2f}x faster than rmsnorm_triton"
    )
    solutions = {t.solution for t in trace_set.traces["rmsnorm_h64"]}
    assert solutions == {"rmsnorm_triton", "rmsnorm_triton_accelopt"}
    assert "as the solution rmsnorm_triton_accelopt" in err


def test_profile_a_solution_that_returns_its_output(cli: CLI, dataset: Path, settings: str) -> None:
    rc, result, err = cli.json("profile", dataset / GEMM, "--settings", settings)
    assert rc == 0, err
    assert result["status"] == "ok", result["message"]
    assert result["fib"]["definition"] == "gemm_n64_k64" and result["max_abs_error"] < 1e-2
    assert len(result["metrics"]["shapes"]) == 4  # its four workloads: 3 timed, 1 held out


def test_bench_table_csv_and_resume(cli: CLI, dataset: Path, tmp_path: Path, settings: str) -> None:
    table = tmp_path / "rows.csv"
    args = ("bench", dataset, "--op-type", "softmax", *TINY, "-K", "1",
            "--settings", settings, "--csv", table)  # fmt: skip
    rc, report, err = cli.json(*args)
    assert rc == 0, err
    (row,) = report["rows"]
    assert row["definition"] == "softmax_rows" and row["solution"] == "softmax_triton"
    assert row["baseline_ms"] > 0 and row["timing"] == "interpreter", row
    assert not row["verdict"].startswith("error") and row["resumed"] is False
    assert row["speedup"] >= 1.0 and row["pct_of_peak"] is None  # no peak on a CPU
    assert "[1/1] softmax_rows: optimizing softmax_triton" in err
    with open(table, encoding="utf-8") as handle:
        assert [r["definition"] for r in csv.DictReader(handle)] == ["softmax_rows"]
    rc, again, err = cli.json(*args)
    assert rc == 0, err
    assert again["rows"][0]["resumed"] is True and "finished earlier, skipped" in err
    assert again["rows"][0]["baseline_ms"] == row["baseline_ms"]
    proc = cli.run("bench", dataset, "--definition", "softmax_rows", *TINY, "-K", "1",
                   "--settings", settings)  # fmt: skip
    assert proc.returncode == 0 and "(earlier)" in proc.stdout and "speedup" in proc.stdout
