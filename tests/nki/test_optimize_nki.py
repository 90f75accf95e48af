"""``accelopt optimize --offline`` on an NKI example with the NKI test double: the offline
proposer retunes the tile constant and a larger tile ranks (simulated timing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nki.conftest import EXAMPLES, double_env


@pytest.mark.slow  # a real search (accelopt optimize)
def test_offline_optimize_tunes_an_nki_tile(tmp_path: Path) -> None:
    env = double_env(ACCELOPT_MEMORY_DIR=str(tmp_path))
    argv = [sys.executable, "-m", "accelopt_cli.main", "optimize", str(EXAMPLES / "reduction.py"),
            "--offline", "-T", "1", "-B", "1", "-N", "2", "-K", "1", "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    best = report["candidates"][0]
    assert best["correct"] and best["speedup"] > 1 and best["plan"].startswith("TILE_F 128 -> ")
    new = int(best["plan"].split("-> ")[1])
    assert new > 128 and f"TILE_F = {new}" in best["diff"]
