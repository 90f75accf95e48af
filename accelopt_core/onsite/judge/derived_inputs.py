"""Derived inputs (issues 22 and 29): shapes, values and layouts made from the harness's own
inputs, checked in as few calls as the baseline allows.

:mod:`.derived` derives shapes (one size symbol at a time), :mod:`.derived_values` values and
layouts. Each is one **part**. Checking each part alone would cost one interpreted call per
part (softmax: 4 shapes + 4 values + 2 layouts), so parts are packed into **slots**
(:func:`combine`), one checked call each, of at most one shape, one value part and one layout
(softmax: 4 slots). A candidate wrong on any part of a slot is wrong on the slot. Which parts
share a slot, and which seed a slot is made from, is the judge's business
(:func:`.derived_checks.find_usable`): it keeps only slots and parts the baseline is correct
on.

A descriptor is a part (``kind`` ``shape``, ``values`` or ``layout``) or a slot::

    {"kind": "combined", "name": "x[0] 16→15, x × 250 (large), x row-padded",
     "inputs": "x: 15×64", "parts": [part, ...]}

Parts apply in order: the shape first (it makes contiguous copies), then values, then the
layout. Standard library at module level.
"""

from __future__ import annotations

import math

from . import derived, derived_layouts, derived_values
from .compare import is_array, is_tensor

#: Most parts in one slot (a shape, a value part, a layout), and most slots, accepted from a
#: request.
MAX_PARTS = 3
#: Most derived inputs (slots and layouts) the baseline's evaluation checks; the parts past it
#: are not checked on every candidate but left to the property-based search (issue 52), named
#: in ``deferred``. Which of the checked ones every candidate is checked on is decided by the
#: cost budget (:data:`BUDGET_SHARE`, :func:`.derived_checks.find_usable`).
MAX_CHECKED = 16
#: The baseline's own derived checks (once per search, and ``accelopt profile``) stop taking
#: new derived inputs past this share of the rest of its evaluation (the first
#: :data:`MIN_USED` slots and the first 2 layouts are always checked); the rest is left to the
#: search. Before issue 52 they took about half (a 64 MiB scaling harness: 9.3 of 28.6 s).
BASELINE_SHARE = 0.5
#: The first derived inputs every candidate is checked on whatever the budget (at least the
#: correctness seeds after the first, which they replace): the verdicts on the first value
#: classes of each kind never depend on a machine's load.
MIN_USED = 4
#: The derived checks of a candidate cost at most this share of its evaluation (issue 52,
#: item 4: 20 %), besides the correctness seeds they replace.
BUDGET_SHARE = 0.2
#: A derived input's check time measured on the baseline, times this, is what it adds to a
#: candidate's evaluation: the measure leaves out the candidate's side of the exchange and the
#: plain check it displaces only in part (benchmarks/derived_inputs.py, 2-core box: with the
#: measured time alone, the single-shape softmax's candidates cost +26 % and the reduction's
#: +29 % for a 20 % budget).
COST_FACTOR = 2.0
#: The order of the value parts of the inputs after the first floating one (the data): the
#: kinds that catch most first, so that a budget cuts the least telling ones.
_LATER_ORDER = ("large", "offset", "tiny", "outliers")
MAX_DESCRIPTORS = 64


def kind(desc: dict) -> str:
    """A descriptor's kind; descriptors before issue 29 carry none and are shapes."""
    return str(desc.get("kind") or "shape")


def parts(desc: dict) -> list[dict]:
    """The parts of a descriptor: its ``parts`` (a slot, a drawn example), or itself."""
    return list(desc["parts"]) if kind(desc) in ("combined", "drawn") else [desc]


