"""The clocks interpreter timings are read from (accelopt_core.onsite.runtime.clocks): a real
child process's CPU time as the kernel accounts it, busy against idle, read from its CPU clock
and from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from accelopt_core.onsite.runtime import clocks

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")

_BUSY = (
    "import sys, time\n"
    "open('/proc/self/comm', 'w').write(sys.argv[1])\n"
    "end = time.process_time() + 0.3\n"
    "while time.process_time() < end:\n"
    "    pass\n"
    "print('done', flush=True)\n"
    "time.sleep(30)\n"
)


@pytest.fixture(params=["clock", "proc"])
def source(request, monkeypatch) -> str:
    """Read the CPU clock (as on Linux), or /proc only (a clock_gettime that refuses)."""
    if request.param == "proc":

        def refuse(clock_id: int) -> float:
            raise OSError(22, "Invalid argument")

        monkeypatch.setattr(clocks.time, "clock_gettime", refuse)
    return request.param


@pytest.mark.parametrize("comm", ["busy", "a) b (c ) 9 9"])
def test_a_busy_child_has_its_cpu_time_counted(comm: str, source: str) -> None:
    """A child that burned 300 ms of CPU time shows at least that (less the resolution at
    each end), even when its name holds spaces and parentheses that shift /proc's fields; its
    sleep adds nothing."""
    proc = subprocess.Popen([sys.executable, "-c", _BUSY, comm], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        found = clocks.process_cpu_ms(proc.pid)
        assert found is not None
        used, resolution = found
        assert resolution == (0.0 if source == "clock" else clocks.TICK_MS)
        assert used >= 300.0 - 2 * resolution
        time.sleep(0.3)  # sleeping costs no CPU time
        assert clocks.process_cpu_ms(proc.pid)[0] - used <= 2 * resolution + 5.0
    finally:
        proc.kill()
        proc.wait()


def test_a_missing_process_reads_none(source: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: its pid no longer exists
    assert clocks.process_cpu_ms(proc.pid) is None


def test_now_ms_reads_cpu_or_wall_time() -> None:
    cpu0, wall0 = clocks.now_ms(clocks.CPU), clocks.now_ms(clocks.WALL)
    time.sleep(0.1)
    assert clocks.now_ms(clocks.CPU) - cpu0 < 50.0  # asleep: little CPU time
    assert clocks.now_ms(clocks.WALL) - wall0 >= 100.0
