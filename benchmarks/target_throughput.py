"""Throughput and per-evaluation overhead of the local, ssh and ray targets on this machine.

Starts a loopback OpenSSH server and a CPU-only loopback Ray head (the fixtures of
tests/remote_fixtures.py), then evaluates a fixed set of candidates through each target:

- ``gate``: a candidate the worker's static gate rejects (no torch import, ~one python start):
  the per-evaluation cost is almost only transport, so the difference to ``local`` is the
  overhead the transport adds.
- ``full``: correct add-kernel candidates (tests/candidates/add.py, ok_block128.py) checked on
  2 seeds and timed under the Triton interpreter.

For each transport and kind: median wall time of one evaluation run alone (ms), its excess
over ``local`` (ms), and candidates per minute with ``capacity`` evaluations in flight.
Interpreter timings say nothing about a GPU; this measures the product's own overhead.

Usage (from the repository root): ``python benchmarks/target_throughput.py [--n 8]
[--targets local,ssh,ray]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from accelopt_core.onsite.protocol import EvalRequest  # noqa: E402
from accelopt_core.settings import Settings  # noqa: E402
from accelopt_core.targets.local import LocalTarget  # noqa: E402
from tests.remote_fixtures import LoopbackRayHead, LoopbackSSHD  # noqa: E402

CANDIDATES = ROOT / "tests" / "candidates"
BASE = (CANDIDATES / "add.py").read_text()
KINDS = {
    "gate": ["try_except.py"],
    "full": ["add.py", "ok_block128.py"],
}


def make_request(name: str) -> EvalRequest:
    return EvalRequest(
        candidate_source=(CANDIDATES / name).read_text(),
        harness_source=BASE,
        entry="add",
        seeds=[1, 2],
        warmup_ms=1.0,
        rep_ms=5.0,
        timeout_s=120.0,
        source_name=name,
    )


async def measure(target, kind: str, n: int) -> dict:
    names = KINDS[kind]
    warm = await target.evaluate(make_request(names[0]))  # connect / start agents / warm caches
    statuses = {warm.status}
    alone = []
    for i in range(n):
        t0 = time.perf_counter()
        r = await target.evaluate(make_request(names[i % len(names)]))
        alone.append((time.perf_counter() - t0) * 1e3)
        statuses.add(r.status)
    t0 = time.perf_counter()
    rs = await asyncio.gather(
        *(target.evaluate(make_request(names[i % len(names)])) for i in range(n))
    )
    wall = time.perf_counter() - t0
    statuses |= {r.status for r in rs}
    return {
        "median_ms": statistics.median(alone),
        "p20_ms": statistics.quantiles(alone, n=5)[0] if len(alone) >= 2 else alone[0],
        "p80_ms": statistics.quantiles(alone, n=5)[-1] if len(alone) >= 2 else alone[0],
        "per_min": n / wall * 60,
        "statuses": sorted(statuses),
        "capacity": target.capacity,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=8, help="evaluations per transport and kind")
    parser.add_argument("--targets", default="local,ssh,ray")
    parser.add_argument("--kinds", default="gate,full")
    args = parser.parse_args()
    wanted = args.targets.split(",")
    kinds = args.kinds.split(",")

    tmp = Path(tempfile.mkdtemp(prefix="accelopt-bench-"))
    targets = {}
    sshd = head = None
    settings = Settings()
    targets["local"] = LocalTarget(settings)
    if "ssh" in wanted:
        from accelopt_core.targets.ssh import SSHTarget

        sshd = LoopbackSSHD(tmp / "sshd")
        sshd.start()
        targets["ssh"] = SSHTarget(
            Settings(
                target=sshd.url,
                ssh={
                    "python": sys.executable,
                    "devices": ",".join(str(i) for i in range(settings.evaluation.cpu_slots)),
                    "identityFile": str(sshd.identity_file),
                    "knownHosts": str(sshd.known_hosts),
                },
            )
        )
    if "ray" in wanted:
        from accelopt_core.targets.ray import RayTarget

        head = LoopbackRayHead(Path(f"/tmp/ray_bench_{int(time.time())}"))
        head.num_cpus = settings.evaluation.cpu_slots
        head.start()
        targets["ray"] = RayTarget(Settings(target=head.url))

    rows = []
    try:
        for kind in kinds:
            base = None
            for name, target in targets.items():
                if name not in wanted:
                    continue
                m = await measure(target, kind, args.n)
                if name == "local":
                    base = m["median_ms"]
                m["overhead_ms"] = None if base is None else m["median_ms"] - base
                rows.append((kind, name, m))
    finally:
        for target in targets.values():
            await target.close()
        if sshd is not None:
            sshd.stop()
        if head is not None:
            head.stop()

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"target throughput ({args.n} evaluations per row, this machine)")
    for col in ("kind", "target", "capacity", "median ms", "p20-p80 ms", "+ms vs local"):
        table.add_column(col, justify="right" if "ms" in col or col == "capacity" else "left")
    table.add_column("candidates/min", justify="right")
    table.add_column("statuses")
    for kind, name, m in rows:
        over = "-" if m["overhead_ms"] is None or name == "local" else f"{m['overhead_ms']:+.0f}"
        table.add_row(
            kind,
            name,
            str(m["capacity"]),
            f"{m['median_ms']:.0f}",
            f"{m['p20_ms']:.0f}-{m['p80_ms']:.0f}",
            over,
            f"{m['per_min']:.0f}",
            ",".join(m["statuses"]),
        )
    Console().print(table)


if __name__ == "__main__":
    asyncio.run(main())