def plan(inputs: tuple, names: list[str] | None, *, values=None, shapes: bool = True,
         layouts: bool = True, torch=None) -> dict:  # fmt: skip
    """Every part derived from ``inputs`` (one seed's ``get_inputs``), shapes, then values,
    then layouts (the judge combines them into slots, :func:`combine`): ``{"derived": [part,
    ...], "skipped": [{"name", "why"}, ...]}``. ``values`` is
    ``BENCH["values"]``; ``shapes`` / ``layouts`` turn those kinds off (NKI kernels get values
    only); ``torch`` is needed for layouts. Never raises for odd inputs."""
    inputs = tuple(inputs)
    names = derived.input_names(inputs, names)
    if not any(is_tensor(x) or is_array(x) for x in inputs):
        kinds = ", ".join(sorted({type(v).__name__ for v in inputs})) or "none"
        why = f"the inputs ({kinds}) hold no tensor: no shape, value or layout to derive"
        return {"derived": [], "skipped": [{"name": "all inputs", "why": why}]}
    skipped: list[dict] = []
    shape_parts: list[dict] = []
    if shapes:
        found = derived.plan(inputs, names)
        shape_parts, skipped = found["derived"], list(found["skipped"])
    value_parts, why = derived_values.plan_values(inputs, names, values)
    skipped += why
    layout_parts: list[dict] = []
    if layouts and torch is not None:
        layout_parts, why = derived_layouts.plan_layouts(inputs, names, torch)
        skipped += why
    value_parts = _ordered(value_parts)
    return {
        "derived": shape_parts + value_parts + layout_parts,
        "skipped": skipped,
        "signature": signature(inputs, names),
        "symbols": searchable_symbols(inputs, names) if shapes else [],
    }


def signature(inputs: tuple, names: list[str]) -> list[dict]:
    """What the property-based search (issue 52) needs to know of each input, as JSON:
    ``{"name", "kind": "tensor" | "array" | "int" | "float" | "other", "dtype", "shape",
    "floating"}`` (``dtype`` / ``shape`` for tensors and arrays only)."""
    out = []
    for name, x in zip(names, inputs, strict=False):
        row: dict = {"name": name, "kind": "other", "floating": False}
        if is_tensor(x) or is_array(x):
            row["kind"] = "tensor" if is_tensor(x) else "array"
            row["dtype"] = derived_values.dtype_name(x)
            row["shape"] = [int(n) for n in x.shape]
            row["floating"] = row["dtype"] in derived_values.VALUE_TARGETS
        elif isinstance(x, bool):
            row["kind"] = "other"
        elif isinstance(x, int):
            row["kind"] = "int"
        elif isinstance(x, float):
            row["kind"] = "float"
        out.append(row)
    return out


def searchable_symbols(inputs: tuple, names: list[str]) -> list[dict]:
    """The size symbols (:func:`.derived.symbols`) a derivation may change: those no ``int``
    input equals (a size argument), at most :data:`.derived.MAX_SYMBOLS`."""
    found = [
        s
        for s in derived.symbols(inputs)
        if derived._size_argument(inputs, names, s["length"]) is None
    ]
    return found[: derived.MAX_SYMBOLS]


def _ordered(value_parts: list[dict]) -> list[dict]:
    """The first floating input's value parts, then the others' by :data:`_LATER_ORDER`
    (``weight large, bias large, weight offset, ...``)."""
    if not value_parts:
        return []
    first = value_parts[0]["input"]
    rest = [p for p in value_parts if p["input"] != first]
    ops = list(_LATER_ORDER) + [p["op"] for p in value_parts if p["op"] not in _LATER_ORDER]
    rest.sort(key=lambda p: (ops.index(p["op"]), p["input"]))  # stable: the planner's order
    return [p for p in value_parts if p["input"] == first] + rest


def combine(shape_parts: list[dict], value_parts: list[dict], layout_parts: list[dict]) -> list:
    """Slots of at most one shape, one value part and one layout, in order (module
    docstring); a slot of one part is that part. Value parts of two inputs never share a
    slot: one input's large values would hide how another's offset is handled (a layer norm's
    bias scaled up dwarfs its normalized term)."""
    count = max(len(shape_parts), len(value_parts), len(layout_parts))
    out = []
    for k in range(count):
        slot = [found[k] for found in (shape_parts, value_parts, layout_parts) if k < len(found)]
        out.append(slot[0] if len(slot) == 1 else combined(slot))
    return out


def combined(slot: list[dict]) -> dict:
    """The descriptor of a slot of several parts."""
    shape = next((p for p in slot if kind(p) == "shape"), None)
    shown = shape["inputs"] if shape else next((p.get("inputs") for p in slot), "")
    return {
        "kind": "combined",
        "name": ", ".join(str(p["name"]) for p in slot),
        "inputs": shown,
        "parts": slot,
    }


