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
judge's decision (:mod:`.derived_checks`), never made here. Standard library at module level;
torch / NumPy come with the inputs.
"""

from __future__ import annotations

import math

from .compare import dtype_name, is_array, is_tensor

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
#: Integer dtypes whose inputs get integer derivations (``bool`` is left alone).
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
#: Every op :func:`apply_values` knows, with what its ``value`` is. ``large``, ``tiny``,
#: ``subnormal`` and ``near_limit`` multiply like ``scale``; ``offset`` adds like ``shift``.
OPS: dict[str, str] = {
    "scale": "the factor",
    "large": "the factor",
    "tiny": "the factor",
    "subnormal": "the factor",
    "near_limit": "the factor",
    "shift": "the amount added",
    "offset": "the amount added",
    "outliers": "the outliers' magnitude",
    "grid": "the grid's step",
    "constant": "the constant rows' value",
    "repeat_extreme": "copies of each row's max and min",
    "zeros": "the period of the zeroed entries",
    "nan": "NaN entries planted",
    "inf": "±inf entries planted",
    "int_min": "the value of every entry",
    "int_max": "the value of every entry",
    "int_repeat": "the run length",
    "int_empty": "the run length",
}
#: Ops whose ``value`` is a count or a period: a whole number in [1, :data:`MAX_COUNT`].
_COUNT_OPS = ("repeat_extreme", "zeros", "nan", "inf", "int_repeat", "int_empty")
MAX_COUNT = 1024
#: Ops that may leave an input as it is (on data already on a grid, with zeros, constant, an
#: integer input already repeated): the planner compares their result with the input. The
#: others always change it (a factor other than 1 of non-zero data, a shift, planted values).
_MAY_CHANGE_NOTHING = ("grid", "constant", "repeat_extreme", "zeros", "int_min", "int_max",
                       "int_repeat", "int_empty")  # fmt: skip
#: Ops that plant NaN/Inf: the reference may be non-finite on them (:func:`plants_nonfinite`).
NONFINITE_OPS = ("nan", "inf")
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
#: The derivations of an integer input, in the order they are made.
INT_PLAN: tuple[tuple[str, str], ...] = (
    ("minimum", "int_min"),
    ("maximum", "int_max"),
    ("empty segments", "int_empty"),
    ("repeats", "int_repeat"),
)
#: The value derivations of issue 29, in the order they are made (kept for callers).
VALUE_OPS = ("large", "tiny", "offset", "outliers")
#: Outliers planted per row.
OUTLIERS_PER_ROW = 2
#: Planned parameters: the grid's levels per sign (int4-like: max|x| / 7), each row's max and min
#: copied to this many more positions, every 7th entry zeroed, NaN / ±inf planted at 2 positions,
#: runs of 2 repeated integers.
GRID_LEVELS = 7
EXTREME_COPIES = 3
ZERO_PERIOD = 7
NONFINITE_COUNT = 2
INT_RUN = 2


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


def is_integer_input(x) -> bool:
    """True for an integer (not boolean) torch tensor or NumPy array."""
    return (is_tensor(x) or is_array(x)) and dtype_name(x) in INT_DTYPES


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


def _int_value(op: str, name: str, x) -> tuple[float | None, str]:
    """``(value, label)`` of the integer derivation ``op`` of ``x``, or ``(None, why)``."""
    import numpy as np

    v = np.asarray(x.detach().cpu().numpy() if is_tensor(x) else x)
    if v.size < 2:
        return None, "a single value: nothing to vary"
    lo, hi = int(v.min()), int(v.max())
    if op in ("int_min", "int_max"):
        if lo == hi:
            return None, f"every entry is {lo} already"
        value = lo if op == "int_min" else hi
        what = "minimum" if op == "int_min" else "maximum"
        return float(value), f"{name} all {value} (the {what} seen)"
    if op == "int_repeat":
        return float(INT_RUN), f"{name} with each value repeated"
    if v.ndim != 1 or v.size < 3 or bool((np.diff(v) < 0).any()):
        return None, "not a non-decreasing 1-D tensor of 3 or more entries (offsets)"
    return float(INT_RUN), f"{name} with empty segments (entries repeated, ends kept)"


def value_desc(
    name: str, index: int, op: str, x, found: dict | None = None
) -> tuple[dict | None, str | None]:
    """The descriptor of value derivation ``op`` (a kind of :data:`FLOAT_PLAN` or of
    :data:`INT_PLAN`, or an op) on input ``x`` (named ``name``, at position ``index``), or ``(None,
    why)`` when it does not apply to these values. ``found``: ``x``'s :func:`stats`, when the
    caller has them (one pass over a large input instead of one per op)."""
    if is_integer_input(x):
        real_op = dict(INT_PLAN).get(op, op)
        value, label = _int_value(real_op, name, x)
    elif dtype_name(x) not in VALUE_TARGETS:
        return None, f"{dtype_name(x)} input: no value factors for this dtype"
    else:
        real_op = dict(FLOAT_PLAN).get(op, op)
        value, label = _float_value(op, name, x, found if found is not None else stats(x))
    if value is None:
        return None, label
    desc = {"kind": "values", "name": label, "input": index, "op": real_op, "value": value}
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


def _row_length(x) -> int:
    """The last dimension's length (1 for a 0-d input)."""
    return int(x.shape[-1]) if len(x.shape) else 1


