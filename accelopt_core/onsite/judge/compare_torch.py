"""The torch path of output comparison (:mod:`.compare`, issue 50): the same rules, verdicts,
messages and errors as the NumPy path, with torch operations on the tensors' own device.

Floating values are checked in float64 slices of ``chunk`` elements (the caller's
:data:`.compare.CHUNK` on the CPU, :data:`.compare.DEVICE_CHUNK` on a device), so the extra
memory stays bounded; CPU checks run on one intra-op thread (:func:`one_cpu_thread`). Also holds
the two helpers both paths share (:func:`note_errors`, :func:`mismatch`), so that this module
imports nothing from :mod:`.compare` (no import loop). Standard library only at module level:
torch is imported inside the functions, where the target has it.
"""

from __future__ import annotations

import contextlib
import math


def note_errors(errors: dict, max_abs: float, scale: float) -> None:
    """Keep the worst ``max_abs`` and ``max_rel`` (``max_abs / max|ref|``) in ``errors``."""
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    errors["max_abs"] = max(errors.get("max_abs", 0.0), max_abs)
    errors["max_rel"] = max(errors.get("max_rel", 0.0), max_rel)


def mismatch(o, r, idx: tuple, max_abs: float, scale: float, rtol: float, atol: float,
             outside: int, size: int) -> str:  # fmt: skip
    """The message of a value outside the tolerance at ``idx`` (``o``, ``r``: the arrays or
    tensors, indexed with ``idx``)."""
    got, expected = float(o[idx]), float(r[idx])
    return (
        f"mismatch at index {idx}: got {got:.6g}, expected {expected:.6g} "
        f"(max abs error {max_abs:.3g}; tolerance {atol:g}*max|ref| + {rtol:g}*|ref|, "
        f"max|ref| = {scale:.3g}; {outside} of {size} elements outside)"
    )


@contextlib.contextmanager
def one_cpu_thread(t):
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


def _slices(t, chunk: int):
    """``(start, stop)`` of the ``chunk``-element slices of the flat tensor ``t``."""
    n = t.numel()
    return ((s, min(s + chunk, n)) for s in range(0, n, chunk))


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
    return str(t.dtype).replace("torch.", "").startswith("float8")


def same_values_torch(a, b, chunk: int) -> bool:
    """:func:`.compare.same_values` for two torch tensors, where they are (``torch.equal``,
    then a NaN-aware pass in ``chunk``-element slices when something differs and ``a`` is
    floating)."""
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
    for s, e in _slices(x, chunk):
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


def _f64_slices(o, r, chunk: int):
    """``(start, a, b)`` for each ``chunk``-element slice of the flat tensors ``o`` and ``r``
    (one device, any floating dtype): ``a`` and ``b`` hold the slice in float64 (exact), in
    two buffers reused from slice to slice, so the caller may work in them in place."""
    import torch

    bufs = torch.empty((2, min(chunk, r.numel())), dtype=torch.float64, device=r.device)
    for s, e in _slices(r, chunk):
        a, b = bufs[0, : e - s], bufs[1, : e - s]
        a.copy_(o[s:e])
        b.copy_(r[s:e])
        yield s, a, b


def _all_finite(x, chunk: int) -> bool:
    """True when the flat floating tensor ``x`` holds no NaN/Inf: its minimum and maximum
    (``aminmax``, which propagates NaN) are finite; no temporary of ``x``'s size (float8,
    which has no ``aminmax``, in float32 slices of ``chunk`` elements)."""
    import torch

    if not x.numel():
        return True
    if not _is_float8(x):
        return bool(torch.isfinite(torch.stack(torch.aminmax(x))).all())
    ends = [torch.stack(torch.aminmax(x[s:e].float())) for s, e in _slices(x, chunk)]
    return bool(torch.isfinite(torch.stack(ends)).all())


def nonfinite_torch(t, chunk: int) -> tuple[int, int]:
    """:func:`.compare.nonfinite` for one torch tensor, counted where it is (float8 via
    float32): a pass of :func:`_all_finite`, then a count in ``chunk``-element slices only
    when something is not finite."""
    import torch

    if not t.is_floating_point():
        return 0, 0
    x = t.detach().reshape(-1)
    if _all_finite(x, chunk):
        return 0, x.numel()
    counts = []
    for s, e in _slices(x, chunk):
        xs = x[s:e].float() if _is_float8(x) else x[s:e]
        counts.append(xs.numel() - torch.isfinite(xs).sum())
    return int(torch.stack(counts).sum()), x.numel()


