"""Derived layouts (issues 29 and 52): the harness's own inputs, in every stride pattern a
caller produces.

A harness's inputs are contiguous; a caller's often are not. For a torch tensor of N ≥ 2
dimensions (NumPy inputs of NKI kernels have no layout to vary), by principle, one layout per
class and parameter:

- ``permuted`` (``perm``): the same values stored with the dimensions in another order, as
  ``.transpose()`` / ``.permute()`` views give: ``perm`` lists the dimensions from the
  outermost to the innermost in storage (``x.permute(perm).contiguous()`` viewed back in
  ``x``'s order). Every non-identity permutation for N ≤ 3; for N ≥ 4 (N! grows fast) every
  adjacent swap (the last-two swap among them) and the reversal. The last-two swap is named
  ``column-major`` (issue 29's ``column_major``, still accepted as an alias).
- ``sliced`` (``dim``, ``pad``): a slice of a buffer ``pad`` longer along ``dim``; the padding
  holds NaN (floats; zero otherwise), so a kernel that reads past the slice returns NaN. Along
  the last dimension it is issue 29's ``row_padded`` (still accepted as an alias); along
  dimension d it changes the strides of the dimensions before d; along dimension 0 the strides
  are contiguous and only a read past the end shows.
- ``offset`` (``elements``): a contiguous view that starts ``elements`` elements inside a
  larger buffer (``storage_offset() == elements``), NaN before it. :data:`OFFSET_ELEMENTS` = 1
  makes ``data_ptr()`` leave 16-byte alignment for element sizes 1 to 8 bytes (the buffer
  itself is aligned: torch's CPU allocator, 64 bytes; CUDA's, 512). A launcher that passes
  ``x.untyped_storage().data_ptr()`` reads the NaN and every value one place off. Triton's
  launcher passes ``x.data_ptr()`` (which includes the offset) and specializes each pointer
  argument on ``data_ptr() % 16 == 0`` (``BaseBackend.get_tensor_specialization``: "D", the
  ``tt.divisibility = 16`` attribute); a misaligned pointer gets its own compiled variant
  without that assumption (narrower vector loads, one more compile), correct either way.
  Kernels that require alignment themselves (TMA tensor descriptors: a 16-byte aligned base)
  fail on it, and then the baseline does too and the judge skips it.
- ``expanded`` (``dim``): ``x.narrow(dim, 0, 1).expand(x.shape)`` of a copy of ``x``, stride
  0 along ``dim``: the values then repeat along ``dim`` (they are not ``x``'s values: the
  reference is computed on them). The buffer holds all of ``x``, as a caller's
  ``t[:1].expand(...)`` keeps its tensor's, so a kernel that ignores the stride of 0 reads
  ``x``'s other values (wrong, and never past the buffer). Many kernels do not accept a stride of 0 (a write into such an input raises; a
  kernel that assumes a unit last stride reads the wrong values): the judge uses it only where
  the baseline is correct on it (:mod:`.derived_checks`).

Descriptor (JSON, carried in requests and results like :mod:`.derived`'s shapes)::

    {"kind": "layout", "name": "x permuted (1, 0, 2)", "input": 0, "layout": "permuted",
     "perm": [1, 0, 2], "inputs": "x: 4×8×16, strides (16, 64, 1)"}

with ``perm`` (``permuted``), ``dim`` and ``pad`` (``sliced``), ``elements`` (``offset``) or
``dim`` (``expanded``). :func:`apply_layout` is pure (a new tensor; ``x`` is not changed), so
a property-based search may emit these descriptors with parameters of its own
(:func:`checked_layout` bounds them). Whether a layout is usable (the reference and the
baseline correct on it) is the judge's decision (:mod:`.derived_checks`). Standard library at
module level; torch comes with the inputs.
"""

from __future__ import annotations

import itertools

from .compare import is_tensor
from .derived_values import input_text

