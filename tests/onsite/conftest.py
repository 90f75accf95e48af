"""The batch of real worker runs that the supervisor, Triton evaluation and worker tests share
(tests/onsite/runs.py): the candidates the supervisor classifies, through cold workers and
through one warm worker; the candidates the child judges, through that warm worker."""

from __future__ import annotations

import pytest

from accelopt_core.onsite.protocol import EvalResult
from tests.onsite.runs import MODES, run_batch


@pytest.fixture(scope="session", params=MODES)
def batch(request) -> dict[str, EvalResult]:
    """The supervisor-classified candidates' results, cold and warm (every test using it runs
    for both)."""
    return run_batch(request.param)


@pytest.fixture(scope="session")
def judged() -> dict[str, EvalResult]:
    """The judged candidates' results on the warm path (the same run as ``batch``'s warm one)."""
    return run_batch("warm")
