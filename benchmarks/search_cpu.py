"""CPU and wall time of one real offline search, as a user runs it (issue 33).

Runs ``accelopt optimize COPY --json -T 2 -B 2 -N 2 -K 1`` (the offline proposer, the ``local``
target, the Triton interpreter on a machine without a GPU) on a fresh copy of an example, with a
fresh memory directory (so a fresh evaluation cache) and no user config, ``--runs`` times. Each
run prints its wall time (s), the CPU time (user + sys, s) of the CLI and every process it
waited for (its warm worker and what that forked: ``resource.getrusage(RUSAGE_CHILDREN)``), the
evaluations the search made (first evaluations and re-timing rounds; how many rounds a search
needs varies from run to run, so compare the CPU per evaluation too) and the speedups it ranked.

``--root DIR`` runs the CLI of another checkout (``git worktree add /tmp/before HEAD~1``): its
packages come first on ``PYTHONPATH``. Interleave two checkouts to compare them on one machine:

    python benchmarks/search_cpu.py --root /tmp/before --root . --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def children_cpu() -> float:
    """User + sys CPU seconds of every waited-for descendant so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_search(root: Path, example: Path, args: list[str]) -> dict:
    """One search with ``root``'s CLI on a fresh copy of ``example``: wall s, CPU s, the
    report's evaluation count and ranked speedups. Raises RuntimeError when the CLI fails."""
    with tempfile.TemporaryDirectory(prefix="accelopt-search-cpu-") as tmp:
        kernel = Path(tmp) / example.name
        shutil.copy(example, kernel)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
        env.update(
            ACCELOPT_MEMORY_DIR=str(Path(tmp) / "memory"),
            ACCELOPT_CONFIG=str(Path(tmp) / "no-config.toml"),
            PYTHONPATH=os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")])),
        )
        cpu0, t0 = children_cpu(), time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "accelopt_cli.main", "optimize", str(kernel), "--json", *args],
            capture_output=True, text=True, env=env, cwd=root,
        )  # fmt: skip
        wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"{root}: accelopt optimize failed: {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "evaluated": report["evaluated"],
        "speedups": [round(c["speedup"], 2) for c in report["candidates"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", action="append", type=Path, help="checkout(s) to compare")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--example", type=Path, default=ROOT / "examples/triton/softmax.py")
    parser.add_argument(
        "--search", default="-T 2 -B 2 -N 2 -K 1", help="the search's size flags (one string)"
    )
    opts = parser.parse_args()
    roots = [r.resolve() for r in (opts.root or [ROOT])]
    rows: dict[Path, list[dict]] = {r: [] for r in roots}
    for run in range(opts.runs):
        for root in roots:
            row = one_search(root, opts.example.resolve(), opts.search.split())
            rows[root].append(row)
            print(
                f"{root} run {run + 1}: wall {row['wall_s']:.1f} s, CPU {row['cpu_s']:.1f} s, "
                f"{row['evaluated']} evaluations, speedups {row['speedups']}",
                flush=True,
            )
    for root, got in rows.items():
        print(
            f"{root}: median wall {statistics.median(r['wall_s'] for r in got):.1f} s, "
            f"median CPU {statistics.median(r['cpu_s'] for r in got):.1f} s, "
            f"median CPU per evaluation {statistics.median(r['cpu_s'] / r['evaluated'] for r in got):.2f} s"
        )


if __name__ == "__main__":
    main()
