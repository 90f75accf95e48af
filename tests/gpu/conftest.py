"""The CUDA tier's time budget: ``.device/gpu-check`` sets ``ACCELOPT_GPU_DEADLINE`` (Unix
time, s) so that a tier running late skips its remaining tests, with the reason, instead of
being killed before pytest writes its report (a device window is 15 minutes). Checked before
each module's fixtures (its shared runs) and before each test."""

from __future__ import annotations

import os
import time

import pytest


def _check_deadline() -> None:
    deadline = os.environ.get("ACCELOPT_GPU_DEADLINE")
    if deadline and time.time() > float(deadline):
        pytest.skip("past the device check's time budget (ACCELOPT_GPU_DEADLINE)")


@pytest.fixture(autouse=True, scope="module")
def _module_within_the_device_budget() -> None:
    _check_deadline()


@pytest.fixture(autouse=True)
def _within_the_device_budget() -> None:
    _check_deadline()
