"""Timeline of one cold GPU compile stage (issue 33): when the entry's pass (the compiles) and
each tool (``ptxas -v``, ``cuobjdump``, ``nvdisasm``) started and ended, s from the stage's start.

Each run is a fresh process without ``TRITON_INTERPRET`` that has torch, compile-mode triton and
``triton.experimental.gluon`` imported (as a warm worker's stage has), on a fresh
``TRITON_CACHE_DIR`` holding only the memoised ``triton_key()``; then the same stage again on
that cache (its kernels cached).

    python3 benchmarks/stage_timeline.py [--runs 3] [examples/triton/softmax.py [entry]]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.compile_stage import _fresh_cache  # noqa: E402

PROBE = r"""
import os, sys, time
from accelopt_core.onsite.triton import twin
twin.switch_to_compiler()
import torch  # noqa: F401
import triton.experimental.gluon  # noqa: F401
twin.install_key()
from accelopt_core.onsite.triton import compile as stage, cubin, facts
from accelopt_core.onsite.triton.devices import lookup

rows, t0 = [], [0.0]
def timed(mod, name):
    f = getattr(mod, name)
    def g(*a, **k):
        s = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            rows.append((name, s - t0[0], time.perf_counter() - t0[0]))
    setattr(mod, name, g)
timed(stage, "_run_entry")
timed(facts, "collect")
start, finish = cubin._start, cubin._finish
def started(argv):
    proc = start(argv)
    proc.t, proc.tool = time.perf_counter(), os.path.basename(argv[0])
    return proc
def finished(proc, name):
    out = finish(proc, name)
    rows.append((proc.tool, proc.t - t0[0], time.perf_counter() - t0[0]))
    return out
cubin._start, cubin._finish = started, finished
path, entry = sys.argv[1], sys.argv[2]
source = open(path).read()
setup = {"candidate_source": source, "harness_source": source, "entry": entry,
         "source_name": os.path.basename(path), "cand_file": path, "project": None, "seed": 1,
         "gpu": lookup("H100 SXM5")}
t0[0] = time.perf_counter()
answer = stage.run_stage(setup)
print(f"stage {answer.get('gpu', {}).get('compile_s')} s", "" if "gpu" in answer else answer)
for name, a, b in sorted(rows, key=lambda r: r[1]):
    print(f"  {name:<20} {a:6.3f} -> {b:6.3f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("path", nargs="?", default=str(ROOT / "examples/triton/softmax.py"))
    parser.add_argument("entry", nargs="?", default="softmax")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TRITON_INTERPRET", None)
    print(f"nproc {os.cpu_count()}, load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for run in range(args.runs):
        env["TRITON_CACHE_DIR"] = cache = _fresh_cache(seed_key=True)
        try:
            for label in ("new kernels", "cached"):
                print(f"run {run + 1}, {label}:")
                subprocess.run(
                    [sys.executable, "-c", PROBE, args.path, args.entry], env=env, check=True
                )
        finally:
            shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
