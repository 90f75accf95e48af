"""The device check's time budget (conftest): runs off the GPU too (no ``gpu`` marker), so
``.device/gpu-check``, which selects ``-m gpu``, leaves it out."""

from __future__ import annotations

import importlib

import pytest

conftest = importlib.import_module("tests.gpu.conftest")
MODULES = ["ncu", "optimize", "profile", "rejections", "targets", "timing"]


def test_a_module_runs_without_a_deadline_or_with_time_for_it() -> None:
    assert conftest.budget_skip(None, 1000.0, 300) is None
    # 240 s to the deadline, 300 s to the tier's interruption: a 300-second module still fits
    assert conftest.budget_skip("1240", 1000.0, 300) is None


def test_a_module_skips_past_the_deadline_or_when_it_would_not_finish() -> None:
    assert "past the device check's time budget" in conftest.budget_skip("999", 1000.0, 0)
    why = conftest.budget_skip("1200", 1000.0, 300)
    assert why is not None and "260 s left" in why and "300 s" in why
    # a module that names no cost runs until the deadline itself, as before
    assert conftest.budget_skip("1001", 1000.0, conftest.DEADLINE_MARGIN_S) is None


@pytest.mark.parametrize("name", MODULES)
def test_every_tier_module_says_what_it_takes(name: str) -> None:
    module = importlib.import_module(f"tests.gpu.test_{name}")
    assert 0 < module.DEVICE_COST_S < 480  # one device call holds it