def _with_outliers(x, magnitude: float):
    """A copy of ``x`` with :func:`_outlier_rows`'s entries set to ±``magnitude``."""
    n = _row_length(x)
    if is_tensor(x):
        out = x.detach().contiguous().clone()
    else:
        out = x.copy()
    rows = out.reshape(-1, n)  # a view of the contiguous copy
    for r, c, sign in _outlier_rows(int(rows.shape[0]), n):
        rows[r, c] = sign * magnitude
    return out


def _host(x, dtype: str):
    """A contiguous NumPy copy of ``x`` as ``dtype`` (``float64`` or ``int64``), on the host
    (a copy even where ``x`` is of that dtype already: the ops write into it)."""
    import numpy as np

    if is_tensor(x):
        import torch

        kind = torch.float64 if dtype == "float64" else torch.int64
        return (
            x.detach()
            .to("cpu", dtype=kind, memory_format=torch.contiguous_format, copy=True)
            .numpy()
        )
    return np.array(x, dtype=dtype, order="C", copy=True)


def _back(x, arr):
    """``arr`` (NumPy) as ``x``'s type, dtype and device."""
    if is_tensor(x):
        import torch

        return torch.from_numpy(arr).to(dtype=x.dtype, device=x.device)
    return arr.astype(x.dtype)


