"""The test session's own environment (tests/hermetic.py): the product's settings are removed,
the knobs of the test run itself are kept."""

from __future__ import annotations

import pytest

from tests import hermetic


@pytest.mark.parametrize(
    ("name", "removed"),
    [
        ("ACCELOPT_MODEL", True),
        ("ACCELOPT_SANDBOX_OFF", True),  # a user's troubleshooting switch must not reach a test
        ("OPENAI_API_KEY", True),
        ("TRITON_CACHE_DIR", True),
        ("ACCELOPT_TEST_SLOW", False),
        # .device/gpu-check's deadline and figures file: removing them cost the first H100 run
        # its figures and its time budget
        ("ACCELOPT_GPU_DEADLINE", False),
        ("ACCELOPT_GPU_FIGURES", False),
    ],
)
def test_the_session_removes_the_products_settings_and_keeps_the_runs_knobs(
    name: str, removed: bool
) -> None:
    assert hermetic._scrubbed(name) is removed