def apply(inputs: tuple, desc: dict, torch) -> tuple:
    """The inputs of descriptor ``desc``: its shape (:func:`.derived.apply`), then its values
    (:func:`.derived_values.apply_values`), then its layout
    (:func:`.derived_layouts.apply_layout`). Raises ValueError when a part does not fit the
    inputs (the harness's inputs changed since the descriptor was made)."""
    ordered = sorted(parts(desc), key=lambda p: _APPLY_ORDER.index(kind(p)))
    out = tuple(inputs)
    for part in ordered:
        if kind(part) == "shape":
            out = derived.apply(out, part, torch)
            continue
        index = int(part["input"])
        if index >= len(out):
            raise ValueError(f"input #{index} does not exist ({len(out)} inputs)")
        new = list(out)
        if kind(part) == "data":
            new[index] = apply_data(out[index], part, torch)
        elif kind(part) == "values":
            new[index] = derived_values.apply_values(out[index], part)
        else:
            new[index] = derived_layouts.apply_layout(out[index], part, torch)
        out = tuple(new)
    return out


def has_values(desc: dict) -> bool:
    """True when ``desc`` changes values (the reference must then stay finite on it): a value
    part, drawn data, or a layout that repeats values (``expanded``)."""
    return any(
        kind(p) in ("values", "data") or (kind(p) == "layout" and derived_layouts.changes_values(p))
        for p in parts(desc)
    )


#: The order in which a slot's parts apply: shapes make contiguous copies, data replaces the
#: values of the resized input, value derivations transform them, a layout stores them.
_APPLY_ORDER = ("shape", "data", "values", "layout")
#: Most elements a ``data`` part (issue 52's search: values drawn by Hypothesis) carries.
MAX_DATA = 256
#: Most parts of a ``drawn`` example: a shape per size symbol, one data or value part and one
#: layout per input.
MAX_DRAWN_PARTS = 24


def apply_data(x, part: dict, torch):
    """``x`` (a torch tensor) with its values replaced by ``part["data"]`` (a flat list of
    numbers, row-major, as many as ``x`` has elements): a new contiguous tensor of ``x``'s
    shape, dtype and device (a leaf that requires grad when ``x`` does). Raises ValueError
    when ``x`` is no torch tensor or the counts differ."""
    data = part.get("data")
    if not is_tensor(x) or not isinstance(data, list):
        raise ValueError(f"input #{part.get('input')} is no torch tensor to hold drawn values")
    if len(data) != x.numel():
        raise ValueError(
            f"input #{part.get('input')} has {x.numel()} elements, the drawn values {len(data)}"
        )
    out = torch.tensor(data, dtype=torch.float64).to(dtype=x.dtype, device=x.device)
    out = out.reshape(tuple(x.shape)).contiguous()
    return out.requires_grad_(True) if x.requires_grad else out


def _checked_data(desc: dict, n_inputs: int) -> dict | None:
    index, data = desc.get("input"), desc.get("data")
    if type(index) is not int or not 0 <= index < n_inputs or not isinstance(data, list):
        return None
    ok = len(data) <= MAX_DATA and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in data
    )
    if not ok:
        return None
    out = {k: str(desc.get(k) or "")[:200] for k in ("name", "inputs")}
    return dict(out, kind="data", input=index, data=[float(v) for v in data])


def drawn(name: str, found: list[dict], names: list[str] | None = None) -> dict:
    """The descriptor of one example of the property-based search (issue 52): several parts
    (a shape per size symbol, per input one data or value part and one layout), applied in
    :data:`_APPLY_ORDER`; ``names`` are the inputs' names (for the counterexample's text)."""
    out = {"kind": "drawn", "name": name, "inputs": "", "parts": list(found)}
    if names:
        out["names"] = [str(n)[:40] for n in names]
    return out


