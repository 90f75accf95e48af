"""Binding a FlashInfer-Bench solution JSON to its definition and workloads
(``load_workload`` on ``*.json``; accelopt_core.kernelfile.fib): the kernel module is the
solution's entry source, the generated harness follows FIB's conventions (inputs in definition
order, scalars, safetensors tensors shipped, destination-passing style, tolerances), workloads
become ``BENCH["shapes"]`` with one held out, and sizes scale for the CPU interpreter as a
KernelBench problem's. The harness is imported here from the request's files (no kernel runs:
the end-to-end tests run them)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch

from accelopt_core.kernelfile.fib import (
    BLOBS_MODULE,
    HARNESS_MODULE,
    TIMED_WORKLOADS,
    pick_workloads,
)
from accelopt_core.kernelfile.fib_harness import FIB_ATOL, FIB_RTOL, axis_global
from accelopt_core.kernelfile.workload import eval_keywords, load_workload
from accelopt_core.onsite.runtime import sizes as onsite_sizes
from accelopt_core.onsite.runtime.sources import install
from tests.fib.conftest import (
    GEMM,
    RMSNORM,
    RMSNORM_WORKLOADS,
    SOFTMAX,
    edit_jsonl,
)


@pytest.fixture
def harness_of():
    """Import the generated harness from a binding's files (served from memory as on a
    target); the finder and the modules it served are removed after the test."""
    finders = []

    def load(kf):
        finder = install(kf.context.files)
        finders.append(finder)
        return importlib.import_module(HARNESS_MODULE)

    yield load
    for finder in finders:
        sys.meta_path.remove(finder)
        for name in finder.table:
            sys.modules.pop(name, None)


def _workloads(root: Path, name: str) -> list[dict]:
    path = next((root / "workloads").rglob(f"{name}.jsonl"))
    return [json.loads(line)["workload"] for line in path.read_text().splitlines()]


def test_a_solution_json_is_a_kernel_file(dataset: Path) -> None:
    kf = load_workload(dataset / RMSNORM)
    ctx = kf.context
    assert kf.path == f"{dataset / RMSNORM}::main.py"
    assert [k.name for k in kf.kernels] == ["rmsnorm_kernel"]
    assert ctx.kernel_path == "fib_rmsnorm_triton/main.py"
    assert ctx.kernel_module == "fib_rmsnorm_triton.main"
    assert ctx.fib.definition == "rmsnorm_h64" and ctx.fib.solution == "rmsnorm_triton"
    assert ctx.fib.root == str(dataset) and ctx.harness_file == str(dataset / RMSNORM)
    assert sorted(ctx.files) == [
        "_accelopt_fib_harness.py",
        "_accelopt_fib_reference.py",
        "fib_rmsnorm_triton/main.py",
    ]
    assert kf.harness.complete and kf.harness.entry == "run"
    assert (kf.harness.rtol, kf.harness.atol) == (FIB_RTOL, FIB_ATOL) == (1e-2, 1e-2)
    assert kf.launches("run", "rmsnorm_kernel")
    assert eval_keywords(kf)["source_name"] == "rmsnorm_triton.json::main.py"


def test_workloads_are_the_shapes_with_one_held_out(dataset: Path, harness_of) -> None:
    kf = load_workload(dataset / RMSNORM)
    harness = harness_of(kf)
    sizes = {w["uuid"]: w["axes"]["batch_size"] for w in _workloads(dataset, "rmsnorm_h64")}
    shapes = [s["workload"] for s in harness.BENCH["shapes"]]
    assert list(kf.context.fib.workloads) == shapes
    # 5 workloads (batch 1, 3, 5, 8, 12): 3 timed spread by size, the second smallest held out
    assert [sizes[u] for u in shapes] == [1, 8, 12, 3]
    for uuid in shapes:
        hidden, weight, eps = harness.get_inputs(1, "cpu", workload=uuid)
        assert hidden.shape == (sizes[uuid], 64) and hidden.dtype == torch.float32
        assert weight.shape == (64,) and eps == 1e-6  # the workload's scalar, as given
    a = harness.get_inputs(1, "cpu", workload=shapes[0])
    b = harness.get_inputs(2, "cpu", workload=shapes[0])
    assert torch.equal(a[0], harness.get_inputs(1, "cpu", workload=shapes[0])[0])
    assert not torch.equal(a[0], b[0])
    x, w, eps = a
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    assert torch.allclose(harness.reference(*a), expected)


def test_pick_workloads_spreads_over_sizes_and_holds_one_out(dataset: Path) -> None:
    from flashinfer_bench.data import Definition, Workload

    definition = Definition.model_validate_json(
        (dataset / "definitions/rmsnorm/rmsnorm_h64.json").read_text()
    )
    workloads = [
        Workload(axes={"batch_size": b}, inputs={}, uuid=f"w{b:02d}") for b in range(1, 11)
    ]
    picked = [w.axes["batch_size"] for w in pick_workloads(definition, workloads[::-1])]
    assert len(picked) == TIMED_WORKLOADS + 1
    assert picked[:-1] == [1, 7, 10] and picked[-1] == 4  # largest timed, one held out
    assert [w.axes["batch_size"] for w in pick_workloads(definition, workloads[:1])] == [1]


def test_value_returning_gemm_declares_its_flops(dataset: Path, harness_of) -> None:
    kf = load_workload(dataset / GEMM)
    harness = harness_of(kf)
    assert harness.SPEC["dps"] is False and kf.harness.has_flops
    shape = harness.BENCH["shapes"][0]
    a, b = harness.get_inputs(3, "cpu", **shape)
    assert a.dtype == b.dtype == torch.float16 and b.shape == (64, 64)
    m = a.shape[0]
    assert harness.BENCH["flops"](a, b) == 2 * m * 64 * 64
    assert harness.BENCH["bytes"](a, b) == (a.numel() + b.numel() + m * 64) * 2


def test_safetensors_inputs_are_shipped_and_loaded_as_stored(dataset: Path, harness_of) -> None:
    import safetensors.torch

    kf = load_workload(dataset / SOFTMAX)
    assert f"{BLOBS_MODULE}.py" in kf.context.files
    harness = harness_of(kf)
    stored = next(
        w
        for w in _workloads(dataset, "softmax_rows")
        if w["inputs"]["logits"]["type"] == "safetensors"
    )
    blob = safetensors.torch.load_file(str(dataset / stored["inputs"]["logits"]["path"]))["logits"]
    for seed in (1, 2):
        (logits,) = harness.get_inputs(seed, "cpu", workload=stored["uuid"])
        assert torch.equal(logits, blob)
    assert harness.SPEC["workloads"][stored["uuid"]]["fixed"] == ["batch_size", "vocab_size"]


def test_sizes_scale_for_the_interpreter_as_caps(dataset: Path, harness_of, monkeypatch) -> None:
    def add_large(index: int, row: dict) -> None:
        if index == 4:
            row["workload"]["axes"]["batch_size"] = 5000  # 5000 x 64 float32: 1.2 MiB

    edit_jsonl(dataset / RMSNORM_WORKLOADS, add_large)
    kf = load_workload(dataset / RMSNORM)
    assert kf.harness.sizes.names == {"batch_size": 5000, "hidden_size": 64}
    harness = harness_of(kf)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = kf.harness.sizes.request_field("auto")
    reported = onsite_sizes.apply_sizes(spec, harness)
    old, new = reported["sizes"]["batch_size"]
    assert old == 5000 and 0 < new < 5000 and new % 16 != 0  # 5000 is no multiple of 16
    assert any(
        line.startswith("sizes scaled for the CPU interpreter: batch_size 5000")
        for line in reported["notes"]
    )
    largest = harness.get_inputs(0, "cpu")  # the default workload is the largest
    assert largest[0].shape[0] == new
    assert sum(t.numel() * 4 for t in largest[:2]) <= onsite_sizes.INPUT_BUDGET_BYTES
    held = harness.BENCH["shapes"][-1]
    assert harness.get_inputs(0, "cpu", **held)[0].shape[0] == 3  # under the cap: unchanged


def test_axis_names_that_are_not_identifiers_get_a_prefix() -> None:
    assert axis_global("batch_size") == "batch_size"
    assert axis_global("num-pages") == "axis_num_pages"
    assert axis_global("torch") == "axis_torch" and axis_global("class") == "axis_class"
    assert axis_global("_private") == "axis__private"


@pytest.mark.parametrize("path", [RMSNORM, GEMM, SOFTMAX])
def test_binding_is_deterministic(dataset: Path, path: str) -> None:
    first, second = load_workload(dataset / path), load_workload(dataset / path)
    assert first.context.digest == second.context.digest
    assert first.context.files == second.context.files
