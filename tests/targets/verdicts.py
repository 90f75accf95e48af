"""What the remote-target tests (ssh://, ray://) compare against: the requests they send for the
candidates of tests/candidates/ (``add.py`` as the harness), and this machine's own verdicts on
them, evaluated once per test process by a local warm worker.

A remote target must give the verdict (status, message, line, timing kind) that the local
target gives; the local verdicts are the same whether the local worker is warm or cold
(tests/onsite/runs.py's batch checks both paths), so one local evaluation per candidate serves
every remote test of the process, cold or warm.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.settings import Settings
from accelopt_core.targets.local import LocalTarget
from tests.onsite.runs import gate_baseline

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
BASE = (CANDIDATES / "add.py").read_text()
#: The candidates whose verdicts a remote target must reproduce, and those verdicts.
COMPARED = ("add.py", "ok_block128.py", "zeros.py", "kernel_compile_error.py")
STATUSES = ["ok", "ok", "incorrect", "compile_error"]


def request(name: str, **fields) -> EvalRequest:
    """The request for candidate ``name`` of tests/candidates/ against ``add.py``: 2 seeds,
    1 ms warm-up, 5 ms of timed repetitions, 60 s timeout unless ``fields`` say otherwise."""
    fields.setdefault("seeds", [1, 2])
    fields.setdefault("rep_ms", 5.0)
    fields.setdefault("warmup_ms", 1.0)
    fields.setdefault("timeout_s", 60.0)
    fields = {**gate_baseline((CANDIDATES / name).read_text()), **fields}
    return EvalRequest(
        candidate_source=(CANDIDATES / name).read_text(),
        harness_source=BASE,
        entry="add",
        source_name=name,
        **fields,
    )


@functools.cache
def local_verdicts() -> dict[str, EvalResult]:
    """This machine's results for :data:`COMPARED`, one after another on one local warm worker
    (computed once per process; call it from a thread when an event loop runs)."""

    async def run() -> dict[str, EvalResult]:
        local = LocalTarget(Settings(evaluation={"cpuSlots": 1}))
        try:
            return {name: await local.evaluate(request(name)) for name in COMPARED}
        finally:
            await local.close()

    return asyncio.run(run())


def assert_same_verdicts(remote: dict[str, EvalResult], local: dict[str, EvalResult]) -> None:
    """Each remote result has the local one's status, message, line and timing kind."""
    for name, r in remote.items():
        loc = local[name]
        assert (r.status, r.message) == (loc.status, loc.message), (name, r, loc)
        assert r.line == loc.line and r.timing == loc.timing, (name, r, loc)
