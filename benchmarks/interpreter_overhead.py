"""The Triton interpreter's CPU time per call, as shipped and with the wasted work removed
(:mod:`accelopt_core.onsite.contestant.interp_overhead`, issue 33).

For each example under ``examples/triton`` and each of its small ``BENCH["shapes"]``, two fresh
processes under ``TRITON_INTERPRET=1`` call the example's entry ``--calls`` times, one with
Triton as shipped and one after ``LaunchCounter.install()`` (what every candidate process of a
CPU evaluation does). Each reports the median process CPU time per call (ms) and a digest of
every output. Prints one row per example and shape: both medians, their ratio, and whether the
outputs are the same bits. The two kinds of process alternate, so load on the machine falls on
both alike.

Usage (from the repository root): ``python benchmarks/interpreter_overhead.py [--calls 9]
[--examples softmax,matmul]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("elementwise", "matmul", "reduction", "rmsnorm", "softmax")

CHILD = r"""
import hashlib, importlib.util, json, statistics, sys, time
import torch
example, calls, install = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if install:
    from accelopt_core.onsite.contestant.launches import LaunchCounter
    LaunchCounter("accelopt_bench_example").install()
spec = importlib.util.spec_from_file_location("accelopt_bench_example", example)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
rows = []
for i, shape in enumerate(mod.BENCH["shapes"]):
    args = mod.get_inputs(0, "cpu", **shape)
    mod.BENCH["entry"](*args)  # first call: rewrite and caches
    times, digest = [], hashlib.sha256()
    for _ in range(calls):
        start = time.process_time()
        out = mod.BENCH["entry"](*args)
        times.append((time.process_time() - start) * 1000.0)
        digest.update(out.contiguous().numpy().tobytes())
    rows.append({"shape": shape, "ms": statistics.median(times), "digest": digest.hexdigest()})
print(json.dumps(rows))
"""


def _run(example: Path, calls: int, install: bool) -> list[dict]:
    env = dict(os.environ, TRITON_INTERPRET="1", ACCELOPT_SHAPE="small")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(example), str(calls), "1" if install else "0"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{example.name}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=9)
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    args = parser.parse_args()
    print("| example | shape | shipped ms | removed ms | ratio | same bits |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.examples.split(","):
        path = ROOT / "examples" / "triton" / f"{name}.py"
        shipped = _run(path, args.calls, install=False)
        removed = _run(path, args.calls, install=True)
        for a, b in zip(shipped, removed, strict=True):
            shape = a["shape"]
            shape = (
                " ".join(f"{k}={v}" for k, v in shape.items()) if isinstance(shape, dict) else shape
            )
            print(
                f"| {name} | {shape} | {a['ms']:.1f} | {b['ms']:.1f} | "
                f"{a['ms'] / b['ms']:.2f}x | {a['digest'] == b['digest']} |"
            )


if __name__ == "__main__":
    main()
