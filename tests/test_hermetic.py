"""The test session's own environment (tests/hermetic.py): the product's settings are removed,
the knobs of the test run itself are kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import hermetic

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("name", "removed"),
    [
        ("ACCELOPT_MODEL", True),
        ("ACCELOPT_SANDBOX_OFF", True),  # a user's troubleshooting switch must not reach a test
        ("OPENAI_API_KEY", True),
        ("TRITON_CACHE_DIR", True),
        ("ACCELOPT_TEST_SLOW", False),
        # .device/gpu-check's deadline and figures file: removing them cost the first H100 run
        # its figures and its time budget
        ("ACCELOPT_GPU_DEADLINE", False),
        ("ACCELOPT_GPU_FIGURES", False),
    ],
)
def test_the_session_removes_the_products_settings_and_keeps_the_runs_knobs(
    name: str, removed: bool
) -> None:
    assert hermetic._scrubbed(name) is removed


PROBE = """
import os, sys
from tests import hermetic

def test_no_sdk_on_the_workers_path():
    assert os.environ.get("PYTEST_XDIST_WORKER") == "gw0"
    assert [p for p in sys.path if p and hermetic.provides_sdk(p)] == []
"""


def test_an_sdk_on_pythonpath_is_hidden_from_the_xdist_workers_too(tmp_path: Path) -> None:
    # pytest-xdist starts each worker with the controller's sys.path from before the session
    # hid the SDK, PYTHONPATH's entries included: the README's `-n auto` run on a machine with
    # the nki package on PYTHONPATH once saw it in every worker
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "doubles"), str(ROOT)]))
    env.pop(hermetic.HIDDEN_SDK_ENV, None)  # as a user's shell has it
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "-n", "1", str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout
