"""The batch of ~12 real worker runs that the supervisor and Triton evaluation tests share."""

from __future__ import annotations

import pytest

from accelopt_core.onsite.protocol import EvalResult
from tests.onsite.runs import run_batch


@pytest.fixture(scope="session")
def batch() -> dict[str, EvalResult]:
    return run_batch()
