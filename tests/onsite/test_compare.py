"""Output comparison: tolerance scaled to the reference's magnitude, structure mismatches."""

from __future__ import annotations

import pytest

from accelopt_core.onsite.judge import compare


def _cuda() -> bool:
    """True where a CUDA device is there (the GPU window): the torch path runs there too."""
    import torch

    return torch.cuda.is_available()


def _cases():
    """Outputs against finite references: equal, within and outside the tolerance, NaN/Inf in
    the output, all zeros, empty, several dtypes and ranks."""
    import numpy as np

    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.float16, np.float64):
        for shape in ((0,), (5,), (33, 17), (4, 8, 3)):
            ref = (rng.standard_normal(shape) * 10).astype(dtype)
            yield ref.copy(), ref
            yield (ref + rng.standard_normal(shape).astype(dtype) * dtype(1e-6)).astype(dtype), ref
            if ref.size:
                far = ref.copy()
                far.flat[ref.size // 2] += dtype(3)
                yield far, ref
                worse = (ref * dtype(1.01)).astype(dtype)
                yield worse, ref
                bad = ref.copy()
                bad.flat[-1] = np.nan
                yield bad, ref
                inf = ref.copy()
                inf.flat[0] = np.inf
                yield inf, ref
            yield np.zeros(shape, dtype), np.zeros(shape, dtype)
            yield np.zeros(shape, dtype), ref


def test_the_fast_path_for_finite_references_says_what_the_general_one_says():
    """:func:`compare._compare_finite` (a reference with no NaN/Inf) against the general
    :func:`compare._compare_floats` on float64 copies: the same verdict, message and errors."""
    import numpy as np

    seen = set()
    for out, ref in _cases():
        rtol, atol = compare._tolerance(str(ref.dtype), {})
        fast_errors: dict = {}
        general_errors: dict = {}
        fast = compare._compare_finite(out, ref, rtol, atol, fast_errors)
        general = compare._compare_floats(
            out.astype(np.float64), ref.astype(np.float64), rtol, atol, general_errors
        )
        assert fast == general, (out, ref)
        assert fast_errors == general_errors, (out, ref)
        seen.add((fast or "ok").split(" ")[0])
    assert seen == {"ok", "mismatch", "NaN/Inf"}  # every kind of verdict was met


# --- Both paths (issue 50): the torch path, on the tensors' device, says what NumPy says. ---

PATHS = ["numpy", "torch-cpu"] + (["torch-cuda"] if _cuda() else [])


def _torch(x, device: str):
    """``x`` (a NumPy array or torch tensor) as a torch tensor on ``device``."""
    import torch

    return (torch.from_numpy(x) if not torch.is_tensor(x) else x).to(device)


def _check(path: str, out, ref, bench=None, errors=None):
    """:func:`compare.compare` through ``path``: ``numpy`` (arrays, or tensors with
    ``host=True``: today's NumPy path), ``torch-cpu`` / ``torch-cuda`` (tensors there)."""
    bench = {} if bench is None else bench
    errors = {} if errors is None else errors
    if path == "numpy":
        return compare.compare(out, ref, bench, errors, host=True)
    device = path.split("-")[1]
    return compare.compare(_on(out, device), _on(ref, device), bench, errors)


def _on(obj, device: str):
    if isinstance(obj, (list, tuple)):
        return type(obj)(_on(o, device) for o in obj)
    if compare.is_array(obj) or compare.is_tensor(obj):
        return _torch(obj, device)
    return obj


@pytest.fixture(params=PATHS)
def path(request) -> str:
    return request.param


@pytest.fixture(params=PATHS[1:])
def torch_path(request) -> str:
    """The torch paths only: the tests that hold them to the NumPy path's answers."""
    return request.param


def test_each_rule_gives_its_message_on_both_paths(path):
    import numpy as np

    nan, inf = np.nan, np.inf
    ref = np.array([1.0, nan, inf], np.float32)
    assert _check(path, ref.copy(), ref) is None  # NaN and Inf where the reference has them
    assert _check(path, np.array([1.0, nan, -inf], np.float32), ref) == (
        "non-finite reference value not reproduced at index (2,)"
    )
    assert _check(path, np.array([1.0, 0.0, inf], np.float32), ref) == (
        "non-finite reference value not reproduced at index (1,)"
    )
    assert _check(path, np.array([[2.0, nan]]), np.array([[2.0, 2.0]])) == (
        "NaN/Inf in the output where the reference is finite (first at index (0, 1))"
    )
    assert _check(path, np.array([inf, 1.0]), np.array([1.0, inf])) == (
        "NaN/Inf in the output where the reference is finite (first at index (0,))"
    )
    assert _check(path, np.arange(6).reshape(2, 3), np.arange(6).reshape(2, 3)) is None
    assert _check(path, np.arange(6) * 2, np.arange(6)) == "5 elements differ (exact comparison)"
    assert _check(path, np.array([True, False]), np.array([True, True])) == (
        "1 elements differ (exact comparison)"
    )
    errors: dict = {}
    assert _check(path, np.full((), 0.5), np.ones(()), errors=errors) == (
        "mismatch at index (): got 0.5, expected 1 (max abs error 0.5; tolerance "
        "1e-07*max|ref| + 1e-07*|ref|, max|ref| = 1; 1 of 1 elements outside)"
    )
    assert errors == {"max_abs": 0.5, "max_rel": 0.5}


def test_tolerance_scales_with_the_reference_magnitude_on_both_paths(path):
    import numpy as np

    ref = np.array([1000.0, 0.0, -2.0], dtype=np.float32)
    errors: dict = {}
    assert _check(path, ref + np.float32(0.05), ref, errors=errors) is None
    assert errors["max_rel"] == pytest.approx(0.05 / 1000, rel=1e-3)
    assert "3 of 3 elements outside" in _check(path, ref + np.float32(0.2), ref)
    zeros = np.zeros(3, dtype=np.float32)
    assert _check(path, zeros, zeros) is None
    assert _check(path, zeros, ref).startswith("mismatch at index (0,): got 0, expected 1000")
    assert _check(path, zeros, (ref, ref)) == (
        "output structure differs: got ndarray, expected 2 outputs"
        if path == "numpy"
        else "output structure differs: got Tensor, expected 2 outputs"
    )
    assert _check(path, (zeros, zeros), (ref, zeros)).startswith("output #0: mismatch")
    assert _check(path, (zeros,), (ref, ref)) == (
        "output structure differs: got tuple of 1, expected 2 outputs"
    )
    assert _check(path, zeros, ref, bench={"atol": 1.0}) is None  # BENCH's tolerance wins


def test_shape_dtype_and_kind_mismatches_are_named_on_both_paths(path):
    import numpy as np

    a = np.zeros((2, 3), np.float32)
    assert _check(path, a.reshape(3, 2), a) == "shape (3, 2) differs from the reference (2, 3)"
    assert _check(path, a.astype(np.float16), a) == (
        "dtype float16 differs from the reference float32"
    )
    assert _check(path, 3, a) == "got a int, expected a tensor"
    assert _check(path, 3, 4) == "got 3, expected 4"
    assert _check(path, [a, 4], [a, 4]) is None


def _torch_cases():
    """Torch (out, ref) pairs over every dtype the judge meets, with every kind of verdict:
    equal, within and outside the tolerance, NaN/Inf in the output, NaN/Inf in both (equal or
    not), all zeros, empty and 0-d, non-contiguous views, float64 overflow of out-ref."""
    import torch

    g = torch.Generator().manual_seed(11)
    nan, inf = float("nan"), float("inf")
    floats = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    floats += [torch.float8_e4m3fn, torch.float8_e5m2]
    for dtype in floats:
        for shape in ((0,), (), (5,), (33, 17), (4, 8, 3)):
            ref = (torch.randn(shape, generator=g) * 10).to(dtype)
            near = ref.double() + torch.randn(shape, generator=g, dtype=torch.float64) * 1e-6
            yield ref.clone(), ref
            yield near.to(dtype), ref
            yield torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)
            yield torch.zeros(shape, dtype=dtype), ref
            if ref.numel() < 2:
                continue
            flat = ref.reshape(-1)
            for k, v in ((flat.numel() // 2, 3.0), (-1, nan), (0, inf), (1, -inf)):
                o = flat.double()
                o[k] = o[k] + v if v == 3.0 else v
                yield o.to(dtype).reshape(shape), ref
            yield (ref.double() * 1.01).to(dtype), ref
            both = flat.double()  # NaN/Inf in both, where the output reproduces them or not
            both[0], both[-1] = nan, inf
            both_ref = both.to(dtype).reshape(shape)
            yield both_ref.clone(), both_ref
            for k, v in ((0, 1.0), (-1, -inf), (-1, nan), (1, nan), (2, 1e4)):
                o = both.clone()
                o[k] = v
                yield o.to(dtype).reshape(shape), both_ref
            if len(shape) >= 2:  # non-contiguous views, compared with contiguous copies
                t = ref.transpose(0, 1)
                yield t.contiguous(), t
                off = t.double().clone()
                off[-1, 0] += 5
                yield off.to(dtype), t
                yield ref[::2, 1:], ref[::2, 1:].contiguous()
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.int8, torch.bool):
        ref = torch.randint(0, 2 if dtype == torch.bool else 100, (6, 7), generator=g).to(dtype)
        yield ref.clone(), ref
        off = ref.clone()
        off[3, 4] = ~off[3, 4] if dtype == torch.bool else off[3, 4] + 1
        yield off, ref
        yield torch.zeros_like(ref), ref
        yield ref.t(), ref.t().contiguous()
    big = torch.tensor([1e308, -1e308, 3.0], dtype=torch.float64)
    yield -big, big  # out - ref overflows float64: max abs error inf on both paths
    yield torch.full((3,), 2.0, dtype=torch.float64), torch.tensor([inf, -inf, nan])


def _verdicts(path: str, cases, bench=None) -> set[str]:
    """Compare each case through ``path`` and through NumPy (``host=True``): the same verdict,
    message and errors; returns the kinds of verdict met."""
    seen = set()
    for out, ref in cases:
        host_errors: dict = {}
        errors: dict = {}
        expected = compare.compare(out, ref, dict(bench or {}), host_errors, host=True)
        got = _check(path, out, ref, bench, errors)
        assert got == expected, (path, out, ref)
        assert errors == host_errors, (path, out, ref)
        seen.add((got or "ok").split(" ")[0])
    return seen


def test_the_torch_path_says_what_numpy_says_on_every_dtype_and_kind(torch_path):
    seen = _verdicts(torch_path, _torch_cases())
    assert {"ok", "mismatch", "NaN/Inf", "non-finite", "1"} <= seen  # every kind was met


def test_the_numpy_cases_say_the_same_through_torch(torch_path):
    seen = _verdicts(torch_path, ((_torch(o, "cpu"), _torch(r, "cpu")) for o, r in _cases()))
    assert seen == {"ok", "mismatch", "NaN/Inf"}


@pytest.mark.parametrize("bench", [{"rtol": 0.0, "atol": 0.0}, {"rtol": -1e-3}, {"atol": 1e30}])
def test_odd_tolerances_say_the_same_on_both_paths(torch_path, bench):
    """Zero, negative and huge tolerances (BENCH's to give): the torch path's shortcut (no
    second pass when max|out-ref| <= atol*max|ref|) must not change a verdict."""
    _verdicts(torch_path, _torch_cases(), bench)


def test_slices_meet_in_the_middle_of_everything(torch_path, monkeypatch):
    """With slices of 7 elements every case spans several: the first index, the counts and
    the maxima are gathered across slices exactly as NumPy finds them over the whole."""
    monkeypatch.setattr(compare, "CHUNK", 7)
    monkeypatch.setattr(compare, "DEVICE_CHUNK", 7)
    seen = _verdicts(torch_path, _torch_cases())
    assert {"ok", "mismatch", "NaN/Inf", "non-finite"} <= seen


def test_the_torch_path_makes_no_numpy_copy(monkeypatch):
    """Tensors stay where they are: the torch path never calls the host conversion."""
    import torch

    def refuse(_):
        raise AssertionError("a NumPy copy on the torch path")

    monkeypatch.setattr(compare, "_to_numpy", refuse)
    ref = torch.randn(100)
    out = ref.clone()
    out[50] = float("nan")
    assert compare.compare(ref.clone(), ref, {}, {}) is None
    assert "index (50,)" in compare.compare(out, ref, {}, {})
    assert compare.nonfinite((out, [ref], {"x": torch.arange(3)})) == (1, 200)
    assert compare.same_values(out, out.clone())
    assert compare.mutated_input((ref, out), (ref.clone(), out.clone())) is None
    with pytest.raises(AssertionError, match="NumPy copy"):
        compare.compare(out, ref, {}, {}, host=True)


def test_a_64_mib_pair_says_the_same_on_both_paths(torch_path):
    """A 64 MiB float32 pair (16 Mi elements, several slices): equal, one value off in the
    last slice, NaN in the last slice, and an all-zero output."""
    import torch

    ref = torch.randn(1 << 24, generator=torch.Generator().manual_seed(3))
    off = ref.clone()
    off[-3] += 1.0
    nan = ref.clone()
    nan[-2] = float("nan")
    cases = [(ref.clone(), ref), (off, ref), (nan, ref), (torch.zeros_like(ref), ref)]
    assert _verdicts(torch_path, cases) == {"ok", "mismatch", "NaN/Inf"}
    assert _check(torch_path, off, ref).startswith("mismatch at index (16777213,)")


def test_nonfinite_counts_on_both_paths(path):
    import torch

    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float8_e5m2):
        host = compare.nonfinite((x.to(dtype), [x]), host=True)
        assert host == (6, 8)
        if path != "numpy":
            device = path.split("-")[1]
            assert compare.nonfinite((x.to(dtype).to(device), [x.to(device)])) == host
    assert compare.nonfinite(torch.arange(5)) == (0, 0)
    assert compare.nonfinite(torch.zeros(0)) == (0, 0)
    e4 = torch.tensor([1.0, float("nan")]).to(torch.float8_e4m3fn)  # NaN, no Inf in e4m3fn
    assert compare.nonfinite(e4) == compare.nonfinite(e4, host=True) == (1, 2)


