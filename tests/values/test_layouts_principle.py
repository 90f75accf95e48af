"""Layouts by principle (issue 52 item 2) as data: every stride pattern
accelopt_core.onsite.judge.derived_layouts derives for an input of N ≥ 2 dimensions, what each
holds, and what a request may carry. The judge's use of them is in
test_layouts_principle_judge.py."""

from __future__ import annotations

import itertools

import pytest
import torch

from accelopt_core.onsite.judge import derived_inputs, derived_layouts
from accelopt_core.onsite.runtime import exchange

L = derived_layouts


def _x(*shape: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(*shape, generator=g) * 4).to(dtype)


def _plan(*inputs, names=None) -> tuple[dict[str, dict], list[dict]]:
    names = names or [f"x{i}" if i else "x" for i in range(len(inputs))]
    found, skipped = L.plan_layouts(tuple(inputs), names, torch)
    return {p["name"]: p for p in found}, skipped


def test_a_3d_input_gets_every_permutation_slice_offset_and_stride_0() -> None:
    found, skipped = _plan(_x(4, 8, 16))
    assert skipped == []
    assert list(found) == [
        "x row-padded",
        "x column-major",
        "x at storage offset 1",
        "x permuted (1, 0, 2)",
        "x permuted (2, 1, 0)",
        "x permuted (1, 2, 0)",
        "x permuted (2, 0, 1)",
        "x sliced along dim 1",
        "x sliced along dim 0",
        "x expanded along dim 0 (stride 0)",
        "x expanded along dim 1 (stride 0)",
        "x expanded along dim 2 (stride 0)",
    ]
    perms = [tuple(p["perm"]) for p in found.values() if p["layout"] == "permuted"]
    assert sorted(perms) == sorted(itertools.permutations(range(3)))[1:]
    assert found["x column-major"]["perm"] == [0, 2, 1]
    assert found["x row-padded"] == dict(
        found["x row-padded"], layout="sliced", dim=2, pad=L.ROW_PAD
    )
    assert found["x permuted (1, 0, 2)"]["inputs"] == "x: 4×8×16, strides (16, 64, 1)"
    assert found["x sliced along dim 1"]["inputs"] == "x: 4×8×16, strides (256, 16, 1)"
    assert found["x expanded along dim 0 (stride 0)"]["inputs"] == "x: 4×8×16, strides (0, 16, 1)"


def test_4d_inputs_get_the_adjacent_swaps_and_the_reversal_not_all_23() -> None:
    found, _ = _plan(_x(2, 3, 4, 5))
    perms = [p["perm"] for p in found.values() if p["layout"] == "permuted"]
    assert perms == [[0, 1, 3, 2], [0, 2, 1, 3], [1, 0, 2, 3], [3, 2, 1, 0]]
    kinds = [p["layout"] for p in found.values()]
    assert kinds.count("sliced") == 4 and kinds.count("expanded") == 4
    assert kinds.count("offset") == 1


def test_the_plan_is_not_capped_and_goes_tier_by_tier_across_inputs() -> None:
    inputs = [_x(4, 8, 16), _x(3, 5, 7), _x(2, 6, 9)]
    found, _ = L.plan_layouts(tuple(inputs), ["a", "b", "c"], torch)
    assert len(found) == 3 * 12  # the budget that cuts is the judge's (derived_inputs)
    head = [(p["input"], p["name"].split(" ", 1)[1]) for p in found[:9]]
    assert head == [
        (i, what)
        for i in range(3)
        for what in ("row-padded", "column-major", "at storage offset 1")
    ]
    assert [p["layout"] for p in found[-9:]] == ["expanded"] * 9  # stride 0 last: cut first


def test_layouts_of_dimensions_of_length_1_are_skipped_as_the_same_storage() -> None:
    found, skipped = _plan(_x(1, 64))
    why = {s["name"]: s["why"] for s in skipped}
    assert (
        why["x column-major"] == "the same storage as the contiguous input (dimensions of length 1)"
    )
    assert why["x expanded along dim 0 (stride 0)"].startswith("the same storage as the contiguous")
    assert "x row-padded" in found and "x expanded along dim 1 (stride 0)" in found
    assert _plan(_x(64), names=["v"]) == ({}, [])  # 1-D: no layout planned


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int32])
def test_each_layout_keeps_values_shape_dtype_and_grad_in_its_own_storage(dtype) -> None:
    x = _x(4, 8, 16, dtype=dtype)
    if dtype.is_floating_point:
        x.requires_grad_(True)
    found, _ = _plan(x)
    for part in found.values():
        y = L.apply_layout(x, part, torch)
        want = x.detach()
        if part["layout"] == "expanded":
            want = want.narrow(part["dim"], 0, 1).expand(want.shape)
        assert torch.equal(y, want), part["name"]
        assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
        assert y.is_leaf and y.requires_grad == x.requires_grad, part["name"]
        assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
        assert not (y.is_contiguous() and y.storage_offset() == 0 and y.untyped_storage().nbytes()
                    == x.numel() * x.element_size()), f"{part['name']} is the plain layout"  # fmt: skip


