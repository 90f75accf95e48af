"""Where a test run's CPU goes, by kind of process (issue 33), from Linux process accounting.

The kernel writes one record per process when it exits (``acct(5)``, version 3: command name,
pid, parent pid, whether it forked without ``exec``, user and system CPU in clock ticks). This
reads such a file and sums the CPU of every process the run started, in the kinds of
``benchmarks/README.md`` ("Test-suite cost"):

- the pytest processes themselves (the longest-lived Python and its xdist workers);
- Pythons started with ``exec`` by CPU: at least 3 s (workers: ``import torch`` is 2.9-3.3 s on
  the development box), 1-3 s (language servers, CLI runs with little to do), under 1 s;
- forks of Pythons (supervisors, candidates, references, compile stages and their compiles);
- every other command by name (``nvdisasm``, ``ptxas-blackwell``, ``chromium``...).

Usage (as root; the ``acct`` package gives ``accton``)::

    touch /tmp/pacct && accton /tmp/pacct
    python -m pytest -n auto --dist loadfile
    accton off
    python3 benchmarks/suite_cpu.py /tmp/pacct [--top 12]

With ``--tests CLOCK`` it also sums, per test file and per test, the CPU of every process a
test started (its servers, CLI runs, workers, evaluations: what ``--durations`` cannot see),
from the file :mod:`benchmarks.testclock` writes during the run
(``ACCELOPT_TEST_CLOCK=CLOCK python -m pytest ... -p benchmarks.testclock``). A process
belongs to the test that its pytest process (found through its parents' records) was running
when it started; the records give start times in whole seconds, so a process started within
a second of a test's end may be counted to the next one. A process whose parent had exited
before it was recorded (an orphan: the kernel gives it a new parent) is "unattributed".

CPU is in seconds (the records' ``comp_t`` ticks at ``AHZ`` = 100 per second). Standard library
only.
"""

from __future__ import annotations

import argparse
import bisect
import struct
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

#: ``struct acct_v3`` (linux/acct.h): flag, version, tty, exit code, uid, gid, pid, ppid,
#: btime, etime (float), utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t), comm[16].
RECORD = struct.Struct("<BBHIIIIIIf8H16s")
AFORK = 0x01  #: ``ac_flag``: forked but did not exec
TICKS_PER_S = 100  #: ``AHZ``
#: A pytest-xdist worker lives at least this share of its controller's wall time.
WORKER_SHARE = 0.9


@dataclass(frozen=True)
class Process:
    """One accounting record: ``cpu_s`` user + system seconds, ``elapsed_s`` wall seconds,
    ``start`` seconds since the epoch (whole seconds, as ``acct`` keeps it)."""

    pid: int
    ppid: int
    comm: str
    cpu_s: float
    elapsed_s: float
    forked: bool
    start: int = 0


def _comp_t(value: int) -> int:
    """``comp_t``: a 13-bit mantissa and a 3-bit base-8 exponent (acct(5))."""
    return (value & 0x1FFF) << (3 * ((value >> 13) & 0x7))


def read(path: Path) -> list[Process]:
    """The records of an ``acct`` v3 file. Raises ValueError on another version."""
    data = path.read_bytes()
    out = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        f = RECORD.unpack_from(data, offset)
        if f[1] & 0x0F != 3:
            raise ValueError(f"{path}: acct record version {f[1] & 0x0F}, not 3")
        cpu = (_comp_t(f[10]) + _comp_t(f[11])) / TICKS_PER_S
        comm = f[18].split(b"\0")[0].decode(errors="replace")
        out.append(
            Process(f[6], f[7], comm, cpu, f[9] / TICKS_PER_S, bool(f[0] & AFORK), start=f[8])
        )
    return out


def _pytest_pids(processes: list[Process]) -> set[int]:
    """The pytest processes: the longest-lived Python started with ``exec`` (the controller)
    and its ``exec`` children that lived nearly as long (its xdist workers, however many)."""
    pythons = [p for p in processes if p.comm.startswith("python") and not p.forked]
    if not pythons:
        return set()
    root = max(pythons, key=lambda p: p.elapsed_s)
    workers = {
        p.pid
        for p in pythons
        if p.ppid == root.pid and p.elapsed_s >= WORKER_SHARE * root.elapsed_s
    }
    return {root.pid} | workers


