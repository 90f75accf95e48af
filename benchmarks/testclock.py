"""A pytest plugin for :mod:`benchmarks.suite_cpu` (issue 33): one line per test, written when the
test (setup, call and teardown) is over, to the file ``$ACCELOPT_TEST_CLOCK`` names:
``pid<TAB>nodeid<TAB>start<TAB>end`` (the pytest process or xdist worker that ran it; wall
clock, seconds since the epoch). Standard library and pytest only.

Usage (from the repository root, so that ``benchmarks`` is importable)::

    ACCELOPT_TEST_CLOCK=/tmp/clock.tsv \
        python -m pytest -n auto --dist loadfile -p benchmarks.testclock
"""

from __future__ import annotations

import os
import time

import pytest

#: The environment variable that names the output file (appended to; nothing is written
#: without it). The test session keeps ``ACCELOPT_TEST_`` names (tests/hermetic.py).
CLOCK_ENV = "ACCELOPT_TEST_CLOCK"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Time the whole protocol of ``item`` and append its line."""
    start = time.time()
    yield
    path = os.environ.get(CLOCK_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\t{item.nodeid}\t{start:.3f}\t{time.time():.3f}\n")
