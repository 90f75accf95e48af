"""The value derivations' ops (issues 29 and 52): what each op's one parameter is
(:data:`OPS`), how each applies to an input (:func:`apply_values`: scales and shifts, outliers,
zeros, repeated extremes, a grid, constant rows, NaN / ±inf planted, and the integer fills and
repeats) and the integer derivations' plan, descriptions and classes (:data:`INT_PLAN`,
:func:`int_value`, :data:`INT_CLASSES`), and the check of a descriptor from a request
(:func:`checked_part`).

:mod:`.derived_values` plans the derivations and re-exports these names; this module imports
nothing of it. Each op is a pure function of the input and its descriptor, so every evaluation
applies the same numbers to the same inputs. Standard library at module level; torch / NumPy
come with the inputs.
"""

from __future__ import annotations

import math

from .compare import dtype_name, is_array, is_tensor

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
#: Ops that plant NaN/Inf: the reference may be non-finite on them (:func:`.derived_values.plants_nonfinite`).
NONFINITE_OPS = ("nan", "inf")
#: Ops whose ``value`` is a count or a period: a whole number in [1, :data:`MAX_COUNT`].
_COUNT_OPS = ("repeat_extreme", "zeros", "nan", "inf", "int_repeat", "int_empty")
MAX_COUNT = 1024
#: The derivations of an integer input, in the order they are made.
INT_PLAN: tuple[tuple[str, str], ...] = (
    ("minimum", "int_min"),
    ("maximum", "int_max"),
    ("empty segments", "int_empty"),
    ("repeats", "int_repeat"),
)
#: Runs of 2 repeated integers (``int_repeat``, ``int_empty``).
INT_RUN = 2
#: The largest finite value per floating dtype (IEEE 754; bfloat16: fp32's exponent range):
#: the dtypes floating ops apply to.
FLOAT_MAX = {"float64": 1.7976931348623157e308, "float32": 3.4028234663852886e38,
             "bfloat16": 3.3895313892515355e38, "float16": 65504.0}  # fmt: skip
#: The class of each integer op (:func:`.derived_values.value_class`).
INT_CLASSES = {
    "int_min": "integer bounds",
    "int_max": "integer bounds",
    "int_repeat": "repeated integers",
    "int_empty": "empty segments",
}


def is_integer_input(x) -> bool:
    """True for an integer (not boolean) torch tensor or NumPy array."""
    return (is_tensor(x) or is_array(x)) and dtype_name(x) in INT_DTYPES


def int_value(op: str, name: str, x) -> tuple[float | None, str]:
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
    if (dtype_name(x) in INT_DTYPES) != integer or (not integer and dtype_name(x) not in FLOAT_MAX):
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
