"""Derived values (issues 29 and 52): the harness's own inputs, with values a user meets every
day and a random harness never draws, derived by principle.

A harness usually draws ``torch.randn`` inputs: magnitudes around 1, mean 0, no ties, no zeros,
no outliers. A rewrite that drops a stabilisation step (softmax without the max), takes a
variance in one pass (E[x²] − E[x]²), starts a max at 0, breaks ties the other way, divides by a
row's sum without a guard, flushes subnormals, turns NaN into 0 or assumes every CSR segment is
non-empty is correct on those inputs and wrong on ordinary ones. So from the inputs of one seed,
per input, every sign and range a real tensor has (:data:`FLOAT_PLAN`, :data:`INT_PLAN`):

**Floating-point inputs**, with numbers per dtype (:data:`VALUE_TARGETS`):

- scales of both signs: ``large`` (max|x| 1000, 200 in fp16: ``exp`` overflows), ``tiny``
  (max|x| 1e-4, 1e-3 in fp16: an epsilon dominates), and both sign-flipped (op ``scale``, a
  negative factor: all-positive data becomes all-negative);
- shifts of both signs: ``offset`` (+512 spreads, 256 in fp16, 16 in bf16: rows entirely above
  zero, E[x²] − E[x]² cancels) and op ``shift`` by the same amount down (rows entirely below
  zero: a max started at 0, a relu-like shortcut); the data itself crosses zero;
- ``outliers``: two entries per row (last dimension) set to ±50 max|x| (30 in fp16);
- ties: ``grid`` (values rounded to a grid of max|x| / 7, as int4-like low-precision activations
  have), ``constant`` rows (every other row, or a 1-D input whole), ``repeat_extreme`` (each
  row's max and min copied to 3 more positions);
- ``zeros``: every 7th entry and one whole row (the middle one, with 2 or more rows) exactly 0;
- ``subnormal``: scaled so that max|x| is in the dtype's subnormal range (fp32 / bf16 1e-39,
  fp16 1e-6, fp64 1e-310);
- ``near_limit``: scaled so that max|x| is 15/16 of √(dtype max): one square fits, a sum of two
  overflows (the judge drops it where the reference is not finite on it);
- ``nan`` / ``inf``: NaN, or +inf and −inf, planted at 2 positions; the only derivations on
  which the reference may be non-finite (:func:`plants_nonfinite`): they are used where the
  baseline reproduces the reference's NaN/Inf exactly, which is then what a candidate must do
  (:func:`.compare.compare` already requires a non-finite reference value reproduced).

**Integer inputs** (indices, lengths, offsets; booleans are left alone), from the range seen in
the seed's input: ``int_min`` and ``int_max`` (every entry the minimum, the maximum),
``int_repeat`` (each value duplicated: entry ``i`` takes entry ``i − i mod 2``) and, for a
non-decreasing 1-D tensor (CSR offsets), ``int_empty`` (consecutive entries repeated, the first
and last kept: empty segments). The baseline is the oracle of what it accepts: a derivation it
raises on or is wrong on is skipped with its reason by the judge.

Layouts (the same values in other storage) are :mod:`.derived_layouts`'s.

Descriptors (JSON, carried in requests and results like :mod:`.derived`'s shapes)::

    {"kind": "values", "name": "x + 512 (offset)", "input": 0, "op": "offset", "value": 512.0,
     "inputs": "x: 16×64"}

``value`` is the op's one parameter (:data:`OPS`), computed once from the seed's inputs, so
every evaluation applies the same numbers to the same inputs; each op is a pure function of the
input and its descriptor (:func:`apply_values`), so a search may emit the same parts with its
own parameters. ``large`` and ``tiny`` are aliases of ``scale``, ``offset`` of ``shift``.
:func:`value_class` names the class a part checks. A harness bounds or turns off value
derivations per input with ``BENCH["values"]`` (:func:`value_bounds`). Whether a derivation is
usable (the reference finite on it unless it plants NaN/Inf, the baseline correct on it) is the
judge's decision (:mod:`.derived_checks`), never made here. The ops themselves (and the integer
derivations) are :mod:`.derived_value_ops`'s, re-exported here. Standard library at module
level; torch / NumPy come with the inputs.
"""