#: The layout classes, in the order :func:`plan_layouts` makes them per tier.
LAYOUTS = ("permuted", "sliced", "offset", "expanded")
#: Issue 29's names, accepted in descriptors: ``row_padded`` is ``sliced`` along the last
#: dimension, ``column_major`` is ``permuted`` with the last two dimensions swapped.
ALIASES = ("row_padded", "column_major")
#: Extra elements along the sliced dimension of a ``sliced`` input by default (along the last
#: one, the row stride is the row length + this: issue 29's value).
ROW_PAD = 8
#: Elements before an ``offset`` input's first one: 1 breaks 16-byte alignment for every
#: element size from 1 to 8 bytes.
OFFSET_ELEMENTS = 1
#: Bounds on parameters from a request (untrusted JSON): most dimensions of a permuted input,
#: most ``pad`` and ``elements``.
MAX_DIMS = 8
MAX_EXTRA = 64
#: Dimensions from which :func:`plan_layouts` makes only the adjacent swaps and the reversal
#: instead of every permutation (4! − 1 = 23 would each cost a checked call).
ALL_PERMS_UP_TO = 3


def layout_class(part: dict) -> str:
    """The class a layout part checks, for the display: ``layout: permuted``, ``layout:
    sliced``, ``layout: offset``, ``layout: expanded`` (issue 29's ``column_major`` counts as
    permuted, ``row_padded`` as sliced)."""
    layout = part.get("layout") if isinstance(part, dict) else None
    layout = {"column_major": "permuted", "row_padded": "sliced"}.get(layout, layout)
    return f"layout: {layout}"


def changes_values(part: dict) -> bool:
    """True for a layout that changes the values (``expanded``: they repeat along ``dim``),
    so the reference's finiteness matters on it as on derived values."""
    return isinstance(part, dict) and part.get("layout") == "expanded"


def _perm_of(desc: dict, n: int) -> list[int]:
    """The permutation of a ``permuted`` / ``column_major`` descriptor for ``n`` dimensions;
    ValueError when it is no permutation of ``range(n)``."""
    if desc.get("layout") == "column_major":
        return list(range(n - 2)) + [n - 1, n - 2]
    perm = desc.get("perm")
    if not isinstance(perm, (list, tuple)) or sorted(perm) != list(range(n)):
        raise ValueError(f"perm {str(perm)[:60]} is no permutation of the {n} dimensions")
    return [int(p) for p in perm]


def _dim_of(desc: dict, n: int) -> int:
    """The dimension of a ``sliced`` / ``expanded`` / ``row_padded`` descriptor; ValueError
    when ``n`` dimensions have none such."""
    if desc.get("layout") == "row_padded":
        return n - 1
    dim = desc.get("dim")
    if type(dim) is not int or not 0 <= dim < n:
        raise ValueError(f"dim {str(dim)[:20]} is not a dimension of a {n}-D input")
    return dim


def _fill(t, torch) -> None:
    """NaN in a floating or complex ``t``; zero in any other."""
    t.fill_(float("nan") if (t.is_floating_point() or t.is_complex()) else 0)


