"""Derived values (issue 29): the harness's own inputs, with values a user meets every
day and a random harness never draws.

A harness usually draws ``torch.randn`` inputs: magnitudes around 1, mean 0, no outliers, every
tensor contiguous. A rewrite that drops a stabilisation step (softmax without the max), takes a
variance in one pass (E[x²] − E[x]²), accumulates in fp16, drops an epsilon or assumes a row
stride is correct on those inputs and wrong on ordinary ones. So from the inputs of one seed:

**Values** (floating-point inputs only; integer and boolean inputs, indices, lengths and masks
are left alone), one derivation per input and kind, with factors per dtype
(:data:`VALUE_TARGETS`) that keep ordinary references finite:

- ``large``: scaled so that max|x| is 1000 (200 in fp16): ``exp`` of such logits overflows;
- ``tiny``: scaled so that max|x| is 1e-4 (1e-3 in fp16): an epsilon then dominates the
  variance, and squares underflow in low precision;
- ``offset``: shifted by 512 spreads (std; 256 in fp16, 16 in bf16, whose 8-bit mantissa
  would round the spread away): E[x²] − E[x]² cancels catastrophically;
- ``outliers``: two entries per row (last dimension) set to ±50 max|x| (30 in fp16).

Layouts (the same values in other storage) are :mod:`.derived_layouts`'s.

Descriptors (JSON, carried in requests and results like :mod:`.derived`'s shapes)::

    {"kind": "values", "name": "x + 512 (offset)", "input": 0, "op": "offset", "value": 512.0,
     "inputs": "x: 16×64"}

``value`` is the factor (``large``, ``tiny``), the offset (``offset``) or the outliers'
magnitude (``outliers``), computed once from the seed's inputs, so every evaluation applies the
same numbers to the same inputs. A harness bounds or turns off value derivations per input with
``BENCH["values"]`` (:func:`value_bounds`). Whether a derivation is usable (the reference finite
on it, the baseline correct on it) is the judge's decision (:mod:`.derived_checks`), never made
here. Standard library at module level; torch / NumPy come with the inputs.
"""

from __future__ import annotations

import math

from .compare import dtype_name, is_array, is_tensor

#: Per dtype: max|x| after ``large`` and after ``tiny``, the ``offset`` in spreads (standard
#: deviations) and the outliers' magnitude in max|x|. fp16's largest finite value is 65504,
#: so its large values stay at 200 (squares fit) and its tiny ones above its normal range
#: (6.1e-5); bf16 has fp32's range but an 8-bit mantissa (IEEE 754; bfloat16: Google's TPU
#: documentation), so an offset of 512 spreads would round the spread away.
VALUE_TARGETS: dict[str, dict[str, float]] = {
    "float64": {"large": 1e3, "tiny": 1e-4, "offset": 512.0, "outliers": 50.0},
    "float32": {"large": 1e3, "tiny": 1e-4, "offset": 512.0, "outliers": 50.0},
    "bfloat16": {"large": 1e3, "tiny": 1e-4, "offset": 16.0, "outliers": 50.0},
    "float16": {"large": 200.0, "tiny": 1e-3, "offset": 256.0, "outliers": 30.0},
}
#: The value derivations, in the order they are made.
VALUE_OPS = ("large", "tiny", "offset", "outliers")
#: Outliers planted per row.
OUTLIERS_PER_ROW = 2


def _sig(value: float) -> float:
    """``value`` rounded to 3 significant digits (the number named is the number applied)."""
    return float(f"{value:.3g}")


def _float64(x):
    """A float64 NumPy copy of ``x`` (torch or NumPy), for statistics."""
    import numpy as np

    if is_tensor(x):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def stats(x) -> dict[str, float] | None:
    """``{"max_abs", "std", "min", "max"}`` of ``x``'s finite entries (float64), or None when
    it has none."""
    import numpy as np

    v = _float64(x)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return None
    return {
        "max_abs": float(np.abs(v).max()),
        "std": float(v.std()),
        "min": float(v.min()),
        "max": float(v.max()),
    }


def _fmt(value: float) -> str:
    return f"{value:g}"


