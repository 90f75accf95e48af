"""Output comparison: tolerance scaled to the reference's magnitude, structure mismatches."""

from __future__ import annotations

import pytest

from accelopt_core.onsite.judge import compare


def test_tolerance_scales_with_the_reference_magnitude():
    import numpy as np

    ref = np.array([1000.0, 0.0, -2.0], dtype=np.float32)
    errors: dict = {}
    near = ref + np.float32(0.05)  # 0.05 <= 1e-4 * 1000 + 1e-4 * |ref|
    assert compare.compare(near, ref, {}, errors) is None
    assert errors["max_rel"] == pytest.approx(0.05 / 1000, rel=1e-3)
    assert compare.compare(ref + np.float32(0.2), ref, {}, {}) is not None
    zeros = np.zeros(3, dtype=np.float32)
    assert compare.compare(zeros, zeros, {}, {}) is None  # all-zero reference: exact zeros pass
    assert compare.compare(zeros, ref, {}, {}) is not None
    assert "structure" in compare.compare(zeros, (ref, ref), {}, {})


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


def test_inputs_compare_equal_with_nan_where_both_have_it():
    import numpy as np

    a = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    assert compare.same_values(a, a.copy())
    assert not compare.same_values(a, np.array([1.0, 2.0, 3.0], dtype=np.float32))
    assert not compare.same_values(a, np.array([1.0, np.nan, 4.0], dtype=np.float32))
    assert compare.same_values(np.arange(4), np.arange(4))
    assert not compare.same_values(np.arange(4), np.arange(1, 5))
    assert not compare.same_values(np.arange(4), np.arange(5))
