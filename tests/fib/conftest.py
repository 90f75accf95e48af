"""Shared helpers of the FlashInfer-Bench tests (issue 35): a fresh copy of the small dataset
in ``tests/fib/dataset`` (written for these tests in FIB's layout: an rmsnorm with a
destination-passing-style solution and a scalar input, a gemm whose solution returns its
output, a softmax with a safetensors workload), and edits of its JSON files.

The tests need the ``flashinfer-bench`` package (the extra ``accelopt[fib]``, installed by
``.ci/run``); without it they are skipped with the reason."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flashinfer_bench.data", reason="the flashinfer-bench package (extra fib)")

DATASET = Path(__file__).resolve().parent / "dataset"
#: The checkout these tests belong to: the CLI subprocesses import it first.
CHECKOUT = Path(__file__).resolve().parents[2]
RMSNORM = "solutions/rmsnorm/rmsnorm_h64/rmsnorm_triton.json"
GEMM = "solutions/gemm/gemm_n64_k64/gemm_triton.json"
SOFTMAX = "solutions/softmax/softmax_rows/softmax_triton.json"
RMSNORM_DEF = "definitions/rmsnorm/rmsnorm_h64.json"
RMSNORM_WORKLOADS = "workloads/rmsnorm/rmsnorm_h64.jsonl"


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A fresh copy of the test dataset (a test may edit it or let --write add to it)."""
    root = tmp_path / "fib-dataset"
    shutil.copytree(DATASET, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def edit_json(path: Path, change) -> None:
    """Rewrite the JSON file ``path`` as ``change(data)`` leaves it (indented as FIB writes)."""
    data = json.loads(path.read_text("utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n", "utf-8")


def edit_jsonl(path: Path, change) -> None:
    """Rewrite each line of the JSONL file ``path`` as ``change(index, row)`` leaves it."""
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    for index, row in enumerate(rows):
        change(index, row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")


def run_cli(*args: str | Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m accelopt_cli.main ARGS`` of this checkout in ``cwd`` with a memory dir and
    no user config there; the finished process (text output)."""
    env = {
        "COLUMNS": "500",
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(CHECKOUT),
        "ACCELOPT_MEMORY_DIR": str(cwd / "memory"),
        "ACCELOPT_CONFIG": str(cwd / "no-user-config.toml"),
    }
    return subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
    )  # fmt: skip
