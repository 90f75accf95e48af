"""Output comparison: a candidate's outputs against the reference's (DESIGN.md, rule 3).

Exact structure, shape and dtype; NaN/Inf where the reference is finite fails; floating outputs
within a tolerance scaled to the reference's magnitude, so all-zero outputs fail; integer and
boolean outputs exactly. Works on torch tensors and NumPy arrays (NumPy is imported inside the
functions: the target has it with torch).

Two paths with the same verdicts, messages and errors (issue 50): torch tensors are checked where
they are, with torch operations only (on the GPU for CUDA tensors, in place on the CPU for CPU
tensors; the float64 work in slices (:data:`CHUNK`, :data:`DEVICE_CHUNK`), so the extra memory stays
bounded; the code in :mod:`.compare_torch`); NumPy arrays (NKI kernels), a tensor paired with an array, and any call with
``host=True`` take the NumPy path on the host in float64, as before.
"""

from __future__ import annotations

from ..protocol import result_dict
from .compare_torch import compare_torch, nonfinite_torch, one_cpu_thread, same_values_torch
from .compare_torch import mismatch as _mismatch
from .compare_torch import note_errors as _note_errors

#: Default (rtol, atol) by output dtype when BENCH gives none.
DEFAULT_TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
_FLOAT8_TOLERANCE = (1e-1, 1e-1)


def clone(obj):
    """Deep copy of inputs: tensors cloned, arrays copied, containers rebuilt."""
    if hasattr(obj, "clone") and hasattr(obj, "data_ptr"):
        return obj.clone()
    if type(obj).__name__ == "ndarray":
        return obj.copy()
    if isinstance(obj, (list, tuple)):
        return type(obj)(clone(o) for o in obj)
    if isinstance(obj, dict):
        return {k: clone(v) for k, v in obj.items()}
    return obj


def is_tensor(obj) -> bool:
    """True for a torch tensor (duck-typed: ``data_ptr``, ``dtype``, ``shape``)."""
    return hasattr(obj, "data_ptr") and hasattr(obj, "dtype") and hasattr(obj, "shape")


def is_array(obj) -> bool:
    """True for a NumPy ndarray."""
    return type(obj).__name__ == "ndarray"


def dtype_name(t) -> str:
    """``float32`` for ``torch.float32`` or a NumPy float32."""
    return str(t.dtype).replace("torch.", "")


def _to_numpy(t):
    """Raw numpy copy on the host (bf16/float8 via float32)."""
    import numpy as np

    if is_tensor(t):
        t = t.detach().cpu()
        name = str(t.dtype).replace("torch.", "")
        if name == "bfloat16" or name.startswith("float8"):
            t = t.float()
        return t.numpy()
    return np.asarray(t)


def same_values(a, b, *, host: bool = False) -> bool:
    """True when ``a`` and ``b`` hold the same shape and values (NaN equals NaN). Two torch
    tensors are compared where they are (:func:`.compare_torch.same_values_torch`); otherwise, or with
    ``host``, as float64/raw NumPy copies on the host."""
    import numpy as np

    if not host and is_tensor(a) and is_tensor(b):
        with one_cpu_thread(b):
            return same_values_torch(a, b, _chunk(a, b))
    x, y = _to_numpy(a), _to_numpy(b)
    if x.shape != y.shape:
        return False
    if np.array_equal(x, y):  # two passes; NaN-aware only when something differs
        return True
    return np.issubdtype(x.dtype, np.floating) and bool(np.array_equal(x, y, equal_nan=True))


def nonfinite(obj, *, host: bool = False) -> tuple[int, int]:
    """``(NaN/Inf values, values)`` over the floating tensors and arrays in ``obj`` (nested
    tuples, lists and dicts too); ``(0, 0)`` when it holds none. Torch tensors are counted
    where they are (:func:`.compare_torch.nonfinite_torch`) unless ``host``."""
    import numpy as np

    if isinstance(obj, (list, tuple)):
        counts = [nonfinite(o, host=host) for o in obj]
    elif isinstance(obj, dict):
        counts = [nonfinite(o, host=host) for o in obj.values()]
    elif is_tensor(obj) and not host:
        with one_cpu_thread(obj):
            return nonfinite_torch(obj, _chunk(obj))
    elif is_tensor(obj) or is_array(obj):
        values = _to_numpy(obj)
        if not np.issubdtype(values.dtype, np.floating):
            return 0, 0
        return int(values.size - np.count_nonzero(np.isfinite(values))), int(values.size)
    else:
        return 0, 0
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def mutated_input(
    inputs: tuple, before: tuple, *, arrays_only: bool = False, host: bool = False
) -> int | None:
    """Index of the first tensor/array input whose values differ from its copy ``before``
    (taken before the call), else None. ``arrays_only``: NumPy inputs only (NKI); ``host``:
    torch tensors through the NumPy path too (see :func:`same_values`)."""
    for i, (a, b) in enumerate(zip(inputs, before, strict=False)):
        checked = is_array(a) if arrays_only else (is_tensor(a) or is_array(a))
        if checked and not same_values(a, b, host=host):
            return i
    return None


