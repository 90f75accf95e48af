"""Derived values and layouts (issue 29) as data: what is derived from a harness's inputs, how it
is applied, what a request may carry (accelopt_core.onsite.judge.derived_values and
derived_inputs). The judge's use of them is in test_judge_values.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from accelopt_core.onsite.judge import derived_inputs, derived_layouts, derived_values
from accelopt_core.onsite.judge.derived_checks import _Finder, derived_seeds, slot_seeds
from accelopt_core.onsite.runtime import exchange


def _x(*shape: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(*shape, generator=g) * 4).to(dtype)


def _by_op(parts: list[dict]) -> dict[str, dict]:
    return {p["op"]: p for p in parts}


def test_four_value_derivations_of_a_float_input_with_factors_per_dtype() -> None:
    x = _x(16, 64)
    found, skipped = derived_values.plan_values((x,), ["x"])
    assert skipped == []
    ops = _by_op(found)
    assert list(ops)[:4] == ["large", "tiny", "offset", "outliers"]  # then issue 52's classes
    big = derived_values.apply_values(x, ops["large"])
    assert big.abs().max().item() == pytest.approx(1000.0, rel=1e-2)
    assert ops["large"]["name"] == f"x × {ops['large']['value']:g} (large)"
    tiny = derived_values.apply_values(x, ops["tiny"])
    assert tiny.abs().max().item() == pytest.approx(1e-4, rel=1e-2)
    shifted = derived_values.apply_values(x, ops["offset"])
    assert (shifted - x).mean().item() == pytest.approx(512 * x.std().item(), rel=1e-2)
    half = _by_op(derived_values.plan_values((x.half(),), ["x"])[0])
    assert derived_values.apply_values(x.half(), half["large"]).abs().max().item() < 201
    assert derived_values.apply_values(x.half(), half["large"]).dtype == torch.float16
    assert half["offset"]["value"] < ops["offset"]["value"]  # 256 spreads in fp16, not 512


def test_outliers_are_two_per_row_of_opposite_signs() -> None:
    x = _x(8, 32)
    part = _by_op(derived_values.plan_values((x,), ["x"])[0])["outliers"]
    y = derived_values.apply_values(x, part)
    changed = y != x
    assert changed.sum(dim=1).tolist() == [2] * 8
    assert set(y[changed].abs().unique().tolist()) == {part["value"]}
    assert (y[changed].view(8, 2).sum(dim=1) == 0).all()  # one up, one down
    assert changed[:, -1].any()  # near the row's end too, where a tail block is


def test_integer_inputs_get_integer_ops_and_zeros_skipped_with_a_reason() -> None:
    idx = torch.arange(64)
    zeros = torch.zeros(4, 4)
    found, skipped = derived_values.plan_values((idx, zeros), ["idx", "z"])
    assert all(p["op"].startswith("int_") for p in found if p["input"] == 0)  # issue 52
    assert [p["op"] for p in found if p["input"] == 1] == ["nan", "inf"]
    assert {"z large", "z tiny", "z offset", "z outliers"} <= {s["name"] for s in skipped}
    assert all("all zero" in s["why"] or "changes nothing" in s["why"] for s in skipped)


def test_bench_values_bounds_keep_probabilities_in_range_or_turn_an_input_off() -> None:
    g = torch.Generator().manual_seed(1)
    p = torch.rand(8, 16, generator=g)
    w = torch.randn(16, generator=g)
    found, skipped = derived_values.plan_values((p, w), ["p", "w"], {"p": (0.0, 1.0), "w": False})
    assert [(f["input"], f["op"]) for f in found][0] == (0, "tiny")
    assert all(derived_values.within(derived_values.apply_values(p, f), (0.0, 1.0)) for f in found)
    why = {s["name"]: s["why"] for s in skipped}
    assert why["p large"] == 'leaves BENCH["values"] bounds [0, 1]'
    assert why["w values"] == 'off in BENCH["values"]'
    assert derived_values.plan_values((p,), ["p"], False) == (
        [],
        [{"name": "values", "why": 'off in BENCH["values"]'}],
    )
    _, bad = derived_values.plan_values((p,), ["p"], {"p": (1, 0)})
    assert bad[0]["why"].startswith("not derived: BENCH[\"values\"]['p'] must be (low, high)")


def test_layouts_hold_the_same_values_in_other_strides() -> None:
    x = _x(16, 64)
    found, _ = derived_layouts.plan_layouts((x,), ["x"], torch)
    padded, col = found[:2]  # issue 52's further layouts: tests/values/test_layouts_principle.py
    assert padded["inputs"] == "x: 16×64, strides (72, 1)"
    assert col["inputs"] == "x: 16×64, strides (1, 16)"
    y = derived_layouts.apply_layout(x, padded, torch)
    assert torch.equal(y, x) and not y.is_contiguous() and y.stride() == (72, 1)
    pad = y.as_strided((8,), (1,), y.storage_offset() + 64)  # after row 0: NaN, for a kernel
    assert torch.isnan(pad).all()  # that reads past the row's end
    z = derived_layouts.apply_layout(x.requires_grad_(True), col, torch)
    assert torch.equal(z, x) and z.stride() == (1, 16) and z.is_leaf and z.requires_grad
    assert derived_layouts.plan_layouts((x[0],), ["v"], torch) == ([], [])  # 1-D: none


def test_a_layout_survives_the_exchange_segment_the_candidate_maps() -> None:
    x = _x(16, 64)
    padded, col = derived_layouts.plan_layouts((x,), ["x"], torch)[0][:2]
    for part in (padded, col):
        y = derived_layouts.apply_layout(x, part, torch)
        (back,) = exchange.share((y,), torch=torch).value(torch)
        assert back.stride() == y.stride() and torch.equal(back, x)


def test_numpy_inputs_of_nki_kernels_get_values_not_layouts() -> None:
    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    plan = derived_inputs.plan((a,), ["a"], shapes=False, layouts=False)
    ops = [p["op"] for p in plan["derived"]]
    assert ops[:4] == ["large", "tiny", "offset", "outliers"]
    (big,) = derived_inputs.apply((a,), plan["derived"][0], None)
    assert big.dtype == np.float32 and abs(float(np.abs(big).max()) - 1000.0) < 10


def test_plan_orders_parts_and_caps_nothing() -> None:
    """Issue 52: no cap drops a class; the first floating input's value parts come first, the
    others' after them by kind (large, offset, tiny, outliers, then the planner's order), so a
    budget cuts the least telling ones (and names them, :func:`test_the_budget_defers_...`)."""
    x, w, b = _x(16, 64), _x(64), _x(64)
    plan = derived_inputs.plan((x, w, b), ["x", "weight", "bias"], torch=torch)
    kinds = [p["kind"] for p in plan["derived"]]
    n_values = kinds.count("values")
    assert kinds == ["shape"] * 4 + ["values"] * n_values + ["layout"] * kinds.count("layout")
    values = [(p["input"], p["op"]) for p in plan["derived"] if p["kind"] == "values"]
    per_input = {i: [op for j, op in values if j == i] for i in range(3)}
    assert per_input[0] == [p["op"] for p in derived_values.plan_values((x,), ["x"])[0]]
    assert per_input[1] == per_input[2] and len(per_input[1]) == len(per_input[0])
    assert values[len(per_input[0]) : len(per_input[0]) + 2] == [(1, "large"), (2, "large")]
    assert not [s for s in plan["skipped"] if "at most" in s["why"]]


def test_the_budget_defers_what_does_not_fit_and_says_why() -> None:
    finder = _Finder(None, None, torch, None, [])
    finder.used = [{"name": f"d{k}"} for k in range(5)]
    for desc in finder.used:
        finder.cost[id(desc)] = 0.5
    kept, over = finder.within(2.4)  # each counted COST_FACTOR (2) x its measured 0.5 s
    assert [d["name"] for d in kept] == ["d0", "d1"] and [d["name"] for d in over] == [
        "d2",
        "d3",
        "d4",
    ]
    assert finder.within(None) == (finder.used, [])
    kept, over = finder.within(0.1)  # the first is always kept
    assert [d["name"] for d in kept] == ["d0"] and len(over) == 4
    kept, over = finder.within(0.1, floor=3)  # the floor (MIN_USED) never depends on load
    assert [d["name"] for d in kept] == ["d0", "d1", "d2"] and len(over) == 2


def test_slots_combine_one_shape_one_value_part_one_layout() -> None:
    x = _x(16, 64)
    parts = derived_inputs.plan((x,), ["x"], torch=torch)["derived"]
    by = {k: [p for p in parts if p["kind"] == k] for k in ("shape", "values", "layout")}
    slots = derived_inputs.combine(by["shape"], by["values"], by["layout"])
    assert len(slots) == max(len(found) for found in by.values()) and slots[0]["kind"] == "combined"
    assert [p["kind"] for p in slots[0]["parts"]] == ["shape", "values", "layout"]
    assert slots[0]["name"] == ", ".join(p["name"] for p in slots[0]["parts"])
    (y,) = derived_inputs.apply((x,), slots[0], torch)
    assert y.shape == (15, 64) and y.stride() == (72, 1)
    assert y.abs().max().item() == pytest.approx(1000.0, rel=2e-2)
    counts = {k: len(found) for k, found in by.items()}
    assert derived_inputs.kinds_count(slots) == counts and counts["shape"] == 4


def test_checked_refuses_malformed_descriptors_from_a_request() -> None:
    x = _x(16, 64)
    parts = derived_inputs.plan((x,), ["x"], torch=torch)["derived"]
    shape, value, layout = parts[0], parts[4], parts[-1]
    good = derived_inputs.combined([shape, value, layout])
    assert derived_inputs.checked(dict(good, seed=2, shape=None), 1)["seed"] == 2
    assert derived_inputs.checked(derived_inputs.combined([shape, parts[1]]), 1) is None
    assert derived_inputs.checked(derived_inputs.combined([value, parts[5]]), 1) is None
    assert derived_inputs.checked(dict(value, input=3), 1) is None
    assert derived_inputs.checked(dict(value, op="exp"), 1) is None
    assert derived_inputs.checked(dict(value, value=float("inf")), 1) is None
    assert derived_inputs.checked(dict(layout, layout="diagonal"), 1) is None
    assert derived_inputs.checked({"kind": "teleport", "input": 0}, 1) is None
    assert derived_inputs.checked({"kind": "combined", "parts": []}, 1) is None


def test_slots_take_the_seeds_after_the_first_in_turn() -> None:
    assert slot_seeds([1, 2, 3, 4, 5], 6) == [2, 3, 4, 5, 2, 3]
    assert slot_seeds([7], 2) == [7, 7]
    listed = [{"seed": 2, "shape": None}, {"seed": 3, "shape": {"M": 4}}, {"seed": "x"}]
    assert derived_seeds(listed, None) == {2}
    assert derived_seeds(listed, {"M": 4}) == {3}
    assert derived_seeds(None, None) == set()


def test_inputs_without_tensors_derive_nothing_said_once() -> None:
    plan = derived_inputs.plan((3, "x"), ["n", "s"], torch=torch)
    assert plan["derived"] == []
    assert plan["skipped"] == [
        {
            "name": "all inputs",
            "why": "the inputs (int, str) hold no tensor: no shape, value or layout to derive",
        }
    ]
