"""The real evaluation stack for the search's tests: the Evaluator with a LocalTarget running the
real worker in subprocesses (Triton interpreter on CPU), fast timing settings, and the
elementwise-add fixture of tests/candidates as the file being optimized."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile, parse_kernel_file
from accelopt_core.settings import Settings
from accelopt_core.targets import make_target

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


def candidate_source(name: str) -> str:
    """A fixture module of tests/candidates (``add``, ``ok_block128``, ``zeros``, ...)."""
    return (CANDIDATES / f"{name}.py").read_text()


def fast_settings(**evaluation: object) -> Settings:
    """Settings with short timing (2 seeds, 5 ms of repetitions), updated by ``evaluation``."""
    fast = {"seeds": 2, "repMs": 5.0, "warmupMs": 1.0, "timeoutS": 90.0}
    return Settings.model_validate({"evaluation": {**fast, **evaluation}})


@pytest.fixture
def add_file() -> KernelFile:
    return parse_kernel_file(candidate_source("add"), "add.py")


@pytest.fixture
async def evaluator() -> AsyncIterator[Evaluator]:
    settings = fast_settings()
    target = make_target(settings)
    yield Evaluator(target, settings, None)
    await target.close()


@pytest.fixture
async def one_slot_evaluator() -> AsyncIterator[Evaluator]:
    """An evaluator that runs one evaluation at a time, in the order they were asked for."""
    settings = fast_settings(cpuSlots=1)
    target = make_target(settings)
    yield Evaluator(target, settings, None)
    await target.close()