def _checked_drawn(desc: dict, n_inputs: int) -> dict | None:
    raw = desc.get("parts")
    if not isinstance(raw, list) or len(raw) > MAX_DRAWN_PARTS:
        return None
    found = [_checked_one(p, n_inputs) for p in raw]
    if any(p is None for p in found):
        return None
    symbols = [p["symbol"] for p in found if kind(p) == "shape"]
    valued = [p["input"] for p in found if kind(p) in ("values", "data")]
    laid = [p["input"] for p in found if kind(p) == "layout"]
    if any(len(set(x)) != len(x) for x in (symbols, valued, laid)):
        return None
    names = desc.get("names")
    names = [str(n)[:40] for n in names[:64]] if isinstance(names, list) else None
    return drawn(str(desc.get("name") or "")[:200], found, names)


def shape_only(desc: dict) -> bool:
    """True for a derived shape alone (messages then say "derived shape", as in issue 22)."""
    return kind(desc) == "shape"


def _checked_one(desc, n_inputs: int) -> dict | None:
    if not isinstance(desc, dict):
        return None
    if kind(desc) == "shape":
        found = derived.checked(desc, n_inputs)
        return dict(found, kind="shape") if found else None
    if kind(desc) == "layout":
        return derived_layouts.checked_layout(desc, n_inputs)
    if kind(desc) == "data":
        return _checked_data(desc, n_inputs)
    return derived_values.checked_part(desc, n_inputs)


def checked(desc, n_inputs: int) -> dict | None:
    """``desc`` (from a request: untrusted JSON) with every part's keys and types checked, or
    None when it is malformed: an unknown kind, a part naming an input past ``n_inputs``, more
    than one shape, value part or layout in a slot, more than :data:`MAX_PARTS` parts."""
    if not isinstance(desc, dict):
        return None
    if kind(desc) == "drawn":
        out = _checked_drawn(desc, n_inputs)
    elif kind(desc) == "combined":
        out = _checked_slot(desc, n_inputs)
    else:
        out = _checked_one(desc, n_inputs)
    if out is not None:
        for key in ("seed", "shape"):
            if key in desc:
                out[key] = desc[key]
    return out


def _checked_slot(desc: dict, n_inputs: int) -> dict | None:
    raw = desc.get("parts")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_PARTS:
        return None
    found = [_checked_one(p, n_inputs) for p in raw]
    if any(p is None for p in found):
        return None
    kinds = [kind(p) for p in found]
    value_inputs = [p["input"] for p in found if kind(p) == "values"]
    if kinds.count("shape") > 1 or kinds.count("layout") > 1 or len(value_inputs) > 1:
        return None
    return combined(found)


def label(desc: dict) -> str:
    """``x[1] 64→63 (x: 16×63)``, ``x + 512 (offset) (x: 16×64)``: how messages name it."""
    inputs = desc.get("inputs")
    return f"{desc.get('name')} ({inputs})" if inputs else str(desc.get("name"))


def what(desc: dict) -> str:
    """``derived shape`` for a shape alone (issue 22's words), else ``derived input``."""
    return "derived shape" if shape_only(desc) else "derived input"


def part_class(part: dict) -> str:
    """The class a part checks, as the display counts them (issue 52): ``shape``, ``values:
    <class>`` (:func:`.derived_values.value_class` where it names one), ``layout: <class>``
    (:func:`.derived_layouts.layout_class`)."""
    k = kind(part)
    if k == "values":
        named = getattr(derived_values, "value_class", None)
        return named(part) if named else f"values: {part.get('op')}"
    if k == "layout":
        named = getattr(derived_layouts, "layout_class", None)
        return named(part) if named else f"layout: {part.get('layout')}"
    return "shape"


def classes_count(descs: list) -> dict[str, int]:
    """How many parts of each class (:func:`part_class`) ``descs`` hold, in first-seen order:
    ``{"shape": 4, "values: offset": 2, "layout: permuted": 1}``."""
    counts: dict[str, int] = {}
    for desc in descs:
        if isinstance(desc, dict):
            for part in parts(desc):
                if isinstance(part, dict):
                    name = part_class(part)
                    counts[name] = counts.get(name, 0) + 1
    return counts


def kinds_count(descs: list) -> dict[str, int]:
    """How many parts of each kind ``descs`` hold: ``{"shape": 4, "values": 4, "layout": 2}``."""
    counts = {"shape": 0, "values": 0, "layout": 0}
    for desc in descs:
        if isinstance(desc, dict):
            for part in parts(desc):
                if isinstance(part, dict) and kind(part) in counts:
                    counts[kind(part)] += 1
    return counts
