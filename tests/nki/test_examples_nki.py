"""``accelopt profile`` on every examples/nki file with the NKI test double: correct, simulated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nki.conftest import EXAMPLES, double_env

NAMES = ["tensor_add", "softmax", "matmul", "reduction"]


@pytest.mark.parametrize("name", NAMES)
def test_profile_example_is_correct_in_the_simulator(name: str, tmp_path: Path) -> None:
    env = double_env(ACCELOPT_MEMORY_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", "profile", str(EXAMPLES / f"{name}.py"),
         "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "ok", result["message"]
    assert result["timing"] == "simulated" and result["max_rel_error"] < 1e-5
    assert result["gbps"] > 0 and "import accelopt" not in (EXAMPLES / f"{name}.py").read_text()


def test_examples_use_the_current_api_and_expose_a_tile_constant() -> None:
    for name in NAMES:
        text = (EXAMPLES / f"{name}.py").read_text()
        assert "import nki\n" in text and "neuronxcc" not in text, name
        assert "TILE_" in text and "= 128" in text, name
