"""Hand-made evaluation results carrying the metrics of the data contract of issues 21 and 22
(``metrics["gpu"]``, ``metrics["not_timed"]``, ``metrics["derived_inputs"]``), as the compile
stage and the derived-shape judge write them on the target. Consumers (CLI, server, prompt,
memory) are tested against these until, and besides, the producers' own end-to-end tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from accelopt_core.onsite.judge.derived_inputs import part_class
from accelopt_core.onsite.protocol import EvalResult

#: One launch of softmax_kernel compiled for an H100: 44 registers, no spills, 50% occupancy.
SOFTMAX_LAUNCH: dict[str, Any] = {
    "kernel": "softmax_kernel",
    "config": "BLOCK_SIZE=64, num_warps=4, num_stages=3",
    "grid": [16, 1, 1],
    "registers": 44,
    "spill_stores": 0,
    "spill_loads": 0,
    "local_bytes": 0,
    "shared_bytes": 0,
    "threads": 128,
    "occupancy": {"warps": 32, "max_warps": 64, "percent": 50.0, "limiter": "registers"},
    "sass": {
        "tensor_core": 0,
        "tensor_core_op": "HGMMA",
        "ldg128": 4,
        "ldg_narrow": 0,
        "ldgsts": 0,
        "tma": 0,
        "stl": 0,
        "ldl": 0,
    },
}

GPU: dict[str, Any] = {
    "device": "H100 SXM5",
    "arch": "sm_90",
    "compile_s": 0.41,
    "cached": 3,
    "kernels": [SOFTMAX_LAUNCH],
    "warnings": [],
}


def _shape(name: str, symbol: str, frm: int, to: int, inputs: str, dim: int) -> dict[str, Any]:
    return {"kind": "shape", "name": name, "symbol": symbol, "from": frm, "to": to,
            "inputs": inputs, "dims": [[0, dim]]}  # fmt: skip


_LARGE = {"kind": "values", "name": "x × 63.4 (large)", "input": 0, "op": "large", "value": 63.4,
          "inputs": "x: 16×64"}  # fmt: skip
_OFFSET = {"kind": "values", "name": "x + 2130 (offset)", "input": 0, "op": "offset",
           "value": 2130.0, "inputs": "x: 16×64"}  # fmt: skip
_PADDED = {"kind": "layout", "name": "x row-padded", "input": 0, "layout": "row_padded",
           "inputs": "x: 16×64, strides (72, 1)"}  # fmt: skip
_COLS63 = _shape("x[1] 64→63", "d1", 64, 63, "x: 16×63", 1)
_COLS80 = _shape("x[1] 64→80", "d1", 64, 80, "x: 16×80", 1)

#: Four checked calls of issue 29's derived inputs: two slots (a shape, a value range and a
#: layout; a shape and a value range) and two shapes alone.
DERIVED: dict[str, Any] = {
    "used": [
        {"kind": "combined", "name": "x[1] 64→63, x × 63.4 (large), x row-padded",
         "inputs": "x: 16×63", "parts": [_COLS63, _LARGE, _PADDED], "seed": 2, "shape": None},
        {"kind": "combined", "name": "x[1] 64→80, x + 2130 (offset)", "inputs": "x: 16×80",
         "parts": [_COLS80, _OFFSET], "seed": 3, "shape": None},
        dict(_shape("x[0] 16→15", "d0", 16, 15, "x: 15×64", 0), seed=4, shape=None),
        dict(_shape("x[0] 16→20", "d0", 16, 20, "x: 20×64", 0), seed=5, shape=None),
    ],
    "skipped": [],
}  # fmt: skip


def _classes_words() -> str:
    """The class counts of :data:`DERIVED` as every surface words them (issue 52): ``4 shapes;
    values: 2 (large 1, offset 1); layouts: 1 (padded 1)``, with the class names the judge
    gives its parts (:func:`~accelopt_core.onsite.judge.derived_inputs.part_class`), so that
    these tests hold whatever the value and layout classes are called."""
    large, offset, padded = (part_class(p).partition(": ")[2] for p in (_LARGE, _OFFSET, _PADDED))
    values = f"{large} 2" if large == offset else f"{large} 1, {offset} 1"
    return f"4 shapes; values: 2 ({values}); layouts: 1 ({padded} 1)"


#: :func:`accelopt_core.devicefacts.derived_summary` of :func:`gpu_metrics`.
SUMMARY = "timed on 1 shape, checked on 7 derived inputs: " + _classes_words()

#: What a budget left to the property-based search, and the search's facts on a candidate
#: (issue 52): the keys a judge after issue 52 adds to ``metrics["derived_inputs"]``.
BUDGET_WHY = (
    "not checked on every candidate: the derived checks' budget (20% of an evaluation) binds; "
    "left to the search"
)
DEFERRED = [
    {"name": "x × -63.4 (sign-flipped scale)", "why": BUDGET_WHY},
    {"name": "x permuted (1, 0)", "why": BUDGET_WHY},
    {
        "name": "x on a grid of 0.25 (grid ties)",
        "why": "not checked on every candidate: its call alone costs 31% of an evaluation",
    },  # fmt: skip
]
SEARCH = {"seed": 1234, "tried": 37, "usable": 35, "calls": 12, "budget": 40, "seconds": 2.13,
          "counterexample": None, "examples": ["x 3×5 (ties)", "x 16×64 (subnormals)"],
          "skipped": None}  # fmt: skip


def searched_metrics(counterexample: str | None = None) -> dict[str, Any]:
    """:func:`gpu_metrics` of a candidate after issue 52: three derivations left to the search
    (two for the budget, one for its own reason) and the search's facts, with
    ``counterexample`` when it found one."""
    metrics = gpu_metrics()
    metrics["derived_inputs"]["deferred"] = copy.deepcopy(DEFERRED)
    metrics["derived_inputs"]["search"] = dict(SEARCH, counterexample=counterexample)
    return metrics


def gpu_metrics(**launch: Any) -> dict[str, Any]:
    """``metrics`` with the H100 facts of one softmax launch (fields of ``launch`` replaced)
    and the derived inputs of :data:`DERIVED`."""
    gpu = copy.deepcopy(GPU)
    gpu["kernels"][0].update(launch)
    return {"gpu": gpu, "derived_inputs": copy.deepcopy(DERIVED)}


def spilling_metrics() -> dict[str, Any]:
    """A launch that spills: 255 registers, 24 B stored and loaded, occupancy 12.5%."""
    metrics = gpu_metrics(
        config="BLOCK_SIZE=8192, num_warps=4, num_stages=3",
        registers=255,
        spill_stores=24,
        spill_loads=24,
        local_bytes=24,
        occupancy={"warps": 8, "max_warps": 64, "percent": 12.5, "limiter": "registers"},
    )
    metrics["gpu"]["kernels"][0]["sass"].update(stl=6, ldl=6)
    metrics["gpu"]["warnings"] = ["softmax_kernel: 24 bytes spill stores on sm_90"]
    return metrics


def ok_result(metrics: dict[str, Any] | None = None, latency_ms: float = 1.5) -> EvalResult:
    """A correct result timed by the interpreter with ``metrics`` (default :func:`gpu_metrics`)."""
    return EvalResult(
        status="ok", latency_ms=latency_ms, p20_ms=latency_ms * 0.9, p80_ms=latency_ms * 1.1,
        timing="interpreter", device="cpu",
        metrics=gpu_metrics() if metrics is None else metrics,
    )  # fmt: skip


def not_timed_result() -> EvalResult:
    """A kernel the CPU interpreter cannot run (a scalar ``eps.to(tl.float32)``) that compiles
    for sm_90: the interpreter's failure, with the device facts and ``not_timed``."""
    metrics = gpu_metrics()
    metrics["not_timed"] = (
        "the CPU interpreter cannot run this kernel (`.to()` on a float argument)"
    )
    return EvalResult(
        status="compile_error", timing="interpreter", device="cpu", line=12,
        message="interpreter: AttributeError: 'float' object has no attribute 'to'",
        metrics=metrics,
    )  # fmt: skip