def apply_layout(x, desc: dict, torch):
    """A new torch tensor holding ``x``'s values (``expanded``: ``x``'s first slice along
    ``dim``, repeated) in the layout ``desc`` describes (module docstring); same shape, dtype
    and device as ``x``, a leaf that requires grad when ``x`` does; ``x`` is not changed and
    shares no storage with it. Raises ValueError when ``x`` is no tensor, the layout is
    unknown, or its parameters do not fit ``x`` (a ``perm`` of another length, a ``dim`` past
    its dimensions; ``permuted`` needs 2 or more dimensions)."""
    layout = desc.get("layout")
    if not is_tensor(x) or x.dim() < 1:
        raise ValueError(f"input #{desc.get('input')} is no tensor of 1 or more dimensions")
    base = x.detach()
    n, shape = base.dim(), tuple(base.shape)
    if layout in ("permuted", "column_major"):
        if n < 2:
            raise ValueError(f"input #{desc.get('input')} has 1 dimension: nothing to permute")
        perm = _perm_of(desc, n)
        inverse = [perm.index(d) for d in range(n)]
        out = base.permute(perm).contiguous().permute(inverse)
    elif layout in ("sliced", "row_padded"):
        dim = _dim_of(desc, n)
        pad = _bounded(desc.get("pad", ROW_PAD), "pad")
        wide_shape = list(shape)
        wide_shape[dim] += pad
        wide = torch.empty(wide_shape, dtype=base.dtype, device=base.device)
        _fill(wide, torch)
        out = wide.narrow(dim, 0, shape[dim])
        out.copy_(base)
    elif layout == "offset":
        elements = _bounded(desc.get("elements", OFFSET_ELEMENTS), "elements")
        buf = torch.empty(elements + base.numel(), dtype=base.dtype, device=base.device)
        _fill(buf, torch)
        out = buf[elements:].view(shape)
        out.copy_(base)
    elif layout == "expanded":
        dim = _dim_of(desc, n)
        if shape[dim] == 0:
            raise ValueError(f"dimension {dim} has length 0: nothing to repeat")
        whole = base.clone(memory_format=torch.contiguous_format)
        out = whole.narrow(dim, 0, 1).expand(shape)
    else:
        raise ValueError(f"unknown layout {str(layout)[:40]!r}")
    return out.requires_grad_(True) if x.requires_grad else out


def _bounded(value, what: str) -> int:
    if type(value) is not int or not 1 <= value <= MAX_EXTRA:
        raise ValueError(f"{what} {str(value)[:20]} is not an integer in 1..{MAX_EXTRA}")
    return value


def _perms(n: int) -> list[tuple[int, ...]]:
    """The permutations :func:`plan_layouts` makes for ``n`` dimensions, most telling first:
    the last-two swap (column-major), the other adjacent swaps from the innermost out, the
    reversal, then (``n`` ≤ :data:`ALL_PERMS_UP_TO`) every other non-identity one."""
    ident = tuple(range(n))
    found: list[tuple[int, ...]] = []
    for k in range(n - 2, -1, -1):
        swap = list(ident)
        swap[k], swap[k + 1] = swap[k + 1], swap[k]
        found.append(tuple(swap))
    found.append(ident[::-1])
    if n <= ALL_PERMS_UP_TO:
        found += list(itertools.permutations(ident))
    out: list[tuple[int, ...]] = []
    for p in found:
        if p != ident and p not in out:
            out.append(p)
    return out


def _name(name: str, part: dict, n: int) -> str:
    layout = part["layout"]
    if layout == "permuted":
        if list(part["perm"]) == list(range(n - 2)) + [n - 1, n - 2]:
            return f"{name} column-major"
        return f"{name} permuted ({', '.join(str(p) for p in part['perm'])})"
    if layout == "sliced":
        if part["dim"] == n - 1:
            return f"{name} row-padded"
        return f"{name} sliced along dim {part['dim']}"
    if layout == "offset":
        return f"{name} at storage offset {part['elements']}"
    return f"{name} expanded along dim {part['dim']} (stride 0)"


def _candidates(index: int, n: int) -> list[tuple[int, dict]]:
    """``(tier, part)`` of every layout of input ``index`` (``n`` dimensions); tier 0: the
    patterns callers make most (a last-dimension slice, the last two swapped, an offset),
    1: the other permutations and slices, 2: stride 0."""
    perms = _perms(n)
    out: list[tuple[int, dict]] = [
        (0, {"layout": "sliced", "dim": n - 1, "pad": ROW_PAD}),
        (0, {"layout": "permuted", "perm": list(perms[0])}),
        (0, {"layout": "offset", "elements": OFFSET_ELEMENTS}),
    ]
    out += [(1, {"layout": "permuted", "perm": list(p)}) for p in perms[1:]]
    out += [(1, {"layout": "sliced", "dim": d, "pad": ROW_PAD}) for d in range(n - 2, -1, -1)]
    out += [(2, {"layout": "expanded", "dim": d}) for d in range(n)]
    return [(tier, dict(part, kind="layout", input=index)) for tier, part in out]


