"""The derivation of shapes from a harness's own inputs (accelopt_core.onsite.judge.derived)."""

from __future__ import annotations

import json

import pytest
import torch

from accelopt_core.onsite.judge import derived


def test_softmax_rows_and_columns_are_two_symbols() -> None:
    x = torch.randn(16, 64)
    plan = derived.plan((x,), ["x"])
    assert plan["skipped"] == []
    names = [d["name"] for d in plan["derived"]]
    assert names == ["x[0] 16→15", "x[0] 16→20", "x[1] 64→63", "x[1] 64→80"]
    cols = plan["derived"][2]
    assert cols == {
        "kind": "shape",
        "name": "x[1] 64→63",
        "symbol": "d1",
        "from": 64,
        "to": 63,
        "inputs": "x: 16×63",
        "dims": [[0, 1]],
    }
    json.dumps(plan)  # travels in the result as JSON


def test_matmul_k_is_one_symbol_across_inputs() -> None:
    a, b = torch.randn(32, 48), torch.randn(48, 16)
    syms = derived.symbols((a, b))
    assert [(s["length"], s["dims"]) for s in syms] == [
        (32, [[0, 0]]),
        (48, [[0, 1], [1, 0]]),
        (16, [[1, 1]]),
    ]
    k = next(d for d in derived.plan((a, b), ["a", "b"])["derived"] if d["to"] == 60)
    assert k["name"] == "a[1] 48→60" and k["inputs"] == "a: 32×60, b: 60×16"
    a2, b2 = derived.apply((a, b), k, torch)
    assert a2.shape == (32, 60) and b2.shape == (60, 16)
    assert torch.equal(a2[:, :48], a) and torch.equal(a2[:, 48:], a[:, :12])  # tiled
    assert torch.equal(b2[:48], b) and a2.is_contiguous() and b2.is_contiguous()


def test_length_one_dims_are_left_alone_and_square_is_one_symbol() -> None:
    x = torch.randn(1, 8, 8)
    syms = derived.symbols((x,))
    assert len(syms) == 1 and syms[0]["dims"] == [[0, 1], [0, 2]]
    shorter = derived.plan((x,), ["x"])["derived"][0]
    (y,) = derived.apply((x,), shorter, torch)
    assert y.shape == (1, 7, 7) and torch.equal(y, x[:, :7, :7])


def test_trim_keeps_values_dtype_device_and_grad() -> None:
    x = torch.randn(16, 64, dtype=torch.float16).requires_grad_(True)
    desc = derived.plan((x,), ["x"])["derived"][2]  # 64 → 63
    (y,) = derived.apply((x,), desc, torch)
    assert y.dtype == torch.float16 and y.is_leaf and y.requires_grad
    assert torch.equal(y.detach(), x.detach()[:, :63])


def test_targets() -> None:
    assert derived.targets(64) == [63, 80]
    assert derived.targets(16) == [15, 20]
    assert derived.targets(2) == [3]  # 2 → 1 would make a broadcast dimension
    assert derived.targets(3) == [2, 4]


def test_scalar_size_argument_skips_that_symbol_with_a_reason() -> None:
    x = torch.randn(16, 64)
    plan = derived.plan((x, 64, 1e-6), ["x", "n_cols", "eps"])
    assert [d["name"] for d in plan["derived"]] == ["x[0] 16→15", "x[0] 16→20"]
    (skip,) = plan["skipped"]
    assert skip["name"] == "x[1] (d1 = 64)"
    assert "input #1 (n_cols) is the int 64" in skip["why"]


def test_inputs_without_tensors_are_skipped_not_crashed() -> None:
    import numpy as np

    plan = derived.plan((np.zeros((4, 4)), 3), None)
    assert plan["derived"] == []
    assert plan["skipped"][0]["name"] == "all inputs"
    assert "ndarray" in plan["skipped"][0]["why"] and "no torch tensor" in plan["skipped"][0]["why"]
    assert derived.plan((), None)["skipped"][0]["why"].startswith("the inputs (none)")


def test_symbols_past_the_cap_are_skipped() -> None:
    x = torch.randn(2, 3, 5, 7)
    plan = derived.plan((x,), ["x"])
    assert len({d["symbol"] for d in plan["derived"]}) == derived.MAX_SYMBOLS
    assert [s["name"] for s in plan["skipped"]] == ["x[3] (d3 = 7)"]
    assert "at most 3" in plan["skipped"][0]["why"]


def test_names_fall_back_to_positions() -> None:
    assert derived.input_names((1, 2, 3), ["a", "not an identifier"]) == ["a", "arg1", "arg2"]


def test_apply_refuses_inputs_of_another_shape() -> None:
    desc = derived.plan((torch.randn(4, 8),), ["x"])["derived"][0]
    with pytest.raises(ValueError, match="not of length 4"):
        derived.apply((torch.randn(5, 8),), desc, torch)
    with pytest.raises(ValueError, match="not of length 4"):
        derived.apply((3,), desc, torch)


def test_checked_sanitizes_request_descriptors() -> None:
    desc = derived.plan((torch.randn(4, 8),), ["x"])["derived"][3]
    desc = dict(desc, seed=1, shape={"M": 4}, extra="dropped")
    ok = derived.checked(desc, 1)
    assert ok is not None and "extra" not in ok and ok["seed"] == 1 and ok["shape"] == {"M": 4}
    assert derived.checked(desc, 0) is None  # names input #0 of no inputs
    assert derived.checked(dict(desc, to=10**9), 1) is None  # would allocate without bound
    assert derived.checked(dict(desc, dims=[[0, "1"]]), 1) is None
    assert derived.checked("x", 1) is None
    assert derived.label(ok) == "x[1] 8→10 (x: 4×10)"
