"""The clocks an evaluation times by (issue 20: interpreter timings that hold under load).

On CUDA a kernel is timed by CUDA events, on the device's own clock. Under the Triton
interpreter the "kernel" is Python and NumPy on a host core, and its wall time is mostly the
scheduler's: on the 2-core development machine one interpreted 64x1000 softmax took 80 ms of
wall time idle and 240-300 ms beside four busy processes, but 80 ms and 96-118 ms of CPU time.
An A/B comparison whose sides are timed at different moments (a baseline in a quiet second, a
candidate in a busy one) is decided by the load unless the clock ignores it, so interpreter
timings count the CPU time of the process that runs the candidate (:data:`CPU`), and the judge
checks them against that process's CPU time as the kernel accounts it (:func:`process_cpu_ms`).
Where that account cannot be read (no ``/proc``: not Linux), they fall back to wall time
(:data:`WALL`).
"""

from __future__ import annotations

import os
import time

#: Wall time: ``time.perf_counter``.
WALL = "wall"
#: CPU time of the whole process (every thread, user + system): ``time.process_time``.
CPU = "cpu"


def _tick_ms() -> float:
    try:
        ticks = os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        ticks = 100
    return 1000.0 / ticks if ticks and ticks > 0 else 10.0


#: Resolution of ``/proc/<pid>/stat``'s CPU times, ms: one clock tick (``USER_HZ``; 100 per
#: second on Linux, so 10 ms; proc(5)).
TICK_MS = _tick_ms()
#: ``CPUCLOCK_SCHED``: the process CPU clock that counts scheduled run time, in ns (Linux
#: ``include/linux/posix-timers.h``; glibc's ``clock_getcpuclockid`` encodes it so).
_CPUCLOCK_SCHED = 2


def now_ms(clock: str) -> float:
    """This process's reading of ``clock`` (:data:`CPU` or :data:`WALL`), ms. Differences of
    two readings are durations; a single reading means nothing."""
    if clock == CPU:
        return time.process_time() * 1000.0
    return time.perf_counter() * 1000.0


def process_cpu_ms(pid: int) -> tuple[float, float] | None:
    """``(cpu_ms, resolution_ms)``: the CPU time (user + system, ms) process ``pid`` has used so
    far, all its threads, those that exited included, and how coarse that figure is. Read from
    the process's CPU clock (``clock_gettime`` on the clock id ``clock_getcpuclockid(pid)``
    returns on Linux: ``(~pid << 3) | CPUCLOCK_SCHED``, ns), else from fields 14 and 15
    (``utime``, ``stime``) of ``/proc/<pid>/stat`` (proc(5); :data:`TICK_MS` coarse). None
    where neither can be read (not Linux, ``hidepid``, the process is gone)."""
    try:
        return time.clock_gettime(((~pid) << 3) | _CPUCLOCK_SCHED) * 1000.0, 0.0
    except (AttributeError, OSError, OverflowError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        # field 2 (comm) is in parentheses and may hold spaces or ')': split after the last ')'
        fields = data[data.rindex(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) * TICK_MS, TICK_MS  # fields[0] is field 3
    except (OSError, ValueError, IndexError):
        return None