from __future__ import annotations

import math

from .compare import dtype_name, is_array, is_tensor
from .derived_value_ops import (
    FLOAT_MAX,
    INT_CLASSES,
    INT_PLAN,
    NONFINITE_OPS,
    apply_values,
    int_value,
    is_integer_input,
)

# Re-exported (``x as x``): the ops' names callers use from this module.
from .derived_value_ops import MAX_COUNT as MAX_COUNT
from .derived_value_ops import OPS as OPS
from .derived_value_ops import checked_part as checked_part

#: Per floating dtype: max|x| after ``large`` and after ``tiny``, the ``offset`` in spreads
#: (standard deviations), the outliers' magnitude in max|x|, max|x| after ``subnormal`` and
#: after ``near_limit``. Sources, IEEE 754-2008 (binary16/32/64) and Google's bfloat16
#: documentation (fp32's exponent, an 8-bit mantissa): largest finite values 65504, 3.40e38
#: (bf16 3.39e38), 1.80e308; smallest normal ones 2^-14 = 6.1e-5, 2^-126 = 1.18e-38 (bf16 too),
#: 2^-1022 = 2.2e-308. So fp16's large values stay at 200 (squares fit) and its tiny ones above
#: its normal range; bf16's 8-bit mantissa would round a spread offset by 512 away (16);
#: ``subnormal`` sits below the smallest normal (fp16's 1e-6 is 16 of its 2^-24 = 6e-8 steps);
#: ``near_limit`` is 15/16 of √max (fp16 240, fp32 / bf16 1.73e19, fp64 1.26e154).
VALUE_TARGETS: dict[str, dict[str, float]] = {
    "float64": {"large": 1e3, "tiny": 1e-4, "offset": 512.0, "outliers": 50.0,
                "subnormal": 1e-310, "near_limit": 1.26e154},
    "float32": {"large": 1e3, "tiny": 1e-4, "offset": 512.0, "outliers": 50.0,
                "subnormal": 1e-39, "near_limit": 1.73e19},
    "bfloat16": {"large": 1e3, "tiny": 1e-4, "offset": 16.0, "outliers": 50.0,
                 "subnormal": 1e-39, "near_limit": 1.72e19},
    "float16": {"large": 200.0, "tiny": 1e-3, "offset": 256.0, "outliers": 30.0,
                "subnormal": 1e-6, "near_limit": 240.0},
}  # fmt: skip
#: Ops that may leave an input as it is (on data already on a grid, with zeros, constant, an
#: integer input already repeated): the planner compares their result with the input. The
#: others always change it (a factor other than 1 of non-zero data, a shift, planted values).
_MAY_CHANGE_NOTHING = ("grid", "constant", "repeat_extreme", "zeros", "int_min", "int_max",
                       "int_repeat", "int_empty")  # fmt: skip
#: The derivations of a floating input, in the order they are made: the classes that catch the
#: most common shortcuts per checked call first (issue 29's four, then the other signs, ties and
#: zeros), the narrowest last, where a budget cuts first. Each is ``(kind, op)``; the kind names
#: the derivation in skip entries (``x large``).
FLOAT_PLAN: tuple[tuple[str, str], ...] = (
    ("large", "large"),
    ("tiny", "tiny"),
    ("offset", "offset"),
    ("outliers", "outliers"),
    ("sign-flipped", "scale"),
    ("below zero", "shift"),
    ("zeros", "zeros"),
    ("repeated extreme", "repeat_extreme"),
    ("grid", "grid"),
    ("constant rows", "constant"),
    ("sign-flipped tiny", "scale"),
    ("subnormal", "subnormal"),
    ("near limit", "near_limit"),
    ("nan", "nan"),
    ("inf", "inf"),
)
#: The value derivations of issue 29, in the order they are made (kept for callers).
VALUE_OPS = ("large", "tiny", "offset", "outliers")
#: Outliers planted per row.
OUTLIERS_PER_ROW = 2
#: Planned parameters: the grid's levels per sign (int4-like: max|x| / 7), each row's max and min
#: copied to this many more positions, every 7th entry zeroed, NaN / ±inf planted at 2 positions.
GRID_LEVELS = 7
EXTREME_COPIES = 3
ZERO_PERIOD = 7
NONFINITE_COUNT = 2


