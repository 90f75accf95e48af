"""Output comparison: a candidate's outputs against the reference's (DESIGN.md, rule 3).

Exact structure, shape and dtype; NaN/Inf where the reference is finite fails; floating outputs
within a tolerance scaled to the reference's magnitude, so all-zero outputs fail; integer and
boolean outputs exactly. Works on torch tensors and NumPy arrays (NumPy is imported inside the
functions: the target has it with torch).

Two paths with the same verdicts, messages and errors (issue 50): torch tensors are checked where
they are, with torch operations only (on the GPU for CUDA tensors, in place on the CPU for CPU
tensors; the float64 work in slices (:data:`CHUNK`, :data:`DEVICE_CHUNK`), so the extra memory stays
bounded); NumPy arrays (NKI kernels), a tensor paired with an array, and any call with
``host=True`` take the NumPy path on the host in float64, as before.
"""

from __future__ import annotations

import contextlib
import math

from ..protocol import result_dict

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
    tensors are compared where they are (:func:`_same_values_torch`); otherwise, or with
    ``host``, as float64/raw NumPy copies on the host."""
    import numpy as np

    if not host and is_tensor(a) and is_tensor(b):
        with _one_cpu_thread(b):
            return _same_values_torch(a, b)
    x, y = _to_numpy(a), _to_numpy(b)
    if x.shape != y.shape:
        return False
    if np.array_equal(x, y):  # two passes; NaN-aware only when something differs
        return True
    return np.issubdtype(x.dtype, np.floating) and bool(np.array_equal(x, y, equal_nan=True))


def nonfinite(obj, *, host: bool = False) -> tuple[int, int]:
    """``(NaN/Inf values, values)`` over the floating tensors and arrays in ``obj`` (nested
    tuples, lists and dicts too); ``(0, 0)`` when it holds none. Torch tensors are counted
    where they are (:func:`_nonfinite_torch`) unless ``host``."""
    import numpy as np

    if isinstance(obj, (list, tuple)):
        counts = [nonfinite(o, host=host) for o in obj]
    elif isinstance(obj, dict):
        counts = [nonfinite(o, host=host) for o in obj.values()]
    elif is_tensor(obj) and not host:
        with _one_cpu_thread(obj):
            return _nonfinite_torch(obj)
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


def _note_errors(errors: dict, max_abs: float, scale: float) -> None:
    """Keep the worst ``max_abs`` and ``max_rel`` (``max_abs / max|ref|``) in ``errors``."""
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    errors["max_abs"] = max(errors.get("max_abs", 0.0), max_abs)
    errors["max_rel"] = max(errors.get("max_rel", 0.0), max_rel)


def _mismatch(o, r, idx: tuple, max_abs: float, scale: float, rtol: float, atol: float,
              outside: int, size: int) -> str:  # fmt: skip
    """The message of a value outside the tolerance at ``idx`` (``o``, ``r``: the arrays)."""
    got, expected = float(o[idx]), float(r[idx])
    return (
        f"mismatch at index {idx}: got {got:.6g}, expected {expected:.6g} "
        f"(max abs error {max_abs:.3g}; tolerance {atol:g}*max|ref| + {rtol:g}*|ref|, "
        f"max|ref| = {scale:.3g}; {outside} of {size} elements outside)"
    )


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
    (:func:`_compare_torch`, float64 in slices); NumPy arrays, a tensor with an array, and
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
        with _one_cpu_thread(ref):
            return _compare_torch(out, ref, bench, errors)
    o, r = _to_numpy(out), _to_numpy(ref)
    if not np.issubdtype(r.dtype, np.floating):
        bad = int(np.count_nonzero(o != r))
        return f"{bad} elements differ (exact comparison)" if bad else None
    rtol, atol = _tolerance(dtype_name(ref), bench)
    if np.isfinite(r).all():
        return _compare_finite(o, r, rtol, atol, errors)
    return _compare_floats(o.astype(np.float64), r.astype(np.float64), rtol, atol, errors)


# --- The torch path: the same rules with torch operations, on the tensors' own device. ---

#: Elements per slice of the torch path's float64 work on the CPU: 256 Ki, so the two reused
#: float64 buffers (:func:`_f64_slices`, 4 MiB) stay in the cache between the operations of a
#: slice; on the 2-core box (loaded, one thread) 0.15 s for a 64 MiB float32 pair against 0.27
#: s with 1 Mi, 0.51 s with 4 Mi, 0.95 s with 16 Mi (NumPy: 0.50 s).
CHUNK = 1 << 18
#: The same on a device (CUDA): 4 Mi, 64 MiB of float64 buffers whatever the output's size,
#: and few enough slices (16 per 64 MiB float32 output) that kernel launches stay negligible.
DEVICE_CHUNK = 1 << 22


@contextlib.contextmanager
def _one_cpu_thread(t):
    """Torch's intra-op threads set to one while the checks of ``t`` (a tensor) run on the
    CPU, then restored (no effect for a device tensor). The checks are memory-bound slices:
    on the 2-core box, loaded as a search loads it, torch's second thread made them 3 to 20
    times slower than one (benchmarks/compare_speed.py, 64 MiB float32: 0.15 s with one
    thread and 256 Ki-element slices against 1.3 s with two)."""
    import torch

    threads = torch.get_num_threads()
    if t.device.type != "cpu" or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _flat_pair(a, b):
    """``a`` and ``b`` (torch tensors of one shape) detached and flattened in row-major
    order (a copy only when not contiguous), on one device: a CPU tensor paired with a device
    tensor is copied to that device."""
    a, b = a.detach(), b.detach()
    if a.device != b.device:
        if a.device.type == "cpu":
            a = a.to(b.device)
        else:
            b = b.to(a.device)
    return a.reshape(-1), b.reshape(-1)


def _chunk(t) -> int:
    """Elements per slice for the tensor ``t``: :data:`CHUNK` on the CPU, else
    :data:`DEVICE_CHUNK`."""
    return CHUNK if t.device.type == "cpu" else DEVICE_CHUNK


def _slices(t):
    """``(start, stop)`` of the slices (:func:`_chunk`) of the flat tensor ``t``."""
    n, k = t.numel(), _chunk(t)
    return ((s, min(s + k, n)) for s in range(0, n, k))


def _first(mask):
    """The first True position of the 1-D bool tensor ``mask``, else -1 (a 0-d int64 tensor on
    ``mask``'s device: no host synchronisation). ``argmax`` returns the first maximum."""
    import torch

    return torch.where(mask.any(), mask.to(torch.uint8).argmax(), -1)


def _unravel(k: int, shape) -> tuple[int, ...]:
    """Row-major index tuple of flat position ``k`` in ``shape`` (``numpy.unravel_index``)."""
    idx = []
    for n in reversed(tuple(shape)):
        k, i = divmod(k, n)
        idx.append(int(i))
    return tuple(reversed(idx))


def _is_float8(t) -> bool:
    return dtype_name(t).startswith("float8")


def _same_values_torch(a, b) -> bool:
    """:func:`same_values` for two torch tensors, where they are (``torch.equal``, then a
    NaN-aware pass in slices when something differs and ``a`` is floating)."""
    import torch

    if tuple(a.shape) != tuple(b.shape):
        return False
    x, y = _flat_pair(a, b)
    if x.dtype == y.dtype and not _is_float8(x):  # torch.equal: values (-0 == 0, NaN != NaN)
        if torch.equal(x, y):
            return True
        if not x.is_floating_point():
            return False
    same = []
    for s, e in _slices(x):
        xs, ys = x[s:e], y[s:e]
        if _is_float8(xs):  # float8 has no isnan/equal kernels everywhere; float32 is exact
            xs = xs.float()
        if _is_float8(ys):
            ys = ys.float()
        eq = xs == ys
        if x.is_floating_point():
            eq |= torch.isnan(xs) & torch.isnan(ys)
        same.append(eq.all())
    return bool(torch.stack(same).all()) if same else True


def _f64_slices(o, r):
    """``(start, a, b)`` for each :func:`_chunk`-element slice of the flat tensors ``o`` and
    ``r`` (one device, any floating dtype): ``a`` and ``b`` hold the slice in float64 (exact),
    in two buffers reused from slice to slice, so the caller may work in them in place."""
    import torch

    bufs = torch.empty((2, min(_chunk(r), r.numel())), dtype=torch.float64, device=r.device)
    for s, e in _slices(r):
        a, b = bufs[0, : e - s], bufs[1, : e - s]
        a.copy_(o[s:e])
        b.copy_(r[s:e])
        yield s, a, b


def _all_finite(x) -> bool:
    """True when the flat floating tensor ``x`` holds no NaN/Inf: its minimum and maximum
    (``aminmax``, which propagates NaN) are finite; no temporary of ``x``'s size (float8,
    which has no ``aminmax``, in float32 slices)."""
    import torch

    if not x.numel():
        return True
    if not _is_float8(x):
        return bool(torch.isfinite(torch.stack(torch.aminmax(x))).all())
    ends = [torch.stack(torch.aminmax(x[s:e].float())) for s, e in _slices(x)]
    return bool(torch.isfinite(torch.stack(ends)).all())


def _nonfinite_torch(t) -> tuple[int, int]:
    """:func:`nonfinite` for one torch tensor, counted where it is (float8 via float32): a
    pass of :func:`_all_finite`, then a count only when something is not finite."""
    import torch

    if not t.is_floating_point():
        return 0, 0
    x = t.detach().reshape(-1)
    if _all_finite(x):
        return 0, x.numel()
    counts = []
    for s, e in _slices(x):
        xs = x[s:e].float() if _is_float8(x) else x[s:e]
        counts.append(xs.numel() - torch.isfinite(xs).sum())
    return int(torch.stack(counts).sum()), x.numel()


def _compare_torch(out, ref, bench: dict, errors: dict) -> str | None:
    """:func:`compare` of two torch tensors of one shape and dtype, with torch operations on
    their device. Floating values in float64 slices (:func:`_chunk`), the same IEEE
    operations in the same order as the NumPy path (so the same verdict, message and
    ``errors``): a first pass gives max|ref| and max|out-ref| (not finite when either holds
    NaN/Inf: then a closer look, rare); a second finds the values outside the tolerance,
    skipped when max|out-ref| <= atol*max|ref| (then none can be, ``rtol`` being >= 0)."""
    import torch

    o, r = _flat_pair(out, ref)
    if not r.is_floating_point():
        bad = sum(int(torch.count_nonzero(o[s:e] != r[s:e])) for s, e in _slices(r))
        return f"{bad} elements differ (exact comparison)" if bad else None
    rtol, atol = _tolerance(dtype_name(ref), bench)
    maxima = []  # per slice: max|o-r|, max|r| (NaN or Inf when either holds NaN/Inf)
    for _, a, b in _f64_slices(o, r):
        maxima.append(torch.stack([a.sub_(b).abs_().amax(), b.abs_().amax()]))
    max_abs, scale = (
        (float(v) for v in torch.stack(maxima).amax(dim=0).tolist()) if maxima else (0.0, 0.0)
    )
    if not (math.isfinite(scale) and math.isfinite(max_abs)):  # NaN/Inf somewhere (rare)
        if not _all_finite(r):  # in the reference: the general rules
            return _compare_torch_nonfinite(out, ref, o, r, rtol, atol, errors)
        first = _first(~torch.isfinite(o.float() if _is_float8(o) else o))
        if int(first) >= 0:
            idx = _unravel(int(first), ref.shape)
            return f"NaN/Inf in the output where the reference is finite (first at index {idx})"
        # else only float64 overflow of out-ref (float64 outputs near the range): max_abs Inf
    _note_errors(errors, max_abs, scale)
    if rtol >= 0 and max_abs <= atol * scale:  # every bound is >= atol*scale (rounded)
        return None
    return _outside_torch(out, ref, o, r, False, scale, max_abs, rtol, atol)


def _compare_torch_nonfinite(out, ref, o, r, rtol, atol, errors: dict) -> str | None:
    """The torch path of :func:`_compare_floats` (a reference with NaN/Inf), in slices:
    NaN/Inf in the output where the reference is finite, then a non-finite reference value
    not reproduced, then the tolerance over the finite reference values."""
    import torch

    f64 = torch.float64
    firsts, maxima = [], []
    for s, e in _slices(r):
        os_, rs = o[s:e].to(f64), r[s:e].to(f64)
        finite = torch.isfinite(rs)
        bad = finite & ~torch.isfinite(os_)
        special = ~finite & ~((os_ == rs) | (torch.isnan(os_) & torch.isnan(rs)))
        firsts.append(torch.stack([_first(bad), _first(special)]))
        diff = torch.where(finite, (os_ - rs).abs(), 0.0)
        maxima.append(torch.stack([torch.where(finite, rs.abs(), 0.0).amax(), diff.amax()]))
    firsts_h = torch.stack(firsts).tolist()
    for which, text in (
        (0, "NaN/Inf in the output where the reference is finite (first at index {})"),
        (1, "non-finite reference value not reproduced at index {}"),
    ):
        for f, (s, _) in zip(firsts_h, _slices(r), strict=True):
            if f[which] >= 0:
                return text.format(_unravel(s + f[which], ref.shape))
    scale, max_abs = (float(v) for v in torch.stack(maxima).amax(dim=0).tolist())
    _note_errors(errors, max_abs, scale)
    return _outside_torch(out, ref, o, r, True, scale, max_abs, rtol, atol)


def _outside_torch(out, ref, o, r, masked, scale, max_abs, rtol, atol) -> str | None:
    """The elements of ``o`` outside ``|o-r| <= atol*scale + rtol*|r|`` (``o``, ``r``: the
    flat tensors; ``masked``: the difference is 0 where ``r`` is not finite), as
    :func:`_mismatch`'s message, else None. Counts in one pass; the first index from the
    first slice that has any (computed again there)."""
    import torch

    def outside(a, b):  # a, b: one slice of o and r in float64, overwritten
        finite = torch.isfinite(b) if masked else None
        diff = a.sub_(b).abs_()
        if masked:
            diff.masked_fill_(~finite, 0.0)
        return diff > b.abs_().mul_(rtol).add_(atol * scale)

    counts = [outside(a, b).sum() for _, a, b in _f64_slices(o, r)]
    counts_h = torch.stack(counts).tolist() if counts else []
    if not any(counts_h):
        return None
    k = next(i for i, c in enumerate(counts_h) if c)
    s, e = k * _chunk(r), min((k + 1) * _chunk(r), r.numel())
    _, a, b = next(_f64_slices(o[s:e], r[s:e]))
    idx = _unravel(s + int(_first(outside(a, b))), ref.shape)
    return _mismatch(out, ref, idx, max_abs, scale, rtol, atol, int(sum(counts_h)), r.numel())


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