def value_desc(name: str, index: int, op: str, x) -> tuple[dict | None, str | None]:
    """The descriptor of value derivation ``op`` on input ``x`` (named ``name``, at position
    ``index``), or ``(None, why)`` when it does not apply to these values."""
    targets = VALUE_TARGETS.get(dtype_name(x))
    if targets is None:
        return None, f"{dtype_name(x)} input: no value factors for this dtype"
    s = stats(x)
    if s is None or s["max_abs"] == 0.0:
        return None, "all zero or non-finite: no scale to derive from"
    if op == "large":
        if s["max_abs"] >= targets["large"]:
            return None, f"already of magnitude {_fmt(_sig(s['max_abs']))}"
        value = _sig(targets["large"] / s["max_abs"])
        label = f"{name} × {_fmt(value)} (large)"
    elif op == "tiny":
        if s["max_abs"] <= targets["tiny"]:
            return None, f"already of magnitude {_fmt(_sig(s['max_abs']))}"
        value = _sig(targets["tiny"] / s["max_abs"])
        label = f"{name} × {_fmt(value)} (tiny)"
    elif op == "offset":
        if s["std"] == 0.0:
            return None, "constant: no spread to offset against"
        value = _sig(targets["offset"] * s["std"])
        label = f"{name} + {_fmt(value)} (offset)"
    else:
        value = _sig(targets["outliers"] * s["max_abs"])
        label = f"{name} with outliers ±{_fmt(value)} ({OUTLIERS_PER_ROW} per row)"
    desc = {"kind": "values", "name": label, "input": index, "op": op, "value": value}
    return desc, None


def _outlier_rows(n_rows: int, n: int) -> list[tuple[int, int, float]]:
    """``(row, column, sign)`` of the planted outliers: per row one at a column that moves
    with the row and one near the row's end, of opposite signs."""
    out = []
    for r in range(n_rows):
        first = (7 * r + 3) % n
        second = n - 1 - (5 * r) % n
        second = (first + 1) % n if second == first else second
        sign = 1.0 if r % 2 == 0 else -1.0
        out.append((r, first, sign))
        if n > 1:
            out.append((r, second, -sign))
    return out


def _with_outliers(x, magnitude: float):
    """A copy of ``x`` with :func:`_outlier_rows`'s entries set to ±``magnitude``."""
    n = int(x.shape[-1]) if len(x.shape) else 1
    if is_tensor(x):
        out = x.detach().contiguous().clone()
    else:
        out = x.copy()
    rows = out.reshape(-1, n)  # a view of the contiguous copy
    for r, c, sign in _outlier_rows(int(rows.shape[0]), n):
        rows[r, c] = sign * magnitude
    return out


def apply_values(x, desc: dict):
    """``x`` (a torch tensor or NumPy array) with the value derivation ``desc``: a new
    tensor of the same shape, dtype and device (a leaf that requires grad when ``x`` does).
    Raises ValueError for an unknown op or a non-floating input."""
    op, value = desc.get("op"), float(desc.get("value", 0.0))
    if dtype_name(x) not in VALUE_TARGETS:
        raise ValueError(f"input #{desc.get('input')} is {dtype_name(x)}, not floating point")
    base = x.detach() if is_tensor(x) else x
    if op in ("large", "tiny"):
        out = base * value
    elif op == "offset":
        out = base + value
    elif op == "outliers":
        out = _with_outliers(base, value)
    else:
        raise ValueError(f"unknown value derivation {op!r}")
    if is_tensor(x):
        out = out.to(x.dtype).contiguous()
        return out.requires_grad_(True) if x.requires_grad else out
    return out.astype(x.dtype)


def strides_text(x) -> str:
    """``strides (1, 16)`` of a torch tensor (elements)."""
    return "strides (" + ", ".join(str(int(s)) for s in x.stride()) + ")"


def bounds_problem(values) -> str | None:
    """Why ``BENCH["values"]`` is malformed, or None. It is ``False`` (no value derivation),
    or a dict from an input's name (``reference``'s parameter) or position to ``False``/
    ``None`` (none for that input) or ``(low, high)`` (derived values must stay inside)."""
    if values is False or values is None:
        return None
    if not isinstance(values, dict):
        return 'BENCH["values"] must be False or a dict of input name -> (low, high) or False'
    for key, spec in values.items():
        if spec is False or spec is None:
            continue
        ok = (
            isinstance(spec, (tuple, list))
            and len(spec) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in spec)
            and spec[0] <= spec[1]
        )
        if not ok:
            return (
                f'BENCH["values"][{key!r}] must be (low, high) with low <= high, or False; '
                f"got {spec!r}"
            )
    return None