def _storage(t) -> tuple:
    """What a kernel sees of ``t``'s storage: the strides of its dimensions longer than 1,
    its offset and how many elements its buffer holds."""
    dims = tuple((int(s), int(st)) for s, st in zip(t.shape, t.stride(), strict=True) if s != 1)
    return dims, int(t.storage_offset()), t.untyped_storage().nbytes() // max(t.element_size(), 1)


def plan_layouts(inputs: tuple, names: list[str], torch) -> tuple[list[dict], list[dict]]:
    """Every layout derivation of the torch tensor inputs of 2 or more dimensions
    (``(descriptors, skipped)``), not capped: tier by tier (:func:`_candidates`: the
    commonest patterns first, stride 0 last), within a tier input by input, so that a budget
    that cuts from the end cuts the least telling. A layout that gives the same storage as the
    contiguous input, or as one made before it (dimensions of length 1), is skipped with that
    reason. Never raises for odd inputs."""
    tiers: list[list[tuple[int, dict]]] = []
    skipped: list[dict] = []
    for i, x in enumerate(inputs):
        if not is_tensor(x) or x.dim() < 2:
            continue
        n = x.dim()
        plain = x.detach().clone(memory_format=torch.contiguous_format)
        seen = {_storage(plain): "the contiguous input"}
        for tier, part in _candidates(i, n):
            part["name"] = _name(names[i], part, n)
            try:
                shown = apply_layout(x, part, torch)
            except (ValueError, RuntimeError) as exc:
                skipped.append({"name": part["name"], "why": f"not derived: {exc}"})
                continue
            key = _storage(shown)
            if key in seen:
                why = f"the same storage as {seen[key]} (dimensions of length 1)"
                skipped.append({"name": part["name"], "why": why})
                continue
            seen[key] = part["name"]
            part["inputs"] = input_text(names[i], shown, torch_layout=True)
            tiers.append((tier, part))
    ordered = [part for _, part in sorted(tiers, key=lambda tp: tp[0])]
    return ordered, skipped


def checked_layout(desc, n_inputs: int) -> dict | None:
    """A layout descriptor from a request (untrusted JSON) with its keys, types and parameters
    checked, or None when it is malformed or names an input past ``n_inputs``: ``perm`` a
    permutation of ``range(N)`` with 2 ≤ N ≤ :data:`MAX_DIMS`, ``dim`` an int in
    ``0..MAX_DIMS-1``, ``pad`` and ``elements`` ints in ``1..MAX_EXTRA``. Whether a ``perm`` or
    ``dim`` fits the input's dimensions is :func:`apply_layout`'s check (the reference process
    then skips it: "the derivation does not apply")."""
    if not isinstance(desc, dict):
        return None
    index = desc.get("input")
    if type(index) is not int or not 0 <= index < n_inputs or desc.get("kind") != "layout":
        return None
    layout = desc.get("layout")
    out = {k: str(desc.get(k) or "")[:200] for k in ("name", "inputs")}
    out.update(kind="layout", input=index, layout=layout)
    if layout in ALIASES:
        return out
    if layout == "permuted":
        perm = desc.get("perm")
        ok = (
            isinstance(perm, list)
            and 2 <= len(perm) <= MAX_DIMS
            and all(type(p) is int for p in perm)
            and sorted(perm) == list(range(len(perm)))
        )
        return dict(out, perm=list(perm)) if ok else None
    if layout in ("sliced", "expanded"):
        dim = desc.get("dim")
        if type(dim) is not int or not 0 <= dim < MAX_DIMS:
            return None
        if layout == "expanded":
            return dict(out, dim=dim)
        pad = desc.get("pad", ROW_PAD)
        return dict(out, dim=dim, pad=pad) if _in_extra(pad) else None
    if layout == "offset":
        elements = desc.get("elements")
        return dict(out, elements=elements) if _in_extra(elements) else None
    return None


def _in_extra(value) -> bool:
    return type(value) is int and 1 <= value <= MAX_EXTRA
