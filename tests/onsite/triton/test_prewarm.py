"""The compile stage's parallel pass (issue 33, :mod:`accelopt_core.onsite.triton.prewarm`): with
the later input sets' kernels compiled by forked processes, the stage's answer is the sequential
pass's (launches, kernels and their facts, what counts as cached), a kernel that fails to compile
only on a later input set is still that failure with its line, and no process is left behind.

Each case runs the stage in a fresh process without ``TRITON_INTERPRET`` (``python -c``) on an
empty Triton cache, with the parallel pass (two processes) and without it (:func:`prewarm.workers`
pinned to 1), each mode on a cache of its own; softmax's parallel pass runs a second time on its
cache (cached kernels)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # five compile stages, each in a fresh process

ROOT = Path(__file__).resolve().parents[3]
SOFTMAX = (ROOT / "examples" / "triton" / "softmax.py").read_text()

#: A launcher whose 5x33 input set (the last of BENCH["shapes"]) asks for a 12-wide arange,
#: which Triton refuses (a power of 2 is required); the other sets compile.
LATE_FAILURE = SOFTMAX.replace(
    "    BLOCK_SIZE = 16\n", "    BLOCK_SIZE = 12 if n_cols == 33 else 16\n"
)

STAGE = """
import json, os, sys
from accelopt_core.onsite.triton import prewarm, twin
from accelopt_core.onsite.triton.compile import run_stage
from accelopt_core.onsite.triton.devices import lookup

twin.switch_to_compiler()
import torch  # noqa: F401  (imported before the stage, as in the worker)

mode, source, path = sys.argv[1], sys.stdin.read(), sys.argv[2]
prewarm.workers = (lambda calls: 1) if mode == "sequential" else (lambda calls: min(calls, 2))
children = []
enter = prewarm.Prewarm.__enter__
def spy(self):
    out = enter(self)
    children.extend(self.pids)
    return out
prewarm.Prewarm.__enter__ = spy
setup = {"candidate_source": source, "harness_source": source, "entry": "softmax",
         "source_name": "softmax.py", "cand_file": path, "project": None, "seed": 1,
         "gpu": lookup("H100 SXM5")}
answer = run_stage(setup)
left = [pid for pid in children if os.path.exists(f"/proc/{pid}")]
print("@@STAGE@@" + json.dumps({"answer": answer, "children": len(children), "left": left}))
"""


def _stage(mode: str, source: str, cache: Path, tmp: Path) -> dict:
    path = tmp / "softmax.py"
    path.write_text(source)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-c", STAGE, mode, str(path)],
        input=source,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@STAGE@@")]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("@@STAGE@@") :])


def _without_times(gpu: dict) -> dict:
    return {k: v for k, v in gpu.items() if k != "compile_s"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """``{mode: [new kernels(, cached)]}`` for softmax, and the late failure in both modes."""
    out: dict[str, list[dict]] = {}
    for mode in ("parallel", "sequential"):
        tmp = tmp_path_factory.mktemp(mode)
        runs = 2 if mode == "parallel" else 1
        out[mode] = [_stage(mode, SOFTMAX, tmp / "cache", tmp) for _ in range(runs)]
        out[f"{mode}-failure"] = [_stage(mode, LATE_FAILURE, tmp / "cache-2", tmp)]
    return out


def test_parallel_pass_gives_the_sequential_answer(runs) -> None:
    (par_new, par_cached), (seq_new,) = runs["parallel"], runs["sequential"]
    assert par_new["children"] == 1 and seq_new["children"] == 0
    gpu = par_new["answer"]["gpu"]
    assert gpu["launches"] == 4 and len(gpu["kernels"]) == 2, gpu
    assert _without_times(gpu) == _without_times(seq_new["answer"]["gpu"])
    # kernels a child compiled are new kernels, not cached ones; the second run finds them all
    assert gpu["cached"] == 0
    assert _without_times(par_cached["answer"]["gpu"]) == dict(_without_times(gpu), cached=4)


def test_a_kernel_failing_only_on_a_later_input_set_is_that_failure(runs) -> None:
    parallel = runs["parallel-failure"][0]["answer"]
    sequential = runs["sequential-failure"][0]["answer"]
    assert "failure" in parallel, parallel
    failure = parallel["failure"]
    assert failure["status"] == "incorrect"
    assert failure["message"].startswith("does not compile for sm_90 (H100 SXM5): ")
    assert "BLOCK_SIZE=12" in failure["message"] and failure["line"] is not None
    assert parallel == sequential


def test_no_process_is_left_behind(runs) -> None:
    for mode in ("parallel", "parallel-failure"):
        for run in runs[mode]:
            assert run["left"] == []
