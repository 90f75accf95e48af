"""A malformed FlashInfer-Bench dataset gets a located message naming the file, the line and
the field, never a traceback (issue 35): a workload without an axis, a wrong dtype, an entry
point that is not in the sources or not defined there, a reference without ``run``, a solution
outside any dataset, a non-Triton solution, broken JSON."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accelopt_core.kernelfile import KernelFileError
from accelopt_core.kernelfile.workload import load_workload
from tests.fib.conftest import (
    RMSNORM,
    RMSNORM_DEF,
    RMSNORM_WORKLOADS,
    edit_json,
    edit_jsonl,
    run_cli,
)


def _line(path: Path, needle: str) -> int:
    """1-based line of the first line of ``path`` containing ``needle``."""
    lines = path.read_text("utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def _error(dataset: Path) -> str:
    with pytest.raises(KernelFileError) as caught:
        load_workload(dataset / RMSNORM)
    return str(caught.value)


def test_a_workload_without_an_axis(dataset: Path) -> None:
    def drop(index: int, row: dict) -> None:
        if index == 2:
            row["workload"]["axes"] = {}

    edit_jsonl(dataset / RMSNORM_WORKLOADS, drop)
    message = _error(dataset)
    assert message.startswith(f"{dataset / RMSNORM_WORKLOADS}:3:1: field workload.axes: ")
    assert "missing axis 'batch_size'" in message


def test_a_wrong_dtype(dataset: Path) -> None:
    edit_json(dataset / RMSNORM_DEF, lambda d: d["inputs"]["hidden_states"].update(dtype="float33"))
    message = _error(dataset)
    line = _line(dataset / RMSNORM_DEF, '"float33"')
    assert message.startswith(f"{dataset / RMSNORM_DEF}:{line}:1: ")
    assert "field inputs.hidden_states.dtype" in message and "'float33'" in message


def test_an_entry_point_not_in_the_sources(dataset: Path) -> None:
    edit_json(dataset / RMSNORM, lambda d: d["spec"].update(entry_point="kernel.py::run"))
    message = _error(dataset)
    line = _line(dataset / RMSNORM, '"entry_point"')
    assert message.startswith(f"{dataset / RMSNORM}:{line}:1: field spec.entry_point: ")
    assert "'kernel.py' not found in sources" in message


def test_an_entry_function_the_source_does_not_define(dataset: Path) -> None:
    edit_json(dataset / RMSNORM, lambda d: d["spec"].update(entry_point="main.py::forward"))
    message = _error(dataset)
    line = _line(dataset / RMSNORM, '"entry_point"')
    assert message == (
        f"{dataset / RMSNORM}:{line}:1: field spec.entry_point: main.py defines no top-level "
        "function 'forward'"
    )


def test_a_reference_without_run(dataset: Path) -> None:
    edit_json(
        dataset / RMSNORM_DEF,
        lambda d: d.update(reference=d["reference"].replace("def run(", "def forward(")),
    )
    message = _error(dataset)
    line = _line(dataset / RMSNORM_DEF, '"reference"')
    assert message.startswith(f"{dataset / RMSNORM_DEF}:{line}:1: field reference: ")
    assert "top-level function named 'run'" in message


def test_a_solution_of_another_language(dataset: Path) -> None:
    edit_json(dataset / RMSNORM, lambda d: d["spec"].update(language="cuda"))
    line = _line(dataset / RMSNORM, '"language"')
    assert _error(dataset).startswith(f"{dataset / RMSNORM}:{line}:1: field spec.language: ")


def test_a_definition_the_dataset_lacks(dataset: Path) -> None:
    edit_json(dataset / RMSNORM, lambda d: d.update(definition="rmsnorm_h65"))
    message = _error(dataset)
    line = _line(dataset / RMSNORM, '"definition"')
    assert message.startswith(f"{dataset / RMSNORM}:{line}:1: ")
    assert "field definition: no definition named 'rmsnorm_h65'" in message


def test_broken_json_and_no_dataset(dataset: Path, tmp_path: Path) -> None:
    (dataset / RMSNORM).write_text('{"name": "x",\n  "definition": }\n', "utf-8")
    assert re.match(rf"{re.escape(str(dataset / RMSNORM))}:2:\d+: not valid JSON", _error(dataset))
    alone = tmp_path / "alone.json"
    alone.write_text((Path(__file__).parent / "dataset" / RMSNORM).read_text(), "utf-8")
    with pytest.raises(KernelFileError, match="not inside a FlashInfer Trace dataset.*--dataset"):
        load_workload(alone)
    kf = load_workload(alone, dataset=Path(__file__).parent / "dataset")  # --dataset ROOT
    assert kf.context.fib.definition == "rmsnorm_h64"


def test_the_cli_prints_the_located_message_without_a_traceback(dataset: Path) -> None:
    edit_jsonl(dataset / RMSNORM_WORKLOADS, lambda i, row: row["workload"]["axes"].clear())
    proc = run_cli("profile", dataset / RMSNORM, cwd=dataset.parent)
    assert proc.returncode == 1
    assert f"{dataset / RMSNORM_WORKLOADS}:1:1: field workload.axes: missing axis" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
