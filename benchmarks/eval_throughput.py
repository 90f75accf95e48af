"""Evaluations per minute with cold workers vs warm workers (issue 14), same candidates.

Cold (``accelopt.evaluation.warmWorkers: false``): every candidate pays a fresh Python start and
``import torch, triton``. Warm (the default): the local target keeps one fork server for its
slots (the ssh agent and the Ray actors one per host or device) that imported the stack once and
forks one child per candidate. Each run evaluates the same list of candidates
(correct, incorrect, compile error; tests/candidates/) on 2 seeds under the Triton interpreter,
``capacity`` at a time, on a fresh target, so the warm figure includes starting its workers.
The verdicts of both modes must agree (checked).

Targets: ``local``, and with ``--targets`` also ``ssh`` (a real loopback OpenSSH server) and
``ray`` (a real CPU-only loopback Ray head, Ray client): the fixtures of tests/remote_fixtures.py.
The last line is exactly ``warm/cold evaluations per minute: X.XX`` (the local target's ratio).

Usage (from the repository root): ``python benchmarks/eval_throughput.py [--n 16]
[--targets local,ssh,ray]``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from accelopt_core.onsite.protocol import EvalRequest  # noqa: E402
from accelopt_core.settings import Settings  # noqa: E402
from accelopt_core.targets import make_target  # noqa: E402
from tests.remote_fixtures import LoopbackRayHead, LoopbackSSHD  # noqa: E402

CANDIDATES = ROOT / "tests" / "candidates"
BASE = (CANDIDATES / "add.py").read_text()
NAMES = ["add.py", "ok_block128.py", "zeros.py", "kernel_compile_error.py"]


def make_request(name: str) -> EvalRequest:
    """The request of one candidate: 2 seeds, a short timing run (interpreter)."""
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


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's reaped children and their reaped
    descendants (``getrusage(RUSAGE_CHILDREN)``)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _rss_mib(pids: set[int]) -> float:
    """Resident memory of ``pids`` summed, MiB (``VmRSS`` of ``/proc/PID/status``)."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS"))
    return total / 1024


async def run(settings: Settings, n: int) -> tuple[float, list[str], str]:
    """Evaluations per minute of ``n`` candidates on a fresh target, their statuses, and for the
    local target the CPU its processes used and its warm workers' count and resident memory."""
    target = make_target(settings)
    local = target.name == "local"
    cpu0 = _children_cpu_s()
    memory = ""
    try:
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(target.evaluate(make_request(NAMES[i % len(NAMES)])) for i in range(n))
        )
        wall = time.perf_counter() - t0
        if local and target.warm is not None:  # measured while the workers are alive
            pids = target.warm.pids
            memory = f", {len(pids)} warm worker(s) {_rss_mib(pids):.0f} MiB resident"
    finally:
        await target.close()
    extra = f"; CPU {_children_cpu_s() - cpu0:.1f} s{memory}" if local else ""
    return n / wall * 60, [r.status for r in results], extra


def settings_for(name: str, warm: bool, sshd, head) -> Settings:
    """The settings of target ``name`` (local, ssh or ray) in one mode."""
    evaluation = {"warmWorkers": warm}
    if name == "ssh":
        slots = Settings().evaluation.cpu_slots
        ssh = {
            "python": sys.executable,
            "devices": ",".join(str(i) for i in range(slots)),
            "identityFile": str(sshd.identity_file),
            "knownHosts": str(sshd.known_hosts),
        }
        return Settings(target=sshd.url, ssh=ssh, evaluation=evaluation)
    if name == "ray":
        return Settings(target=head.url, evaluation=evaluation)
    return Settings(evaluation=evaluation)


def start_servers(wanted: list[str]) -> tuple[LoopbackSSHD | None, LoopbackRayHead | None]:
    """The loopback sshd and Ray head the wanted targets need (started)."""
    sshd = head = None
    if "ssh" in wanted:
        sshd = LoopbackSSHD(Path(tempfile.mkdtemp(prefix="accelopt-bench-")) / "sshd")
        sshd.start()
    if "ray" in wanted:
        head = LoopbackRayHead(Path(f"/tmp/ray_bench_{int(time.time())}"))
        head.num_cpus = Settings().evaluation.cpu_slots
        head.start()
    return sshd, head


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=16, help="candidates per run")
    parser.add_argument("--targets", default="local", help="local,ssh,ray")
    args = parser.parse_args()
    wanted = ["local", *(t for t in args.targets.split(",") if t != "local")]
    sshd, head = start_servers(wanted)
    ratios = {}
    try:
        for name in wanted:
            cold, cold_statuses, cold_extra = await run(
                settings_for(name, False, sshd, head), args.n
            )
            warm, warm_statuses, warm_extra = await run(
                settings_for(name, True, sshd, head), args.n
            )
            assert cold_statuses == warm_statuses, (name, cold_statuses, warm_statuses)
            ratios[name] = warm / cold
            print(
                f"{name}: cold {cold:.1f}/min{cold_extra}; warm {warm:.1f}/min{warm_extra}; "
                f"ratio {warm / cold:.2f} "
                f"({args.n} candidates, statuses {sorted(set(warm_statuses))})",
                flush=True,
            )
    finally:
        if sshd is not None:
            sshd.stop()
        if head is not None:
            head.stop()
    print(f"warm/cold evaluations per minute: {ratios['local']:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
