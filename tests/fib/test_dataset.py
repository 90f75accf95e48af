"""The test dataset is a FlashInfer Trace dataset as FIB's own loader reads it
(``TraceSet.from_path``), with what the other tests rely on."""

from __future__ import annotations

from flashinfer_bench.data import TraceSet

from tests.fib.conftest import DATASET


def test_the_package_loads_the_test_dataset() -> None:
    trace_set = TraceSet.from_path(str(DATASET))
    assert sorted(trace_set.definitions) == ["gemm_n64_k64", "rmsnorm_h64", "softmax_rows"]
    styles = {
        s.definition: s.spec.destination_passing_style
        for solutions in trace_set.solutions.values()
        for s in solutions
    }
    assert styles == {"rmsnorm_h64": True, "gemm_n64_k64": False, "softmax_rows": True}
    assert {k: len(v) for k, v in trace_set.workloads.items()} == {
        "rmsnorm_h64": 5,
        "gemm_n64_k64": 4,
        "softmax_rows": 4,
    }
    kinds = {
        given.type
        for trace in trace_set.workloads["softmax_rows"] + trace_set.workloads["rmsnorm_h64"]
        for given in trace.workload.inputs.values()
    }
    assert kinds == {"random", "scalar", "safetensors"}