def _sig(value: float) -> float:
    """``value`` rounded to 3 significant digits (the number named is the number applied)."""
    return float(f"{value:.3g}")


def _sig_down(value: float) -> float:
    """Positive ``value`` rounded down to 3 significant digits (a grid step no larger than
    asked, so the grid's outermost point stays inside the data's range)."""
    out = _sig(value)
    if out > value:
        out = float(f"{out - 10 ** (math.floor(math.log10(value)) - 2):.3g}")
    return out


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


def _scaled(kind: str, name: str, x, s: dict, targets: dict) -> tuple[float | None, str]:
    """``(factor, label)`` of a scale derivation to ``targets[kind]`` (``(None, why)`` when the
    input is of that magnitude already)."""
    key = {"sign-flipped": "large", "sign-flipped tiny": "tiny"}.get(kind, kind)
    target = targets[key.replace(" ", "_")]
    shrink = key in ("tiny", "subnormal")
    if (s["max_abs"] <= target) if shrink else (s["max_abs"] >= target):
        return None, f"already of magnitude {_fmt(_sig(s['max_abs']))}"
    value = _sig(target / s["max_abs"])
    if kind.startswith("sign-flipped"):
        return -value, f"{name} × {_fmt(-value)} ({kind})"
    if key == "near_limit":
        return value, f"{name} × {_fmt(value)} (near the {dtype_name(x)} limit)"
    return value, f"{name} × {_fmt(value)} ({kind})"


def _float_value(kind: str, name: str, x, s: dict | None) -> tuple[float | None, str]:
    """``(value, label)`` of the floating derivation ``kind`` (:data:`FLOAT_PLAN`) of ``x``, or
    ``(None, why)`` when it does not apply to these values."""
    if kind in ("nan", "inf"):
        what = "NaN" if kind == "nan" else "±inf"
        return float(NONFINITE_COUNT), f"{name} with {what} at {NONFINITE_COUNT} positions"
    if kind == "zeros":
        return float(ZERO_PERIOD), f"{name} with zeros (every {ZERO_PERIOD}th entry, a whole row)"
    if kind == "repeated extreme":
        return float(EXTREME_COPIES), f"{name} with each row's max and min repeated"
    if s is None or s["max_abs"] == 0.0:
        return None, "all zero or non-finite: no scale to derive from"
    targets = VALUE_TARGETS[dtype_name(x)]
    if kind == "offset" or kind == "below zero":
        if s["std"] == 0.0:
            return None, "constant: no spread to offset against"
        value = _sig(targets["offset"] * s["std"])
        if kind == "offset":
            return value, f"{name} + {_fmt(value)} (offset)"
        return -value, f"{name} - {_fmt(value)} (below zero)"
    if kind == "outliers":
        value = _sig(targets["outliers"] * s["max_abs"])
        return value, f"{name} with outliers ±{_fmt(value)} ({OUTLIERS_PER_ROW} per row)"
    if kind == "grid":
        value = _sig_down(s["max_abs"] / GRID_LEVELS)
        return value, f"{name} on a grid of {_fmt(value)} (ties)"
    if kind == "constant rows":
        value = _sig(s["min"] + 0.75 * (s["max"] - s["min"]))
        return value, f"{name} with constant rows (= {_fmt(value)})"
    return _scaled(kind, name, x, s, targets)