def test_permuted_stores_the_dimensions_in_the_order_perm_names() -> None:
    x = _x(4, 8, 16)
    y = L.apply_layout(x, {"layout": "permuted", "perm": [2, 0, 1]}, torch)
    assert y.stride() == (8, 1, 32)  # dim 2 outermost, then 0, then 1 innermost
    assert y.permute(2, 0, 1).is_contiguous()
    col = L.apply_layout(x, {"layout": "column_major"}, torch)  # issue 29's alias
    assert (
        col.stride() == L.apply_layout(x, {"layout": "permuted", "perm": [0, 2, 1]}, torch).stride()
    )
    with pytest.raises(ValueError, match="no permutation of the 3 dimensions"):
        L.apply_layout(x, {"layout": "permuted", "perm": [1, 0]}, torch)


def test_sliced_pads_with_nan_along_its_dimension_so_a_read_past_the_slice_shows() -> None:
    x = _x(4, 8, 16)
    y = L.apply_layout(x, {"layout": "sliced", "dim": 1, "pad": 3}, torch)
    assert y.stride() == (11 * 16, 16, 1) and y.storage_offset() == 0
    past = y.as_strided((4, 3, 16), y.stride(), 8 * 16)  # rows 8..10 of each batch
    assert torch.isnan(past).all()
    z = L.apply_layout(x, {"layout": "sliced", "dim": 0}, torch)
    assert z.stride() == x.stride()  # along dim 0 only a read past the end shows
    assert torch.isnan(z.as_strided((L.ROW_PAD * 128,), (1,), 4 * 128)).all()
    ints = L.apply_layout(torch.arange(12).view(3, 4), {"layout": "row_padded"}, torch)
    assert ints.stride() == (4 + L.ROW_PAD, 1)
    assert (ints.as_strided((L.ROW_PAD,), (1,), 4) == 0).all()  # zero where NaN cannot be


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_offset_starts_inside_the_buffer_off_16_byte_alignment(dtype) -> None:
    x = _x(16, 64, dtype=dtype)
    y = L.apply_layout(x, {"layout": "offset", "elements": L.OFFSET_ELEMENTS}, torch)
    assert y.storage_offset() == 1 and y.is_contiguous()
    assert y.untyped_storage().data_ptr() % 16 == 0  # the buffer is aligned, the view is not
    assert y.data_ptr() % 16 != 0
    before = y.as_strided((1,), (1,), 0)
    assert torch.isnan(before).all()  # a launcher that ignores storage_offset reads NaN
    five = L.apply_layout(x, {"layout": "offset", "elements": 5}, torch)
    assert five.storage_offset() == 5 and torch.equal(five, x)
    v = L.apply_layout(_x(10), {"layout": "offset", "elements": 2}, torch)  # 1-D for the search
    assert v.storage_offset() == 2 and torch.equal(v, _x(10))


def test_expanded_has_stride_0_over_a_buffer_that_holds_all_of_x() -> None:
    x = _x(4, 8, 16)
    y = L.apply_layout(x, {"layout": "expanded", "dim": 1}, torch)
    assert y.stride() == (128, 0, 1)
    assert torch.equal(y, x[:, :1].expand(4, 8, 16))
    assert y.untyped_storage().nbytes() == x.numel() * 4  # ignoring stride 0 reads x's rows
    with pytest.raises(ValueError, match="dim 3 is not a dimension of a 3-D input"):
        L.apply_layout(x, {"layout": "expanded", "dim": 3}, torch)
    with pytest.raises(ValueError, match="length 0"):
        L.apply_layout(torch.empty(0, 4), {"layout": "expanded", "dim": 0}, torch)
    assert L.changes_values({"layout": "expanded", "dim": 0})
    assert not L.changes_values({"layout": "permuted", "perm": [1, 0]})


