"""A solution's sources exported beside its JSON (``accelopt export``) are bound back to the
solution: ``load_workload`` on the exported entry file gives the same workload with the file on
disk as the kernel module, and the language server attaches the generated harness to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.kernelfile import KernelFileError, parse_kernel_file
from accelopt_core.kernelfile.fib import export_sources, exported_solution
from accelopt_core.kernelfile.workload import load_workload
from accelopt_server.engine_adapter import attach_workload
from tests.fib.conftest import RMSNORM, edit_json


def test_export_then_bind_the_exported_entry(dataset: Path) -> None:
    written = export_sources(dataset / RMSNORM)
    main = (dataset / RMSNORM).with_suffix("") / "main.py"
    assert written == [main]
    assert export_sources(dataset / RMSNORM) == []  # same text: kept, nothing written
    main.write_text(main.read_text().replace("BLOCK=16", "BLOCK=32"), "utf-8")
    kf = load_workload(main)
    assert kf.path == str(main)
    assert kf.context.fib.solution == "rmsnorm_triton"
    assert "BLOCK=32" in kf.context.files[kf.context.kernel_path]
    assert kf.harness.complete and kf.harness.entry == "run"
    assert exported_solution(main) == (dataset / RMSNORM, "main.py")


def test_export_never_overwrites_other_text(dataset: Path) -> None:
    main = (dataset / RMSNORM).with_suffix("") / "main.py"
    main.parent.mkdir(parents=True)
    main.write_text("# mine\n", "utf-8")
    with pytest.raises(KernelFileError, match="exists with other text"):
        export_sources(dataset / RMSNORM)
    assert main.read_text() == "# mine\n"


def test_an_exported_helper_is_not_the_kernel_module(dataset: Path) -> None:
    def add_helper(d: dict) -> None:
        d["sources"].append({"path": "helpers.py", "content": "SCALE = 1\n"})

    edit_json(dataset / RMSNORM, add_helper)
    export_sources(dataset / RMSNORM)
    helper = (dataset / RMSNORM).with_suffix("") / "helpers.py"
    assert load_workload(helper).context is None or load_workload(helper).context.fib is None


def test_the_server_attaches_the_generated_harness(dataset: Path) -> None:
    export_sources(dataset / RMSNORM)
    main = (dataset / RMSNORM).with_suffix("") / "main.py"
    edited = main.read_text().replace("BLOCK=16", "BLOCK=64")
    parsed = parse_kernel_file(edited, str(main))  # the editor's unsaved buffer
    assert parsed.harness is None
    bound = attach_workload(parsed, load_workload(main), None)
    assert bound.harness is not None and bound.harness.complete
    assert bound.context.files[bound.context.kernel_path] == edited


def test_a_kernel_file_near_the_root_is_no_exported_solution(tmp_path: Path) -> None:
    """A file two folders below ``/`` (``/tmp/work/softmax.py``) walks up to the root, which has
    no name to put a ``.json`` beside: not an exported solution, not a crash."""
    assert exported_solution("/tmp/kernel.py") is None
    assert exported_solution("/kernel.py") is None