def _tolerance(name: str, bench: dict) -> tuple[float, float]:
    """(rtol, atol): BENCH's, else the default of the reference's dtype (float32's if none)."""
    default = _FLOAT8_TOLERANCE if name.startswith("float8") else DEFAULT_TOLERANCES.get(name)
    default = default or DEFAULT_TOLERANCES["float32"]
    return float(bench.get("rtol", default[0])), float(bench.get("atol", default[1]))


def _compare_sequence(out, ref, bench: dict, errors: dict, host: bool) -> str | None:
    if not isinstance(out, (list, tuple)) or len(out) != len(ref):
        got = f"{type(out).__name__}" + (
            f" of {len(out)}" if isinstance(out, (list, tuple)) else ""
        )
        return f"output structure differs: got {got}, expected {len(ref)} outputs"
    for i, (o, r) in enumerate(zip(out, ref, strict=False)):
        why = compare(o, r, bench, errors, host=host)
        if why:
            return f"output #{i}: {why}"
    return None


def _compare_finite(o, r, rtol: float, atol: float, errors: dict) -> str | None:
    """:func:`_compare_floats` for a reference ``r`` with no NaN/Inf (the common case), in
    fewer passes over the data: the float64 differences and magnitudes made by the ufuncs
    straight from ``o`` and ``r`` (floating NumPy arrays of one shape, any width), no masks.
    The same verdict, message and ``errors`` (every operation is the same IEEE float64 one);
    2.3x faster on a 4096x4096 float32 output (0.35 -> 0.15 s, the development box)."""
    import numpy as np

    if not np.isfinite(o).all():
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(o))[0])
        return f"NaN/Inf in the output where the reference is finite (first at index {idx})"
    diff = np.empty(np.shape(o), np.float64)  # an array even for 0-d (a ufunc gives a scalar)
    np.subtract(o, r, out=diff, dtype=np.float64)
    np.abs(diff, out=diff)
    bound = np.absolute(r, dtype=np.float64)
    scale = float(bound.max()) if bound.size else 0.0
    max_abs = float(diff.max()) if diff.size else 0.0
    _note_errors(errors, max_abs, scale)
    bound *= rtol
    bound += atol * scale
    viol = diff > bound
    if viol.any():
        idx = tuple(int(i) for i in np.argwhere(viol)[0])
        return _mismatch(o, r, idx, max_abs, scale, rtol, atol, int(viol.sum()), viol.size)
    return None


def _compare_floats(o, r, rtol: float, atol: float, errors: dict) -> str | None:
    """``o`` against ``r`` (float64 NumPy arrays of one shape); see :func:`compare`."""
    import numpy as np

    finite = np.isfinite(r)
    bad = finite & ~np.isfinite(o)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return f"NaN/Inf in the output where the reference is finite (first at index {idx})"
    special = ~finite & ~((o == r) | (np.isnan(o) & np.isnan(r)))
    if special.any():
        idx = tuple(int(i) for i in np.argwhere(special)[0])
        return f"non-finite reference value not reproduced at index {idx}"
    diff = np.where(finite, np.abs(o - r), 0.0)
    scale = float(np.abs(r[finite]).max()) if finite.any() else 0.0
    max_abs = float(diff.max()) if diff.size else 0.0
    _note_errors(errors, max_abs, scale)
    viol = diff > atol * scale + rtol * np.abs(r)
    if viol.any():
        idx = tuple(int(i) for i in np.argwhere(viol)[0])
        return _mismatch(o, r, idx, max_abs, scale, rtol, atol, int(viol.sum()), viol.size)
    return None