def value_desc(
    name: str, index: int, op: str, x, found: dict | None = None
) -> tuple[dict | None, str | None]:
    """The descriptor of value derivation ``op`` (a kind of :data:`FLOAT_PLAN` or of
    :data:`INT_PLAN`, or an op) on input ``x`` (named ``name``, at position ``index``), or ``(None,
    why)`` when it does not apply to these values. ``found``: ``x``'s :func:`stats`, when the
    caller has them (one pass over a large input instead of one per op)."""
    if is_integer_input(x):
        real_op = dict(INT_PLAN).get(op, op)
        value, label = int_value(real_op, name, x)
    elif dtype_name(x) not in VALUE_TARGETS:
        return None, f"{dtype_name(x)} input: no value factors for this dtype"
    else:
        real_op = dict(FLOAT_PLAN).get(op, op)
        value, label = _float_value(op, name, x, found if found is not None else stats(x))
    if value is None:
        return None, label
    desc = {"kind": "values", "name": label, "input": index, "op": real_op, "value": value}
    return desc, None


def plants_nonfinite(desc: dict) -> bool:
    """True when ``desc`` (a part, or a slot of parts) plants NaN/Inf (:data:`NONFINITE_OPS`):
    the reference may then be non-finite on it (:func:`.derived_checks.overflow`)."""
    parts = desc.get("parts") if desc.get("kind") == "combined" else [desc]
    return any(
        isinstance(p, dict) and p.get("kind") == "values" and p.get("op") in NONFINITE_OPS
        for p in parts or []
    )


#: The class of each op whose class does not depend on its value (:func:`value_class`).
_CLASSES = {
    "large": "large scale",
    "tiny": "tiny scale",
    "offset": "positive shift (rows above zero)",
    "outliers": "outliers",
    "grid": "coarse grid (ties)",
    "constant": "constant rows",
    "repeat_extreme": "repeated extreme",
    "zeros": "exact zeros",
    "subnormal": "subnormal",
    "near_limit": "near the dtype's limit",
    "nan": "NaN",
    "inf": "±inf",
    **INT_CLASSES,
}


def value_class(part: dict) -> str:
    """The class a value part checks, as the display counts them: ``values: sign-flipped
    scale``, ``values: negative shift (rows below zero)``, ``values: subnormal``, ... (stable
    names, one per class of issue 52; a ``scale`` by its sign and magnitude, a ``shift`` by its
    sign)."""
    op, value = part.get("op"), part.get("value")
    value = float(value) if isinstance(value, (int, float)) else 0.0
    if op == "scale":
        name = (
            "sign-flipped scale" if value < 0 else ("large scale" if value >= 1 else "tiny scale")
        )
    elif op == "shift":
        name = "negative shift (rows below zero)" if value < 0 else _CLASSES["offset"]
    else:
        name = _CLASSES.get(str(op), str(op))
    return f"values: {name}"


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

    if is_tensor(x):
        import torch

        return bool(torch.isfinite(x.detach()).all())
    return bool(np.isfinite(x).all())


def input_text(name: str, x, torch_layout: bool = False) -> str:
    """``x: 16×64`` (``, strides (1, 16)`` for a layout)."""
    dims = "×".join(str(int(s)) for s in x.shape) if len(x.shape) else "scalar"
    return f"{name}: {dims}" + (f", {strides_text(x)}" if torch_layout else "")


