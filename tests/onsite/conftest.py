"""The batch of ~12 real worker runs that the supervisor and Triton evaluation tests share,
once through cold workers and once through one warm worker."""

from __future__ import annotations

import pytest

from accelopt_core.onsite.protocol import EvalResult
from tests.onsite.runs import MODES, run_batch


@pytest.fixture(scope="session", params=MODES)
def batch(request) -> dict[str, EvalResult]:
    """The batch's results, cold and warm (every test using it runs for both)."""
    return run_batch(request.param)
