"""Derived values by principle (issue 52, item 1) as data: every op of
accelopt_core.onsite.judge.derived_values keeps the dtype, applies the number it names, is finite
where it is meant to be, and a request's descriptor is checked. The judge's use of them is in
test_values_principle_judge.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from accelopt_core.onsite.judge import derived_checks, derived_values
from accelopt_core.onsite.judge.derived_values import apply_values, plan_values, value_class


def _x(*shape: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(*shape, generator=g) * 4).to(dtype)


def _by_kind(x, name: str = "x") -> dict[str, dict]:
    """The planned parts of ``x`` by the kind their skip entry would name."""
    found, skipped = plan_values((x,), [name])
    assert skipped == [], skipped
    kinds = [k for k, _ in derived_values.FLOAT_PLAN]
    assert len(found) == len(kinds)
    return dict(zip(kinds, found, strict=True))


def test_every_class_is_planned_for_a_float_input_in_order_with_stable_class_names() -> None:
    parts = _by_kind(_x(16, 64))
    assert [p["op"] for p in list(parts.values())[:4]] == ["large", "tiny", "offset", "outliers"]
    assert [value_class(p) for p in parts.values()] == [
        "values: large scale",
        "values: tiny scale",
        "values: positive shift (rows above zero)",
        "values: outliers",
        "values: sign-flipped scale",
        "values: negative shift (rows below zero)",
        "values: exact zeros",
        "values: repeated extreme",
        "values: coarse grid (ties)",
        "values: constant rows",
        "values: sign-flipped scale",
        "values: subnormal",
        "values: near the dtype's limit",
        "values: NaN",
        "values: ±inf",
    ]
    # a search's own parameters get the class their sign and magnitude say
    assert value_class({"op": "scale", "value": 3.0}) == "values: large scale"
    assert value_class({"op": "shift", "value": 2.0}).startswith("values: positive shift")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_each_op_keeps_the_dtype_and_is_finite_but_where_nan_or_inf_is_planted(dtype) -> None:
    x = _x(16, 64, dtype=dtype)
    for kind, part in _by_kind(x).items():
        y = apply_values(x, part)
        assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous(), kind
        finite = bool(torch.isfinite(y).all())
        assert finite == (kind not in ("nan", "inf")), kind
        assert not torch.equal(y, x), kind
    assert torch.equal(x, _x(16, 64, dtype=dtype))  # the input itself untouched


def test_both_signs_of_scale_and_shift_put_rows_above_and_below_zero() -> None:
    x = _x(16, 64)
    parts = _by_kind(x)
    assert (x.min(dim=1).values < 0).all() and (x.max(dim=1).values > 0).all()  # crosses zero
    above = apply_values(x, parts["offset"])
    below = apply_values(x, parts["below zero"])
    assert parts["below zero"]["value"] == -parts["offset"]["value"]
    assert (above > 0).all() and (below < 0).all()
    assert parts["below zero"]["name"] == f"x - {parts['offset']['value']:g} (below zero)"
    flipped = apply_values(x, parts["sign-flipped"])
    assert parts["sign-flipped"]["value"] == -parts["large"]["value"]
    assert torch.equal(flipped, -apply_values(x, parts["large"]))
    w = torch.rand(64) + 0.5  # an all-positive weight becomes all-negative
    assert (apply_values(w, _by_kind(w, "w")["sign-flipped"]) < 0).all()
    tiny = apply_values(x, parts["sign-flipped tiny"])
    assert tiny.abs().max().item() == pytest.approx(1e-4, rel=1e-2)


def test_ties_constant_rows_and_the_repeated_extreme() -> None:
    x = _x(16, 64)
    parts = _by_kind(x)
    step = parts["grid"]["value"]
    assert step == pytest.approx(x.abs().max().item() / 7, rel=1e-2)
    assert step <= x.abs().max().item() / 7  # rounded down: the grid stays in the range
    grid = apply_values(x, parts["grid"]).double()
    assert torch.allclose(grid / step, torch.round(grid / step), atol=1e-4)
    assert all(len(row.unique()) <= 15 for row in grid)  # int4-like: at most 15 levels
    const = apply_values(x, parts["constant rows"])
    assert (const[1::2] == parts["constant rows"]["value"]).all() and torch.equal(
        const[::2], x[::2]
    )
    rep = apply_values(x, parts["repeated extreme"])
    top = (rep == rep.max(dim=1, keepdim=True).values).sum(dim=1)
    low = (rep == rep.min(dim=1, keepdim=True).values).sum(dim=1)
    assert (top >= 3).all() and (low >= 3).all()
    assert torch.equal(rep.max(dim=1).values, x.max(dim=1).values)  # the same extremes
    w = torch.rand(64)  # a 1-D input is one row: constant as a whole (a weight of ones)
    assert apply_values(w, _by_kind(w, "w")["constant rows"]).unique().numel() == 1


def test_exact_zeros_some_entries_and_one_whole_row() -> None:
    x = _x(16, 64)
    y = apply_values(x, _by_kind(x)["zeros"])
    zero_rows = [r for r in range(16) if (y[r] == 0).all()]
    assert zero_rows == [8]
    assert ((y == 0).sum(dim=1) >= 9).all()  # every 7th entry of the others
    assert torch.equal(y[y != 0], x[y != 0])


@pytest.mark.parametrize(
    ("dtype", "top"),
    [
        (torch.float32, 1e-39),
        (torch.bfloat16, 1e-39),
        (torch.float16, 1e-6),
        (torch.float64, 1e-310),
    ],
)
def test_subnormals_sit_below_the_smallest_normal_and_are_not_flushed(dtype, top) -> None:
    x = _x(16, 64, dtype=dtype)
    y = apply_values(x, _by_kind(x)["subnormal"])
    tiny = torch.finfo(dtype).tiny
    assert y.abs().max().item() == pytest.approx(top, rel=0.05) and y.abs().max().item() < tiny
    assert (y != 0).float().mean().item() > 0.8  # most entries stay non-zero subnormals


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_near_the_limit_one_square_fits_and_a_sum_of_two_overflows(dtype) -> None:
    x = _x(16, 64, dtype=dtype)
    y = apply_values(x, _by_kind(x)["near limit"])
    top = y.abs().max().double().item()
    biggest = torch.finfo(dtype).max
    assert top == pytest.approx(biggest**0.5 * 15 / 16, rel=0.02)
    assert top * top < biggest < 2 * top * top


def test_nan_and_inf_are_planted_at_two_positions() -> None:
    x = _x(16, 64)
    parts = _by_kind(x)
    nan = apply_values(x, parts["nan"])
    assert torch.isnan(nan).nonzero().tolist() == [[0, 3], [8, 60]]
    inf = apply_values(x, parts["inf"])
    assert inf[torch.isinf(inf)].tolist() == [float("inf"), float("-inf")]
    assert derived_values.plants_nonfinite(parts["nan"])
    assert derived_values.plants_nonfinite({"kind": "combined", "parts": [parts["inf"]]})
    assert not derived_values.plants_nonfinite(parts["large"])
    # the judge's overflow rule: relaxed for these ops only
    assert derived_checks.overflow(inf, lambda: 0, parts["inf"]) is None
    assert "not finite" in derived_checks.overflow(inf, lambda: 0, parts["large"])


def test_a_non_finite_reference_must_be_reproduced_where_it_is() -> None:
    from accelopt_core.onsite.judge.compare import compare

    ref = torch.tensor([1.0, float("nan"), float("inf"), float("-inf")])
    assert compare(ref.clone(), ref, {}, {}) is None
    assert "not reproduced" in compare(torch.tensor([1.0, 0.0, 3.0, 4.0]), ref, {}, {})
    assert compare(torch.tensor([1.0, 2.0, float("-inf"), float("-inf")]), ref, {}, {})
    got = compare(
        torch.tensor([float("nan"), float("nan"), float("inf"), float("-inf")]), ref, {}, {}
    )
    assert "where the reference is finite" in got


def test_integer_inputs_get_bounds_repeats_and_empty_segments() -> None:
    idx = torch.tensor([5, 2, 9, 7, 3, 8], dtype=torch.int32)
    offsets = torch.tensor([0, 3, 5, 9, 12, 16])
    mask = torch.tensor([True, False, True])
    found, skipped = plan_values((idx, offsets, mask), ["idx", "offsets", "mask"])
    got = {(p["input"], p["op"]): apply_values((idx, offsets)[p["input"]], p) for p in found}
    assert got[(0, "int_min")].tolist() == [2] * 6 and got[(0, "int_min")].dtype == torch.int32
    assert got[(0, "int_max")].tolist() == [9] * 6
    assert got[(0, "int_repeat")].tolist() == [5, 5, 9, 9, 3, 3]
    assert got[(1, "int_empty")].tolist() == [0, 0, 5, 5, 12, 16]  # first and last kept
    assert got[(1, "int_repeat")].tolist() == [0, 0, 5, 5, 12, 12]
    assert {value_class(p) for p in found} == {
        "values: integer bounds", "values: repeated integers", "values: empty segments"
    }  # fmt: skip
    assert all(p["input"] != 2 for p in found)  # booleans are left alone
    why = {s["name"]: s["why"] for s in skipped}
    assert why["idx empty segments"].startswith("not a non-decreasing 1-D tensor")
    odd = torch.tensor([0, 2, 4, 7, 9])  # odd length: repeats = empty segments, said once
    odd_found, odd_skipped = plan_values((odd,), ["o"])
    assert [p["op"] for p in odd_found] == ["int_min", "int_max", "int_empty"]
    assert odd_skipped == [{"name": "o repeats", "why": "the same values as o empty segments"}]
    with pytest.raises(ValueError, match="does not fit"):
        apply_values(torch.tensor([1, 2], dtype=torch.int8), {"op": "int_max", "value": 300.0})
    with pytest.raises(ValueError, match="does not apply"):
        apply_values(offsets.float(), {"op": "int_repeat", "value": 2.0})


def test_numpy_inputs_get_the_same_numbers() -> None:
    x = _x(16, 64)
    a = x.numpy().copy()
    for (kind, part), (_, apart) in zip(_by_kind(x).items(), _by_kind(a, "x").items(), strict=True):
        assert part == apart, kind
        y, b = apply_values(x, part), apply_values(a, apart)
        assert b.dtype == np.float32
        assert np.array_equal(y.numpy(), b, equal_nan=True), kind
    ints = np.array([0, 3, 5, 9, 12])
    (empty,) = [p for p in plan_values((ints,), ["o"])[0] if p["op"] == "int_empty"]
    assert apply_values(ints, empty).tolist() == [0, 0, 5, 5, 12]


def test_bounds_keep_nan_and_inf_out_and_the_ops_that_leave_the_range() -> None:
    p = torch.rand(8, 16, generator=torch.Generator().manual_seed(1))
    found, skipped = plan_values((p,), ["p"], {"p": (0.0, 1.0)})
    ops = [f["op"] for f in found]
    assert ops == ["tiny", "zeros", "repeat_extreme", "grid", "constant", "subnormal"]
    why = {s["name"]: s["why"] for s in skipped}
    assert why["p nan"] == 'NaN/Inf leave BENCH["values"] bounds [0, 1]'
    assert why["p below zero"] == 'leaves BENCH["values"] bounds [0, 1]'


def test_a_request_s_value_parts_are_checked() -> None:
    x = _x(16, 64)
    for part in _by_kind(x).values():
        assert derived_values.checked_part(part, 1) == part
    ok = {"kind": "values", "input": 0, "name": "n", "inputs": "i"}
    assert derived_values.checked_part(dict(ok, op="scale", value=-3), 1)["value"] == -3.0
    for op, value in [
        ("scale", float("nan")),
        ("shift", float("inf")),
        ("teleport", 1.0),
        ("grid", 0.0),
        ("grid", -1.0),
        ("nan", 2.5),
        ("zeros", 0),
        ("repeat_extreme", 1e9),
        ("int_max", 2.0**64),
        ("int_min", 0.5),
        ("scale", True),
        ("scale", "2"),
    ]:
        assert derived_values.checked_part(dict(ok, op=op, value=value), 1) is None, (op, value)
    assert derived_values.checked_part(dict(ok, op="scale", value=2.0, input=1), 1) is None