def does_not_compile_result(line: int = 12) -> EvalResult:
    """A candidate the compile stage rejected: a ``tl.dot`` with K = 8 on sm_90."""
    return EvalResult(
        status="incorrect", line=line, timing="interpreter", device="cpu",
        message="does not compile for sm_90 (H100 SXM5): tl.dot: K must be >= 16, got 8",
    )  # fmt: skip


def cannot_launch_result() -> EvalResult:
    """A candidate over the H100's shared memory per block."""
    return EvalResult(
        status="incorrect", timing="interpreter", device="cpu",
        message="cannot launch on H100 SXM5 (sm_90): shared memory per block 262,144 B > "
        "232,448 B",
    )  # fmt: skip


def replace_cached_results(memory_dir: Path, result: EvalResult) -> int:
    """Replace every verdict in the evaluation cache of ``memory_dir`` (``<memory_dir>/evals``,
    written by a real evaluation before) with ``result``, so that the next evaluation of the
    same request is served ``result`` by the real cache path. Returns how many were replaced."""
    import diskcache

    data = result.to_dict()
    data["cached"] = False
    with diskcache.Cache(str(memory_dir / "evals")) as cache:
        keys = list(cache.iterkeys())
        for key in keys:
            cache.set(key, data)
    return len(keys)
