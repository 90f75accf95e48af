"""The local target's warm worker (the default) takes each request's own limits: the warm
parent was started once, but the timeout the supervisor enforces in each forked child is the
request's (a server whose ``evaluation.timeoutS`` changes sends shorter requests). One warm
worker serves all the target's slots at once, and cancelling one evaluation stops only that
one (issue 33)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

from accelopt_core.settings import Settings
from accelopt_core.targets.local import LocalTarget
from accelopt_core.targets.warm import WarmSlots
from tests.onsite.runs import UNCONFINED_FILES, alive
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


async def test_the_slots_share_one_warm_worker_and_a_cancel_stops_only_its_evaluation(
    tmp_path, monkeypatch
) -> None:
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("ACCELOPT_TEST_PIDFILE", str(pidfile))
    for name, value in UNCONFINED_FILES.items():  # the hanging candidate writes its pid there
        monkeypatch.setenv(name, value)
    target = LocalTarget(Settings(evaluation={"cpuSlots": 2}))
    try:
        hang = asyncio.create_task(target.evaluate(request("hang.py", timeout_s=120.0)))
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        child = int(pidfile.read_text())
        (zygote,) = target.warm.pids
        (hang_supervisor,) = target.active_pids
        # the second slot runs on the same warm worker, beside the hanging candidate
        seen: set[int] = set()

        async def watch() -> None:
            while True:
                seen.update(target.active_pids)
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch())
        ok = await target.evaluate(request("add.py"))
        watcher.cancel()
        assert ok.status == "ok", ok
        assert target.warm.pids == {zygote}
        assert hang_supervisor in seen and len(seen) == 2  # two supervisors at once
        assert alive(child) and not hang.done()
        cancelled_at = time.monotonic()
        hang.cancel()
        try:
            await hang
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the cancelled evaluation returned")
        while (alive(child) or alive(hang_supervisor)) and time.monotonic() - cancelled_at < 2:
            await asyncio.sleep(0.02)
        assert not alive(child) and not alive(hang_supervisor)
        assert alive(zygote) and target.warm.pids == {zygote}  # the shared worker goes on
        assert target.active_pids == set()
        again = await target.evaluate(request("add.py"))
        assert again.status == "ok", again
        assert target.warm.pids == {zygote}
    finally:
        await target.close()
    assert target.warm.pids == set() and not alive(zygote)
