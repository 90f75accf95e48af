"""The local target's warm worker (the default) takes each request's own limits: the warm
parent was started once, but the timeout the supervisor enforces in each forked child is the
request's (a server whose ``evaluation.timeoutS`` changes sends shorter requests)."""

from __future__ import annotations

import os
import signal
import sys
import time

from accelopt_core.settings import Settings
from accelopt_core.targets.local import LocalTarget
from accelopt_core.targets.warm import WarmSlots
from tests.onsite.runs import alive
from tests.targets.test_agent import request


async def test_one_warm_worker_enforces_each_requests_timeout() -> None:
    assert Settings().evaluation.warm_workers  # warm is the default
    target = LocalTarget(Settings(evaluation={"cpuSlots": 1}))
    try:
        first = await target.evaluate(request("add.py", timeout_s=60.0))
        assert first.status == "ok", first
        (pid,) = target.warm.pids
        hung = await target.evaluate(request("hang.py", timeout_s=1.0))
        assert hung.status == "timeout", hung
        assert "within 1 s" in hung.message  # the request's timeout, not the outer deadline
        assert hung.eval_s < 8.0
        again = await target.evaluate(request("add.py", timeout_s=60.0))
        assert again.status == "ok", again
        assert target.warm.pids == {pid}  # the warm parent survived its child's timeout
    finally:
        await target.close()
    assert target.warm.pids == set()


async def test_a_worker_that_died_idle_is_replaced_before_asyncio_notices() -> None:
    # asyncio's child watcher sets ``returncode`` a loop iteration (or, under load, much
    # longer) after the death: a slot that trusted it sent the next candidate to a dead
    # worker, and the candidate failed with "killed by SIGKILL without a result"
    slots = WarmSlots(sys.executable)
    try:
        worker = await slots.take(None)
        slots.give(None, worker)
        pid = worker.proc.pid
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # blocking on purpose: the watcher's callback cannot run
        assert not alive(pid)  # a zombie (its main thread at least), or reaped
        assert worker.proc.returncode is None  # asyncio has not noticed yet
        assert not worker.alive  # the kernel was asked
        fresh = await slots.take(None)
        assert fresh is not worker and fresh.proc.pid != pid and fresh.alive
        assert slots.pids == {fresh.proc.pid}
        slots.give(None, fresh)
    finally:
        await slots.close()
    assert slots.pids == set()