def plan_values(inputs: tuple, names: list[str], values=None) -> tuple[list[dict], list[dict]]:
    """Every value derivation of ``inputs`` (``(descriptors, skipped)``): per floating input
    in :data:`FLOAT_PLAN` order, per integer input in :data:`INT_PLAN` order (boolean and
    non-tensor inputs are left alone); ``values`` is ``BENCH["values"]`` (None: unbounded).
    Nothing is capped here: a budget cuts from the end of each input's list. A derivation that
    does not apply, overflows its dtype, leaves the bounds or changes nothing is skipped with
    the reason."""
    problem = bounds_problem(values)
    if problem:
        return [], [{"name": "values", "why": f"not derived: {problem}"}]
    if values is False:
        return [], [{"name": "values", "why": 'off in BENCH["values"]'}]
    found: list[dict] = []
    skipped: list[dict] = []
    for i, x in enumerate(inputs):
        if not (is_tensor(x) or is_array(x)):
            continue
        if is_integer_input(x):
            plan = INT_PLAN
        elif dtype_name(x) in VALUE_TARGETS:
            plan = FLOAT_PLAN
        else:
            continue  # boolean and other inputs are left alone
        bounds = value_bounds(values, names[i], i)
        if bounds is False:
            skipped.append({"name": f"{names[i]} values", "why": 'off in BENCH["values"]'})
            continue
        made: list[tuple[str, object]] = []  # an integer input's derived values so far
        found_stats = stats(x) if plan is FLOAT_PLAN else None
        for kind, _ in plan:
            desc, why = value_desc(names[i], i, kind, x, found_stats)
            if desc is not None and bounds is None and found_stats is not None:
                decided, why = _overflow_by_stats(x, desc, found_stats)
                if decided:  # a scale or shift of an unbounded input: no copy needed
                    if not why:
                        found.append(dict(desc, inputs=input_text(names[i], x)))
                    else:
                        skipped.append({"name": f"{names[i]} {kind}", "why": why})
                    continue
            if desc is not None:
                derived = apply_values(x, desc)
                why = _unusable_values(x, derived, bounds, desc["op"]) or _repeated(derived, made)
                if plan is INT_PLAN:
                    made.append((f"{names[i]} {kind}", derived))
            if why:
                skipped.append({"name": f"{names[i]} {kind}", "why": why})
                continue
            found.append(dict(desc, inputs=input_text(names[i], x)))
    return found, skipped


#: How max|derived| follows from max|x| (``s``) and the op's value (``v``), for the ops whose
#: result's magnitude the statistics decide: planning a 4096×4096 input then makes no copy of
#: it (each copy and finiteness pass cost ~0.7 s on the 2-core box).
_MAGNITUDE = {
    "scale": lambda s, v: s * abs(v),
    "large": lambda s, v: s * abs(v),
    "tiny": lambda s, v: s * abs(v),
    "subnormal": lambda s, v: s * abs(v),
    "near_limit": lambda s, v: s * abs(v),
    "shift": lambda s, v: s + abs(v),
    "offset": lambda s, v: s + abs(v),
    "outliers": lambda s, v: max(s, abs(v)),
    "nan": lambda s, v: s,
    "inf": lambda s, v: s,
}


def _overflow_by_stats(x, desc: dict, found: dict) -> tuple[bool, str | None]:
    """``(decided, why)``: whether the statistics of ``x`` alone decide that ``desc``'s values
    stay finite in ``x``'s dtype (``why`` None) or overflow it; undecided within 1 % of the
    dtype's largest value (rounding), or for ops whose magnitude they do not give."""
    magnitude = _MAGNITUDE.get(str(desc.get("op")))
    if magnitude is None or dtype_name(x) not in FLOAT_MAX:
        return False, None
    m = magnitude(float(found["max_abs"]), float(desc.get("value", 0.0)))
    top = FLOAT_MAX[dtype_name(x)]
    if m <= 0.99 * top:
        return True, None
    if m >= 1.01 * top:
        return True, "overflows its dtype"
    return False, None


def _repeated(derived, made: list[tuple[str, object]]) -> str | None:
    """Why ``derived`` adds nothing: the same values as an earlier derivation of ``made`` (an
    integer input's, small: CSR offsets of odd length repeat into their empty segments)."""
    from .compare import same_values

    same = next((name for name, other in made if same_values(derived, other)), None)
    return f"the same values as {same}" if same else None


def _unusable_values(x, derived, bounds, op: str) -> str | None:
    """Why derived values cannot be used: not finite in their dtype (but where NaN/Inf are
    planted), outside the bounds (NaN/Inf are), or the same as ``x``'s."""
    from .compare import same_values

    if op in NONFINITE_OPS:
        if bounds is not None:
            return f'NaN/Inf leave BENCH["values"] bounds [{_fmt(bounds[0])}, {_fmt(bounds[1])}]'
    elif not finite_or_none(derived):
        return "overflows its dtype"
    if bounds is not None and not within(derived, bounds):
        return f'leaves BENCH["values"] bounds [{_fmt(bounds[0])}, {_fmt(bounds[1])}]'
    if op in _MAY_CHANGE_NOTHING and same_values(derived, x):
        return "changes nothing on these values"
    return None