def test_every_layout_survives_the_exchange_segment_the_candidate_maps() -> None:
    x = _x(4, 8, 16)
    found, _ = _plan(x)
    for part in found.values():
        y = L.apply_layout(x, part, torch)
        (back,) = exchange.share((y,), torch=torch).value(torch)
        assert back.stride() == y.stride() and back.storage_offset() == y.storage_offset()
        assert torch.equal(back, y), part["name"]
        assert back.data_ptr() % 16 == y.data_ptr() % 16  # alignment too (segments align to 64)


def test_layout_class_names_each_class_and_the_aliases() -> None:
    found, _ = _plan(_x(4, 8, 16))
    classes = {L.layout_class(p) for p in found.values()}
    assert classes == {"layout: permuted", "layout: sliced", "layout: offset", "layout: expanded"}
    assert L.layout_class({"layout": "column_major"}) == "layout: permuted"
    assert L.layout_class({"layout": "row_padded"}) == "layout: sliced"
    assert derived_inputs.part_class(found["x at storage offset 1"]) == "layout: offset"


def _desc(**fields) -> dict:
    return {"kind": "layout", "input": 0, "name": "x", **fields}


@pytest.mark.parametrize(
    "fields",
    [
        {"layout": "permuted", "perm": [1, 0]},
        {"layout": "permuted", "perm": [0, 1, 2]},  # identity: harmless, allowed
        {"layout": "permuted", "perm": list(range(8))[::-1]},
        {"layout": "sliced", "dim": 0, "pad": 64},
        {"layout": "sliced", "dim": 7},
        {"layout": "offset", "elements": 1},
        {"layout": "offset", "elements": 64},
        {"layout": "expanded", "dim": 0},
        {"layout": "row_padded"},
        {"layout": "column_major"},
    ],
)
def test_checked_layout_accepts_well_formed_parameters(fields) -> None:
    out = L.checked_layout(_desc(**fields), 1)
    assert out is not None and out["layout"] == fields["layout"]
    assert {k: out[k] for k in fields if k != "pad"} == {
        k: v for k, v in fields.items() if k != "pad"
    }
    assert derived_inputs.checked(_desc(**fields), 1) is not None


@pytest.mark.parametrize(
    "fields",
    [
        {"layout": "permuted", "perm": [1, 1]},
        {"layout": "permuted", "perm": [0]},
        {"layout": "permuted", "perm": list(range(9))},  # N > 8
        {"layout": "permuted", "perm": [True, False]},  # bools are not dimensions
        {"layout": "permuted", "perm": [1.0, 0.0]},
        {"layout": "permuted", "perm": "10"},
        {"layout": "permuted"},
        {"layout": "sliced", "dim": -1},
        {"layout": "sliced", "dim": 8},
        {"layout": "sliced", "dim": 0, "pad": 0},
        {"layout": "sliced", "dim": 0, "pad": 65},
        {"layout": "sliced", "dim": True},
        {"layout": "offset", "elements": 0},
        {"layout": "offset", "elements": 65},
        {"layout": "offset", "elements": 1.5},
        {"layout": "offset"},
        {"layout": "expanded", "dim": "0"},
        {"layout": "transposed"},
        {"layout": None},
    ],
)
def test_checked_layout_refuses_malformed_parameters(fields) -> None:
    assert L.checked_layout(_desc(**fields), 1) is None
    assert derived_inputs.checked(_desc(**fields), 1) is None


def test_checked_layout_refuses_an_input_past_the_harness_and_non_layouts() -> None:
    good = _desc(layout="offset", elements=1)
    assert L.checked_layout(dict(good, input=1), 1) is None
    assert L.checked_layout(dict(good, input=True), 2) is None
    assert L.checked_layout(dict(good, kind="values"), 1) is None
    assert L.checked_layout([good], 1) is None


def test_a_checked_layout_that_does_not_fit_the_input_does_not_apply() -> None:
    x = _x(4, 8, 16)
    desc = L.checked_layout(_desc(layout="permuted", perm=[1, 0]), 1)
    with pytest.raises(ValueError, match="no permutation"):
        derived_inputs.apply((x,), desc, torch)
    desc = L.checked_layout(_desc(layout="sliced", dim=5), 1)
    with pytest.raises(ValueError, match="not a dimension"):
        derived_inputs.apply((x,), desc, torch)
    with pytest.raises(ValueError, match="nothing to permute"):
        derived_inputs.apply((_x(8),), L.checked_layout(_desc(layout="column_major"), 1), torch)