def value_bounds(values, name: str, index: int):
    """``BENCH["values"]``'s entry for the input ``name`` at ``index``: ``False`` (no value
    derivation), ``(low, high)``, or None (unbounded). ``values`` is well formed
    (:func:`bounds_problem`)."""
    if values is False:
        return False
    if not isinstance(values, dict):
        return None
    spec = values.get(name, values.get(index))
    if spec is False or (spec is None and (name in values or index in values)):
        return False
    return (float(spec[0]), float(spec[1])) if spec is not None else None


def within(x, bounds: tuple[float, float]) -> bool:
    """True when every finite entry of ``x`` lies in ``[low, high]``."""
    s = stats(x)
    return s is None or (bounds[0] <= s["min"] and s["max"] <= bounds[1])


def finite_or_none(x) -> bool:
    """True when ``x``'s derived values are finite wherever they were meant to be (a factor
    that overflows the dtype makes them inf)."""
    import numpy as np

    return bool(np.isfinite(_float64(x)).all())


def input_text(name: str, x, torch_layout: bool = False) -> str:
    """``x: 16×64`` (``, strides (1, 16)`` for a layout)."""
    dims = "×".join(str(int(s)) for s in x.shape) if len(x.shape) else "scalar"
    return f"{name}: {dims}" + (f", {strides_text(x)}" if torch_layout else "")


def plan_values(inputs: tuple, names: list[str], values=None) -> tuple[list[dict], list[dict]]:
    """The value derivations of ``inputs`` (``(descriptors, skipped)``), per floating input in
    :data:`VALUE_OPS` order; ``values`` is ``BENCH["values"]`` (None: unbounded)."""
    problem = bounds_problem(values)
    if problem:
        return [], [{"name": "values", "why": f"not derived: {problem}"}]
    if values is False:
        return [], [{"name": "values", "why": 'off in BENCH["values"]'}]
    found: list[dict] = []
    skipped: list[dict] = []
    for i, x in enumerate(inputs):
        if not (is_tensor(x) or is_array(x)) or dtype_name(x) not in VALUE_TARGETS:
            continue  # integer, boolean and non-tensor inputs are left alone
        bounds = value_bounds(values, names[i], i)
        if bounds is False:
            skipped.append({"name": f"{names[i]} values", "why": 'off in BENCH["values"]'})
            continue
        for op in VALUE_OPS:
            desc, why = value_desc(names[i], i, op, x)
            if desc is not None:
                why = _unusable_values(apply_values(x, desc), bounds)
            if why:
                skipped.append({"name": f"{names[i]} {op}", "why": why})
                continue
            found.append(dict(desc, inputs=input_text(names[i], x)))
    return found, skipped


def _unusable_values(derived, bounds) -> str | None:
    """Why derived values cannot be used: not finite in their dtype, or outside the bounds."""
    if not finite_or_none(derived):
        return "overflows its dtype"
    if bounds is not None and not within(derived, bounds):
        return f'leaves BENCH["values"] bounds [{_fmt(bounds[0])}, {_fmt(bounds[1])}]'
    return None


def checked_part(desc, n_inputs: int) -> dict | None:
    """A value descriptor from a request (untrusted JSON) with its keys and types
    checked, or None when it is malformed or names an input past ``n_inputs``."""
    if not isinstance(desc, dict):
        return None
    index = desc.get("input")
    if type(index) is not int or not 0 <= index < n_inputs:
        return None
    out = {k: str(desc.get(k) or "")[:200] for k in ("name", "inputs")}
    if desc.get("kind") == "values":
        value = desc.get("value")
        ok = (
            desc.get("op") in VALUE_OPS
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
        )
        return (
            dict(out, kind="values", input=index, op=desc["op"], value=float(value)) if ok else None
        )
    return None