def compare(out, ref, bench: dict, errors: dict, *, host: bool = False) -> str | None:
    """None when ``out`` matches ``ref`` within tolerance, else the reason.

    Tolerance scaled to magnitude: ``|out-ref| <= atol*max|ref| + rtol*|ref|`` elementwise
    (an all-zero output fails unless the reference is all zero); ``rtol`` / ``atol`` from
    ``bench`` (the harness's BENCH) or :data:`DEFAULT_TOLERANCES` by dtype. NaN/Inf where the
    reference is finite fails. Lists and tuples are compared element by element, other
    non-tensor values with ``==``. ``errors`` accumulates ``max_abs`` and ``max_rel``
    (= max|out-ref| / max|ref|).

    Two torch tensors are compared where they are with torch operations
    (:func:`.compare_torch.compare_torch`, float64 in slices); NumPy arrays, a tensor with an array, and
    every pair when ``host`` is set, on the host in float64 NumPy. Both paths give the same
    verdict, message and ``errors`` (tests/onsite/test_compare.py runs every case through both).
    """
    import numpy as np

    if isinstance(ref, (list, tuple)):
        return _compare_sequence(out, ref, bench, errors, host)
    if not (is_tensor(ref) or is_array(ref)):
        return None if out == ref else f"got {out!r}, expected {ref!r}"
    if not (is_tensor(out) or is_array(out)):
        return f"got a {type(out).__name__}, expected a tensor"
    if tuple(out.shape) != tuple(ref.shape):
        return f"shape {tuple(out.shape)} differs from the reference {tuple(ref.shape)}"
    if dtype_name(out) != dtype_name(ref):
        return f"dtype {dtype_name(out)} differs from the reference {dtype_name(ref)}"
    if not host and is_tensor(out) and is_tensor(ref):
        with one_cpu_thread(ref):
            tol = _tolerance(dtype_name(ref), bench) if ref.is_floating_point() else (0.0, 0.0)
            return compare_torch(out, ref, *tol, errors, _chunk(out, ref))
    o, r = _to_numpy(out), _to_numpy(ref)
    if not np.issubdtype(r.dtype, np.floating):
        bad = int(np.count_nonzero(o != r))
        return f"{bad} elements differ (exact comparison)" if bad else None
    rtol, atol = _tolerance(dtype_name(ref), bench)
    if np.isfinite(r).all():
        return _compare_finite(o, r, rtol, atol, errors)
    return _compare_floats(o.astype(np.float64), r.astype(np.float64), rtol, atol, errors)


# --- The torch path (compare_torch.py): the same rules with torch operations, on the device. ---

#: Elements per slice of the torch path's float64 work on the CPU: 256 Ki, so the two reused
#: float64 buffers (4 MiB) stay in the cache between the operations of a slice; on the 2-core
#: box (loaded, one thread) 0.15 s for a 64 MiB float32 pair against 0.27 s with 1 Mi, 0.51 s
#: with 4 Mi, 0.95 s with 16 Mi (NumPy: 0.50 s).
CHUNK = 1 << 18
#: The same on a device (CUDA): 4 Mi, 64 MiB of float64 buffers whatever the output's size,
#: and few enough slices (16 per 64 MiB float32 output) that kernel launches stay negligible.
DEVICE_CHUNK = 1 << 22


def _chunk(*tensors) -> int:
    """Elements per slice of the torch path for ``tensors`` (torch tensors, paired on one
    device, the device one's when they differ): :data:`CHUNK` when all are on the CPU, else
    :data:`DEVICE_CHUNK`. Read at each call, so a test may set either."""
    return CHUNK if all(t.device.type == "cpu" for t in tensors) else DEVICE_CHUNK


def incorrect(why: str, errors: dict, **fields) -> dict:
    """An ``incorrect`` result with ``why`` and the worst errors so far (``errors``' ``max_abs``
    and ``max_rel``, see :func:`compare`), plus ``fields`` (e.g. ``line``)."""
    return result_dict(
        "incorrect",
        why,
        max_abs_error=errors.get("max_abs"),
        max_rel_error=errors.get("max_rel"),
        **fields,
    )


def correct_on_seeds(req: dict, check_seed, derived: set[int] | frozenset = frozenset()) -> dict:
    """Run ``check_seed(seed, errors)`` for every seed of the request (it raises on the first
    wrong one and records ``max_abs``/``max_rel`` in ``errors``); an ``ok`` untimed result
    with the largest errors when all pass. Seeds in ``derived`` but the first are not checked
    here: they are checked as derived inputs (issue 29; the message says how many). Shared by
    the Triton and NKI evaluations."""
    errors: dict = {}
    seeds = list(req.get("seeds") or [1])
    as_derived = [s for s in seeds[1:] if s in derived]
    for seed in seeds:
        if seed not in as_derived:
            check_seed(seed, errors)
    note = f" ({len(as_derived)} of them as derived inputs)" if as_derived else ""
    return result_dict(
        "ok",
        f"correct on {len(seeds)} seeds{note}",
        max_abs_error=errors.get("max_abs"),
        max_rel_error=errors.get("max_rel"),
        timing="none",
    )


def shape_text(shape: dict | None) -> str:
    """``M=4, N=64`` for a ``BENCH["shapes"]`` entry; ``default`` for None."""
    if not shape:
        return "default"
    return ", ".join(f"{k}={v}" for k, v in shape.items())
