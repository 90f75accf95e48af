"""Evaluations in a row on one warm worker, with and without the reference store (issue 50,
item 4: inputs and reference outputs made once per search, `onsite.runtime.casestore`).

A warm worker (the zygote every target runs) evaluates the same harness ``--evals`` times, as a
search's candidates are: `scale_kernel.py` (``y = 2 * x`` on a float32 vector of ``--mib`` MiB)
with its own kernel as the candidate, 5 seeds, derived inputs found as for a baseline, timed.
Once with the store off (``reference_store_mb`` 0: every evaluation asks the reference process
for every input and reference), once on (the first evaluation makes them, the others reuse
them). Each line: the evaluation's wall time as the owner saw it, its phases
(``metrics["phases_s"]``) and the store's counts (``metrics["reference_store"]``).

    python benchmarks/reference_store.py [--mib 64] [--evals 3] [--gpu none]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


class _Worker:
    """A warm worker driven one request at a time (``E`` / ``R`` frames)."""

    def __init__(self, env: dict) -> None:
        from accelopt_core.targets.shipping import bundle, worker_argv

        self.proc = subprocess.Popen(
            worker_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self.proc.stdin.write(bundle("process.zygote"))
        self.proc.stdin.flush()
        self._frame(b"H")

    def _frame(self, kind: bytes) -> bytes:
        head = self.proc.stdout.read(9)
        assert head[:1] == kind, f"no {kind!r} frame: {head!r}"
        return self.proc.stdout.read(struct.unpack("<Q", head[1:])[0])

    def run(self, request: dict) -> dict:
        body = json.dumps(request).encode()
        self.proc.stdin.write(b"E" + struct.pack("<Q", len(body)) + body)
        self.proc.stdin.flush()
        return json.loads(self._frame(b"R"))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(60)


def _series(source: str, store_mb: int | None, evals: int, gpu: str | None, env: dict) -> list:
    from accelopt_core.onsite.protocol import EvalRequest

    request = EvalRequest(
        candidate_source=source,
        harness_source=source,
        entry="scale",
        source_name="scale_kernel.py",
        timeout_s=600.0,
        memory_limit_mb=16384,
        gpu=gpu,
        reference_store_mb=store_mb,
    ).to_dict()
    worker = _Worker(env)
    rows = []
    try:
        for _ in range(evals):
            t0 = time.perf_counter()
            result = worker.run(request)
            wall = time.perf_counter() - t0
            metrics = result.get("metrics") or {}
            rows.append(
                {
                    "status": result.get("status"),
                    "message": str(result.get("message"))[:120],
                    "wall_s": round(wall, 2),
                    "phases_s": metrics.get("phases_s"),
                    "store": metrics.get("reference_store"),
                    "call_ms": result.get("latency_ms"),
                }
            )
    finally:
        worker.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64, help="the vector's size, MiB")
    parser.add_argument("--evals", type=int, default=3, help="evaluations per series")
    parser.add_argument("--gpu", default="none", help="the compile stage's GPU, or none")
    args = parser.parse_args()
    env = dict(os.environ)
    source = (HERE / "scale_kernel.py").read_text()  # the size in the text: no variable crosses
    source = source.replace('"SCALE_MIB", "64"', f'"SCALE_MIB", "{args.mib}"')
    gpu = None if args.gpu == "none" else args.gpu
    print(f"scale_kernel.py, {args.mib} MiB float32, {args.evals} evaluations per series")
    for label, store_mb in (("store off", 0), ("store on", None)):
        rows = _series(source, store_mb, args.evals, gpu, env)
        print(f"== {label}")
        for i, row in enumerate(rows, 1):
            print(f"  {i}: {json.dumps(row)}")
        later = [r["wall_s"] for r in rows[1:]] or [rows[0]["wall_s"]]
        print(f"  median wall after the first: {statistics.median(later):.2f} s")


if __name__ == "__main__":
    main()
