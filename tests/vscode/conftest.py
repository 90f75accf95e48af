"""Lets a fixture know whether its test failed (``request.node.failed``), so the VS Code test
keeps its screenshots only then."""

from __future__ import annotations

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.failed = report.failed
    return report
