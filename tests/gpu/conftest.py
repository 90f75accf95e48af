"""The CUDA tier's time budget: ``.device/gpu-check`` sets ``ACCELOPT_GPU_DEADLINE`` (Unix
time, s) so that a tier running late skips its remaining modules, with the reason, instead of
being killed before pytest writes its report (a device window is 15 minutes). Checked before
each module's fixtures (its shared runs), not before each test: a module's tests read the runs
its fixtures made, so once those are paid for, every test of the module reports (the first H100
run skipped seven finished rejections this way, 2026-11-26). A module also skips when less time
is left than its ``DEVICE_COST_S`` (what it took on an H100): started anyway, it would be killed
mid-run, and pytest, interrupted inside a search, wrote no report in the 20 s it was given (the
fourth window's optimize module, 2026-11-27)."""

from __future__ import annotations

import os
import time

import pytest

#: ``.device/gpu-check`` sets the deadline this many seconds before it interrupts the tier.
DEADLINE_MARGIN_S = 60.0


def budget_skip(deadline: str | None, now: float, cost_s: float) -> str | None:
    """Why a module must skip under ``ACCELOPT_GPU_DEADLINE`` = ``deadline`` (Unix time, s) at
    ``now`` when it takes ``cost_s`` seconds on an H100; None when it may run: no deadline set,
    or the module ends before the tier is interrupted (:data:`DEADLINE_MARGIN_S` after the
    deadline). A module that names no cost counts as :data:`DEADLINE_MARGIN_S`, so it runs until
    the deadline itself."""
    if not deadline:
        return None
    left = float(deadline) - now
    if left < 0:
        return "past the device check's time budget (ACCELOPT_GPU_DEADLINE)"
    if cost_s > left + DEADLINE_MARGIN_S:
        return (
            f"{left + DEADLINE_MARGIN_S:.0f} s left of the device check's time budget, and this "
            f"module takes about {cost_s:.0f} s on an H100 (DEVICE_COST_S)"
        )
    return None


@pytest.fixture(autouse=True, scope="module")
def _module_within_the_device_budget(request: pytest.FixtureRequest) -> None:
    cost = float(getattr(request.module, "DEVICE_COST_S", DEADLINE_MARGIN_S))
    why = budget_skip(os.environ.get("ACCELOPT_GPU_DEADLINE"), time.time(), cost)
    if why:
        pytest.skip(why)