def compare_torch(out, ref, rtol: float, atol: float, errors: dict, chunk: int) -> str | None:
    """:func:`.compare.compare` of two torch tensors of one shape and dtype, with torch
    operations on their device (``rtol``, ``atol``: the tolerance, used for floating values
    only). Floating values in float64 slices of ``chunk`` elements, the same IEEE operations
    in the same order as the NumPy path (so the same verdict, message and ``errors``): a first
    pass gives max|ref| and max|out-ref| (not finite when either holds NaN/Inf: then a closer
    look, rare); a second finds the values outside the tolerance, skipped when max|out-ref| <=
    atol*max|ref| (then none can be, ``rtol`` being >= 0)."""
    import torch

    o, r = _flat_pair(out, ref)
    if not r.is_floating_point():
        bad = sum(int(torch.count_nonzero(o[s:e] != r[s:e])) for s, e in _slices(r, chunk))
        return f"{bad} elements differ (exact comparison)" if bad else None
    maxima = []  # per slice: max|o-r|, max|r| (NaN or Inf when either holds NaN/Inf)
    for _, a, b in _f64_slices(o, r, chunk):
        maxima.append(torch.stack([a.sub_(b).abs_().amax(), b.abs_().amax()]))
    max_abs, scale = (
        (float(v) for v in torch.stack(maxima).amax(dim=0).tolist()) if maxima else (0.0, 0.0)
    )
    if not (math.isfinite(scale) and math.isfinite(max_abs)):  # NaN/Inf somewhere (rare)
        if not _all_finite(r, chunk):  # in the reference: the general rules
            return _compare_torch_nonfinite(out, ref, (o, r), rtol, atol, errors, chunk)
        first = _first(~torch.isfinite(o.float() if _is_float8(o) else o))
        if int(first) >= 0:
            idx = _unravel(int(first), ref.shape)
            return f"NaN/Inf in the output where the reference is finite (first at index {idx})"
        # else only float64 overflow of out-ref (float64 outputs near the range): max_abs Inf
    note_errors(errors, max_abs, scale)
    if rtol >= 0 and max_abs <= atol * scale:  # every bound is >= atol*scale (rounded)
        return None
    return _outside_torch(out, ref, (o, r, False, chunk), scale, max_abs, rtol, atol)


def _compare_torch_nonfinite(out, ref, flat, rtol, atol, errors: dict, chunk: int):
    """The torch path of ``compare._compare_floats`` (a reference with NaN/Inf), in slices
    (``flat``: ``out`` and ``ref`` flattened on one device): NaN/Inf in the output where the
    reference is finite, then a non-finite reference value not reproduced, then the tolerance
    over the finite reference values. The reason (a str), else None."""
    import torch

    o, r = flat
    f64 = torch.float64
    firsts, maxima = [], []
    for s, e in _slices(r, chunk):
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
        for f, (s, _) in zip(firsts_h, _slices(r, chunk), strict=True):
            if f[which] >= 0:
                return text.format(_unravel(s + f[which], ref.shape))
    scale, max_abs = (float(v) for v in torch.stack(maxima).amax(dim=0).tolist())
    note_errors(errors, max_abs, scale)
    return _outside_torch(out, ref, (o, r, True, chunk), scale, max_abs, rtol, atol)


def _outside_torch(out, ref, flat, scale, max_abs, rtol, atol) -> str | None:
    """The elements outside ``|o-r| <= atol*scale + rtol*|r|`` (``flat``: ``(o, r, masked,
    chunk)``, the flat tensors, whether the difference is 0 where ``r`` is not finite, and the
    slice length), as :func:`mismatch`'s message, else None. Counts in one pass; the first
    index from the first slice that has any (computed again there)."""
    import torch

    o, r, masked, chunk = flat

    def outside(a, b):  # a, b: one slice of o and r in float64, overwritten
        finite = torch.isfinite(b) if masked else None
        diff = a.sub_(b).abs_()
        if masked:
            diff.masked_fill_(~finite, 0.0)
        return diff > b.abs_().mul_(rtol).add_(atol * scale)

    counts = [outside(a, b).sum() for _, a, b in _f64_slices(o, r, chunk)]
    counts_h = torch.stack(counts).tolist() if counts else []
    if not any(counts_h):
        return None
    k = next(i for i, c in enumerate(counts_h) if c)
    s, e = k * chunk, min((k + 1) * chunk, r.numel())
    _, a, b = next(_f64_slices(o[s:e], r[s:e], chunk))
    idx = _unravel(s + int(_first(outside(a, b))), ref.shape)
    return mismatch(out, ref, idx, max_abs, scale, rtol, atol, int(sum(counts_h)), r.numel())