def test_inputs_compare_equal_with_nan_where_both_have_it_on_both_paths(path):
    import numpy as np

    host = path == "numpy"
    dev = "cpu" if host else path.split("-")[1]

    def same(a, b):
        return compare.same_values(_torch(a, dev), _torch(b, dev), host=host)

    a = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    assert same(a, a.copy())
    assert not same(a, np.array([1.0, 2.0, 3.0], dtype=np.float32))
    assert not same(a, np.array([1.0, np.nan, 4.0], dtype=np.float32))
    assert same(np.array([0.0, 1.0]), np.array([-0.0, 1.0]))  # values, not bits
    assert same(np.arange(4), np.arange(4))
    assert not same(np.arange(4), np.arange(1, 5))
    assert not same(np.arange(4), np.arange(5))
    assert same(np.arange(4), np.arange(4.0))  # values across dtypes, as NumPy has it
    t = _torch(np.arange(12.0).reshape(3, 4), dev)
    assert compare.same_values(t.t(), t.t().contiguous(), host=host)
    assert compare.mutated_input((t, t.t()), (t.clone(), t.t() + 1), host=host) == 1
    assert compare.mutated_input((t, 3), (t.clone(), 4), host=host) is None


def test_float8_inputs_compare_by_value_on_both_paths(path, monkeypatch):
    import torch

    host = path == "numpy"
    monkeypatch.setattr(compare, "CHUNK", 3)
    monkeypatch.setattr(compare, "DEVICE_CHUNK", 3)
    x = torch.tensor([1.0, float("nan"), 2.0, -0.0, 4.0]).to(torch.float8_e4m3fn)
    y = x.clone()
    assert compare.same_values(x, y, host=host)
    y[4] = 8.0
    assert not compare.same_values(x, y, host=host)


def test_the_cpu_checks_leave_torch_threads_as_they_found_them():
    """The torch path runs its CPU slices on one intra-op thread and restores the count, also
    when the check fails or raises."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ref = torch.randn(1000)
        assert compare.compare(ref + 1, ref, {}, {}).startswith("mismatch")
        assert compare.nonfinite(ref) == (0, 1000)
        assert compare.same_values(ref, ref.clone())
        with pytest.raises(AttributeError):
            compare.compare(ref, ref, None, {})  # no BENCH mapping: raises inside the path
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
