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
