"""Derived layouts (issue 29): the harness's own inputs, same values, in other storage.

A harness's inputs are contiguous; a caller's often are not. Torch tensors of 2 or more
dimensions (NumPy inputs of NKI kernels have no layout to vary):

- ``row_padded``: a slice of a wider buffer along the last dimension (row stride = row length
  + :data:`ROW_PAD`); the padding holds NaN (floats), so a kernel that reads past a row's end
  returns NaN;
- ``column_major``: the last two dimensions stored transposed (``x.t().contiguous().t()``).

Descriptor (JSON, carried in requests and results like :mod:`.derived`'s shapes)::

    {"kind": "layout", "name": "x column-major", "input": 0, "layout": "column_major",
     "inputs": "x: 16×64, strides (1, 16)"}

Whether a layout is usable (the reference and the baseline correct on it) is the judge's
decision (:mod:`.derived_checks`). Standard library at module level; torch comes with the
inputs.
"""

from __future__ import annotations

from .compare import is_tensor
from .derived_values import input_text

#: The layout derivations, in the order they are made.
LAYOUTS = ("row_padded", "column_major")
#: Extra elements per row of a ``row_padded`` input (its row stride is the row length + this).
ROW_PAD = 8


def layout_desc(name: str, index: int, layout: str, x) -> tuple[dict | None, str | None]:
    """The descriptor of layout ``layout`` for torch tensor ``x``, or ``(None, why)``."""
    shape = tuple(int(s) for s in x.shape)
    if len(shape) < 2:
        return None, "fewer than 2 dimensions: one layout only"
    if layout == "column_major" and (shape[-1] < 2 or shape[-2] < 2):
        return None, "a row or a column of length 1: column-major is the same storage"
    label = f"{name} row-padded" if layout == "row_padded" else f"{name} column-major"
    return {"kind": "layout", "name": label, "input": index, "layout": layout}, None


def apply_layout(x, desc: dict, torch):
    """A non-contiguous torch tensor holding ``x``'s values in the layout ``desc["layout"]``
    (module docstring); same shape, dtype and device, a leaf that requires grad when ``x``
    does. Raises ValueError for an unknown layout or a tensor of fewer than 2 dimensions."""
    layout = desc.get("layout")
    if not is_tensor(x) or x.dim() < 2:
        raise ValueError(f"input #{desc.get('input')} is no tensor of 2 or more dimensions")
    base = x.detach()
    if layout == "row_padded":
        shape = tuple(base.shape)
        wide = torch.empty(*shape[:-1], shape[-1] + ROW_PAD, dtype=base.dtype, device=base.device)
        wide.fill_(float("nan") if base.is_floating_point() else 0)
        out = wide[..., : shape[-1]]
        out.copy_(base)
    elif layout == "column_major":
        out = base.transpose(-1, -2).contiguous().transpose(-1, -2)
    else:
        raise ValueError(f"unknown layout {layout!r}")
    return out.requires_grad_(True) if x.requires_grad else out


def plan_layouts(inputs: tuple, names: list[str], torch) -> tuple[list[dict], list[dict]]:
    """The layout derivations of the torch tensor inputs of 2 or more dimensions
    (``(descriptors, skipped)``)."""
    found: list[dict] = []
    skipped: list[dict] = []
    for i, x in enumerate(inputs):
        if not is_tensor(x) or x.dim() < 2:
            continue
        for layout in LAYOUTS:
            desc, why = layout_desc(names[i], i, layout, x)
            if desc is None:
                skipped.append({"name": f"{names[i]} {layout.replace('_', '-')}", "why": why})
                continue
            shown = apply_layout(x, desc, torch)
            found.append(dict(desc, inputs=input_text(names[i], shown, torch_layout=True)))
    return found, skipped


def checked_layout(desc, n_inputs: int) -> dict | None:
    """A layout descriptor from a request (untrusted JSON) with its keys and types checked, or
    None when it is malformed or names an input past ``n_inputs``."""
    if not isinstance(desc, dict):
        return None
    index = desc.get("input")
    if type(index) is not int or not 0 <= index < n_inputs:
        return None
    if desc.get("kind") != "layout" or desc.get("layout") not in LAYOUTS:
        return None
    out = {k: str(desc.get(k) or "")[:200] for k in ("name", "inputs")}
    return dict(out, kind="layout", input=index, layout=desc["layout"])
