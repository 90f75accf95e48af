"""The ``mem`` fixture: a fresh optimization memory under tmp_path, closed after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from accelopt_core.memory import OptimizationMemory


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[OptimizationMemory]:
    m = OptimizationMemory(tmp_path / "memory")
    yield m
    m.close()
