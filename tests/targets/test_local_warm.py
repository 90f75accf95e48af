"""The local target's warm worker (the default) takes each request's own limits: the warm
parent was started once, but the timeout the supervisor enforces in each forked child is the
request's (a server whose ``evaluation.timeoutS`` changes sends shorter requests)."""

from __future__ import annotations

from accelopt_core.settings import Settings
from accelopt_core.targets.local import LocalTarget
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