def kinds(processes: list[Process]) -> dict[str, tuple[int, float]]:
    """``{kind: (processes, CPU s)}``, dearest first."""
    pytest = _pytest_pids(processes)
    sums: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for p in processes:
        if p.pid in pytest:
            kind = "pytest processes"
        elif p.comm.startswith("python") and p.forked:
            kind = "forks of Pythons (evaluations)"
        elif p.comm.startswith("python"):
            band = "≥ 3 s" if p.cpu_s >= 3 else "1-3 s" if p.cpu_s >= 1 else "< 1 s"
            kind = f"Pythons started with exec, {band}"
        else:
            kind = p.comm
        sums[kind][0] += 1
        sums[kind][1] += p.cpu_s
    return {k: (n, s) for k, (n, s) in sorted(sums.items(), key=lambda kv: -kv[1][1])}


def read_clock(path: Path) -> dict[int, list[tuple[float, float, str]]]:
    """``{pid: [(start, end, nodeid), ...]}`` (by start) from a :mod:`benchmarks.testclock` file."""
    tests: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        pid, nodeid, start, end = line.split("\t")
        tests[int(pid)].append((float(start), float(end), nodeid))
    return {pid: sorted(runs) for pid, runs in tests.items()}


def by_test(
    processes: list[Process], clock: dict[int, list[tuple[float, float, str]]]
) -> dict[str, float]:
    """``{nodeid: CPU s}`` of the processes each test started (module docstring), the pytest
    processes themselves left out; ``"unattributed"`` for the rest."""
    records: dict[int, list[Process]] = defaultdict(list)
    for p in processes:
        records[p.pid].append(p)

    def parent(p: Process) -> Process | None:
        for q in reversed(records.get(p.ppid, [])):  # the pid's holder when p started
            if q.start <= p.start + 1 and q.start + q.elapsed_s >= p.start - 1:
                return q
        return None

    sums: dict[str, float] = defaultdict(float)
    pytest = _pytest_pids(processes) | set(clock)
    for p in processes:
        if p.pid in pytest:
            continue
        owner, hops = p, 0
        while owner is not None and owner.ppid not in clock and hops < 64:
            owner, hops = parent(owner), hops + 1
        runs = clock.get(owner.ppid, []) if owner is not None else []
        starts = [start for start, _, _ in runs]
        i = bisect.bisect_right(starts, p.start + 0.999) - 1
        sums[runs[i][2] if runs and i >= 0 else "unattributed"] += p.cpu_s
    return dict(sorted(sums.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pacct", type=Path, help="the file accton wrote")
    parser.add_argument("--top", type=int, default=12, help="rows of each table")
    parser.add_argument("--tests", type=Path, help="the file benchmarks/testclock.py wrote")
    args = parser.parse_args()
    processes = read(args.pacct)
    total = sum(p.cpu_s for p in processes)
    print(f"{len(processes)} processes, {total:.0f} s of CPU\n")
    print("| processes | count | CPU s | share |\n| --- | ---: | ---: | ---: |")
    for kind, (n, cpu) in list(kinds(processes).items())[: args.top]:
        print(f"| {kind} | {n} | {cpu:.0f} | {100 * cpu / max(total, 1e-9):.0f} % |")
    if args.tests is None:
        return
    tests = by_test(processes, read_clock(args.tests))
    files: dict[str, float] = defaultdict(float)
    for nodeid, cpu in tests.items():
        files[nodeid.split("::")[0]] += cpu
    for title, rows in (("test file", files), ("test", tests)):
        print(f"\n| {title} (processes it started) | CPU s |\n| --- | ---: |")
        for name, cpu in sorted(rows.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"| `{name}` | {cpu:.0f} |")


if __name__ == "__main__":
    main()
