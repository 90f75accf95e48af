"""The CUDA tier's time budget: ``.device/gpu-check`` sets ``ACCELOPT_GPU_DEADLINE`` (Unix
time, s) so that a tier running late skips its remaining modules, with the reason, instead of
being killed before pytest writes its report (a device window is 15 minutes). Checked before
each module's fixtures (its shared runs), not before each test: a module's tests read the runs
its fixtures made, so once those are paid for, every test of the module reports (the first H100
run skipped seven finished rejections this way, 2026-11-26)."""

from __future__ import annotations

import os
import time

import pytest


@pytest.fixture(autouse=True, scope="module")
def _module_within_the_device_budget() -> None:
    deadline = os.environ.get("ACCELOPT_GPU_DEADLINE")
    if deadline and time.time() > float(deadline):
        pytest.skip("past the device check's time budget (ACCELOPT_GPU_DEADLINE)")
