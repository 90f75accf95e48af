"""The counterexample search's Hypothesis draws from the seed alone (issue 52, and the search
failure of a language server: "AST constructor recursion depth mismatch"): Hypothesis 6.131 and
later otherwise parse the source of every module outside site-packages on their first draw, in
the search's thread, and cache what they found in ``.hypothesis/`` of the working directory,
the user's workspace under the language server. A fresh process is needed: a process that has
drawn once has already collected them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DRAW = """
import sys
import accelopt_core.evaluation.counterexample as counterexample
if sys.argv[1] == "search":
    counterexample._no_local_constants()
from hypothesis import HealthCheck, given, settings, strategies as st
@settings(max_examples=300, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.floats(allow_nan=False), st.integers())
def draw(x, i):
    pass
draw()
"""


@pytest.mark.parametrize("how", ["plain", "search"])
def test_the_search_reads_no_module_source_and_writes_nothing_where_it_runs(tmp_path, how):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", DRAW, how], cwd=tmp_path, env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    written = (tmp_path / ".hypothesis").exists()
    assert written == (how == "plain")  # plain Hypothesis does, as the control shows
