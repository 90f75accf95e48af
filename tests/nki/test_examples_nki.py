"""``accelopt profile`` on every examples/nki file (one run) with the NKI test double: correct,
simulated."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.nki.conftest import EXAMPLES, double_env

NAMES = ["tensor_add", "softmax", "matmul", "reduction"]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """``accelopt profile --json`` of every example in one run (as ``accelopt profile
    examples/nki/*.py``): each example's report by name."""
    env = double_env(ACCELOPT_MEMORY_DIR=str(tmp_path_factory.mktemp("memory")))
    paths = [str(EXAMPLES / f"{name}.py") for name in NAMES]
    proc = subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", "profile", *paths, "--json"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    reports = json.loads(proc.stdout)
    assert [r["path"] for r in reports] == paths
    return dict(zip(NAMES, reports, strict=True))


@pytest.mark.parametrize("name", NAMES)
def test_profile_example_is_correct_in_the_simulator(name: str, profiled: dict[str, dict]) -> None:
    result = profiled[name]
    assert result["status"] == "ok", result["message"]
    assert result["timing"] == "simulated" and result["max_rel_error"] < 1e-5
    assert result["gbps"] > 0 and "import accelopt" not in (EXAMPLES / f"{name}.py").read_text()


def test_examples_use_the_current_api_and_expose_a_tile_constant() -> None:
    for name in NAMES:
        text = (EXAMPLES / f"{name}.py").read_text()
        assert "import nki\n" in text and "neuronxcc" not in text, name
        assert "TILE_" in text and "= 128" in text, name