def _spread(count: int, n_rows: int, n: int, shift: int) -> list[tuple[int, int]]:
    """``count`` ``(row, column)`` positions spread over the rows (one per row while there are
    rows enough), their columns moving with the row."""
    return [((k * n_rows) // count, (7 * ((k * n_rows) // count) + shift + k) % n)
            for k in range(count)]  # fmt: skip


def _extreme_columns(n: int, copies: int) -> tuple[list[int], list[int]]:
    """Columns the row max and the row min are copied to (spread, distinct when ``n`` allows)."""
    step = max(1, n // (2 * copies))
    cols = [(j * step) % n for j in range(2 * copies)]
    return cols[0::2], cols[1::2]


def _rowwise(op: str, value: float, rows) -> None:
    """Op ``op`` of the row-wise kind on ``rows`` (a float64 NumPy ``(n_rows, n)`` array), in
    place."""
    import numpy as np

    n_rows, n = rows.shape
    if op == "grid":
        rows[...] = np.round(rows / value) * value
    elif op == "constant":
        if n_rows > 1:
            rows[1::2] = value  # every other row
        else:
            rows[...] = value  # a 1-D input whole (a weight of ones)
    elif op == "zeros":
        period = int(value)
        flat = rows.reshape(-1)
        flat[period // 2 :: period] = 0.0
        if n_rows > 1:
            rows[n_rows // 2] = 0.0
    elif op == "repeat_extreme":
        top, bottom = rows.max(axis=1), rows.min(axis=1)
        high, low = _extreme_columns(n, int(value))
        rows[:, low] = bottom[:, None]
        rows[:, high] = top[:, None]
    elif op in NONFINITE_OPS:
        for k, (r, c) in enumerate(_spread(int(value), n_rows, n, 3 if op == "nan" else 1)):
            rows[r, c] = np.nan if op == "nan" else (np.inf if k % 2 == 0 else -np.inf)


def _integer(op: str, value: float, flat) -> None:
    """Integer op ``op`` on ``flat`` (a 1-D int64 NumPy array), in place."""
    import numpy as np

    if op in ("int_min", "int_max"):
        flat[...] = int(value)
        return
    run = int(value)
    src = np.arange(flat.size) - np.arange(flat.size) % run
    ends = flat[[0, -1]].copy()
    flat[...] = flat[src]
    if op == "int_empty":
        flat[[0, -1]] = ends


def apply_values(x, desc: dict):
    """``x`` (a torch tensor or NumPy array) with the value derivation ``desc`` (op and value:
    :data:`OPS`): a new tensor of the same shape, dtype and device (a leaf that requires grad
    when ``x`` does). A pure function of ``x`` and ``desc``. Raises ValueError for an unknown
    op, an op that does not fit the input's dtype (an integer op on a float, a float op on an
    integer or boolean), an ``int_empty`` on a tensor that is not 1-D, or a value its dtype
    cannot hold."""
    op, value = desc.get("op"), float(desc.get("value", 0.0))
    if op not in OPS:
        raise ValueError(f"unknown value derivation {op!r}")
    integer = str(op).startswith("int_")
    if (dtype_name(x) in INT_DTYPES) != integer or (
        not integer and dtype_name(x) not in VALUE_TARGETS
    ):
        raise ValueError(
            f"input #{desc.get('input')} is {dtype_name(x)}: value derivation {op!r} does not apply"
        )
    if integer:
        if op == "int_empty" and len(x.shape) != 1:
            raise ValueError(f"input #{desc.get('input')} is not 1-D: no segments to empty")
        arr = _host(x, "int64")
        _integer(op, value, arr.reshape(-1))
        out = _back(x, arr)
        if not (_host(out, "int64") == arr).all():
            raise ValueError(f"{value:g} does not fit input #{desc.get('input')}'s {dtype_name(x)}")
        return out.contiguous() if is_tensor(out) else out
    base = x.detach() if is_tensor(x) else x
    if op in ("scale", "large", "tiny", "near_limit"):
        out = base * value
    elif op in ("shift", "offset"):
        out = base + value
    elif op == "outliers":
        out = _with_outliers(base, value)
    else:
        arr = _host(x, "float64")
        if op == "subnormal":
            arr *= value  # in float64, rounded once into the dtype
        else:
            _rowwise(op, value, arr.reshape(-1, _row_length(x)))
        out = _back(x, arr)
    if is_tensor(x):
        out = out.to(x.dtype).contiguous()
        return out.requires_grad_(True) if x.requires_grad else out
    return out.astype(x.dtype)


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
    "int_min": "integer bounds",
    "int_max": "integer bounds",
    "int_repeat": "repeated integers",
    "int_empty": "empty segments",
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
    if magnitude is None or dtype_name(x) not in _FLOAT_MAX:
        return False, None
    m = magnitude(float(found["max_abs"]), float(desc.get("value", 0.0)))
    top = _FLOAT_MAX[dtype_name(x)]
    if m <= 0.99 * top:
        return True, None
    if m >= 1.01 * top:
        return True, "overflows its dtype"
    return False, None


#: The largest finite value per floating dtype (IEEE 754; bfloat16: fp32's exponent range).
_FLOAT_MAX = {"float64": 1.7976931348623157e308, "float32": 3.4028234663852886e38,
              "bfloat16": 3.3895313892515355e38, "float16": 65504.0}  # fmt: skip


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


def _param_ok(op, value) -> bool:
    """True when ``value`` is a usable parameter of ``op`` (:data:`OPS`)."""
    if op not in OPS or not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    if not math.isfinite(value):
        return False
    if op in _COUNT_OPS:
        return float(value).is_integer() and 1 <= value <= MAX_COUNT
    if op == "grid":
        return value > 0
    if op in ("int_min", "int_max"):
        return float(value).is_integer() and abs(value) < 2.0**63
    return True


def checked_part(desc, n_inputs: int) -> dict | None:
    """A value descriptor from a request (untrusted JSON) with its keys and types checked
    (an op of :data:`OPS` and a finite ``value`` that fits it: a whole count in [1,
    :data:`MAX_COUNT`] for counts and periods, a positive grid step, an int64 for integer
    fills), or None when it is malformed or names an input past ``n_inputs``."""
    if not isinstance(desc, dict):
        return None
    index = desc.get("input")
    if type(index) is not int or not 0 <= index < n_inputs:
        return None
    out = {k: str(desc.get(k) or "")[:200] for k in ("name", "inputs")}
    if desc.get("kind") != "values" or not _param_ok(desc.get("op"), desc.get("value")):
        return None
    return dict(out, kind="values", input=index, op=desc["op"], value=float(desc["value"]))
