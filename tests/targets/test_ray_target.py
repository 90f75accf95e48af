"""The Ray target against a real CPU-only Ray head on 127.0.0.1 (tests/remote_fixtures.py),
reached with the Ray client (``ray://127.0.0.1:PORT``). Candidates run under the Triton
interpreter; no test double."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from accelopt_core.settings import Settings
from accelopt_core.targets import make_target
from accelopt_core.targets.base import TargetError
from tests.remote_fixtures import LoopbackRayHead, free_port, ray_head  # noqa: F401
from tests.targets.verdicts import COMPARED, STATUSES, assert_same_verdicts, local_verdicts, request

pytest.importorskip("ray")

from accelopt_core.targets.ray import RayTarget  # noqa: E402

pytestmark = pytest.mark.slow

#: in the command line of every worker (and candidate) a Ray task starts, and of nothing else
AGENT_MARK = "accelopt-ray-task"


def test_bad_spec() -> None:
    settings = Settings(target="ray:auto").model_copy(update={"target": "ray:nope"})
    with pytest.raises(TargetError, match="ray://HOST:PORT or ray:auto"):
        RayTarget(settings)


async def test_batch_same_verdicts_as_local_then_cancel(
    ray_head: LoopbackRayHead,  # noqa: F811
) -> None:
    # the cold path: one Ray task per evaluation (the warm actors: tests below)
    settings = Settings(target=ray_head.url, evaluation={"warmWorkers": False})
    target = make_target(settings)
    assert isinstance(target, RayTarget)
    try:
        info = await target.probe()
        assert info["torch"] and info["triton"] and info["resource"] == "CPU"
        assert target.capacity == ray_head.num_cpus
        assert target.fingerprint.startswith(f"{ray_head.url}:CPU:cpu:torch-")

        results = await asyncio.gather(*(target.evaluate(request(n)) for n in COMPARED))
        local = await asyncio.to_thread(local_verdicts)
        assert_same_verdicts(dict(zip(COMPARED, results, strict=True)), local)
        assert [r.status for r in results] == STATUSES

        # cancellation: more hung candidates than capacity, so some tasks stay pending in
        # Ray's queue; cancelling the awaiting tasks cancels every Ray task (pending ones
        # leave the queue, running ones are killed with their candidates)
        n = target.capacity + 2
        tasks = [
            asyncio.ensure_future(target.evaluate(request("hang.py", timeout_s=300)))
            for _ in range(n)
        ]
        await _wait_for(lambda: len(ray_head.processes(AGENT_MARK)) >= target.capacity, 60)
        refs = list(target._pending)
        assert len(refs) == n
        for t in tasks:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)
        import ray

        for ref in refs:
            # A pending task is removed (TaskCancelledError); a running one is killed with its
            # worker (WorkerCrashedError), or, when the kill lands as the task settles, it
            # returns the killed worker's exit status. A hung candidate (timeout 300 s) can
            # never finish by itself within the 60 s allowed here, so every outcome below
            # proves the cancellation took effect.
            try:
                returncode, _out, _err = await asyncio.to_thread(ray.get, ref, timeout=60)
            except (ray.exceptions.TaskCancelledError, ray.exceptions.WorkerCrashedError):
                continue
            assert returncode != 0, "a cancelled hung candidate ran to completion"
        await _wait_for(lambda: not ray_head.processes(AGENT_MARK), 30)

        # Ray frees a killed task's CPU once its raylet notices the worker exit: poll for it
        async def cpus_free() -> float | None:
            return (await asyncio.to_thread(ray.available_resources)).get("CPU")

        deadline = asyncio.get_running_loop().time() + 60
        while await cpus_free() != ray_head.num_cpus:
            assert asyncio.get_running_loop().time() < deadline, "Ray never freed the CPUs"
            await asyncio.sleep(0.5)
        # the cluster is free again: a new evaluation runs at once
        again = await asyncio.wait_for(target.evaluate(request("add.py")), 120)
        assert again.status == "ok"
    finally:
        await target.close()
        await target.close()


async def _wait_for(cond, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await asyncio.to_thread(cond):
            return
        await asyncio.sleep(0.2)
    raise AssertionError("condition not reached")


async def test_warm_actor_evaluates_in_a_row_and_recovers_from_a_killed_worker(
    ray_head: LoopbackRayHead,  # noqa: F811
) -> None:
    settings = Settings(target=ray_head.url, evaluation={"warmWorkers": True})
    target = make_target(settings)
    try:
        names = ["add.py", "zeros.py", "kernel_compile_error.py"]
        results = [await target.evaluate(request(n)) for n in names]
        local = await asyncio.to_thread(local_verdicts)
        assert_same_verdicts(dict(zip(names, results, strict=True)), local)
        (actor,) = target.warm.actors  # one warm actor served all three, in a row
        assert results[1].eval_s < results[0].eval_s  # no python start, no import
        _, warm_pid = await asyncio.to_thread(ray_get, actor.pids.remote())
        hung = asyncio.ensure_future(target.evaluate(request("hang.py", timeout_s=300)))
        await _wait_for(lambda: len(ray_head.processes(AGENT_MARK)) >= 2, 60)  # + candidate
        os.kill(warm_pid, signal.SIGKILL)  # the remote worker dies mid-search
        killed = await asyncio.wait_for(hung, 60)
        assert killed.status == "runtime_error" and "SIGKILL" in killed.message
        again = await asyncio.wait_for(target.evaluate(request("add.py")), 120)
        assert again.status == "ok", again
        _, new_pid = await asyncio.to_thread(ray_get, actor.pids.remote())
        assert new_pid not in (None, warm_pid)  # the same actor, a new warm worker
        # cancelling kills the actor with its warm worker and candidate; the slot recovers
        task = asyncio.ensure_future(target.evaluate(request("hang.py", timeout_s=300)))
        await _wait_for(lambda: len(ray_head.processes(AGENT_MARK)) >= 2, 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await _wait_for(lambda: not ray_head.processes(AGENT_MARK), 30)
        assert target.warm.actors == set()
        last = await asyncio.wait_for(target.evaluate(request("add.py")), 120)
        assert last.status == "ok", last
    finally:
        await target.close()
    await _wait_for(lambda: not ray_head.processes(AGENT_MARK), 30)


def ray_get(ref):
    import ray

    return ray.get(ref, timeout=60)


def _comm(pid: int) -> str:
    """The command name of process ``pid`` ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


async def test_stopping_another_head_leaves_this_one_serving(
    ray_head: LoopbackRayHead,  # noqa: F811
) -> None:
    # a second test run on the machine starts and stops a head of its own; stopping it must not
    # touch this one (`ray stop` stops every Ray process of the machine)
    other = LoopbackRayHead(Path(f"/tmp/ray_{os.getpid()}_{free_port()}"))
    await asyncio.to_thread(other.start)
    try:
        mine, theirs = set(ray_head.processes()), set(other.processes())
        assert mine and theirs and not mine & theirs
    finally:
        await asyncio.to_thread(other.stop)
        shutil.rmtree(other.root, ignore_errors=True)
    assert other.processes() == []
    # this head's GCS and raylet live on (its workers and agents come and go by themselves:
    # an idle worker exits, so only these two are compared)
    core = {p for p in mine if _comm(p) in ("gcs_server", "raylet")}
    assert len(core) == 2 and core <= set(ray_head.processes())
    target = RayTarget(Settings(target=ray_head.url, evaluation={"warmWorkers": False}))
    try:
        result = await asyncio.wait_for(target.evaluate(request("add.py")), 120)
        assert result.status == "ok", result
    finally:
        await target.close()
