"""How ``pytest -n auto --dist loadfile`` hands test files to its workers (pytest-xdist).

xdist's ``loadfile`` gives each worker whole files, so a module-scoped fixture is built once. Two
things it does not know are added here:

- **Files that share a session fixture run on one worker.** tests/onsite's batch of real worker
  runs (tests/onsite/conftest.py) is built once per worker process that needs it; its three
  modules are one unit, so it is built once per session.
- **The longest files start first.** xdist orders files by their number of tests; a 70-second
  file with three tests then starts last, and one worker runs it alone while the other idles.
  Files are ordered by their seconds in :data:`COSTS_FILE` (``benchmarks/suite_costs.py``
  writes it from a ``--durations=0`` run; a file not listed counts 0.5 s per test), longest
  first, so that the workers finish together (longest-processing-time-first scheduling).

The order changes nothing but the wall time: every file still runs whole, on one worker.
"""

from __future__ import annotations

import json
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

#: Seconds per test file of the last measured full run (file path -> s).
COSTS_FILE = Path(__file__).with_name("file_seconds.json")
#: Seconds assumed per test of a file the costs file does not list.
UNLISTED_S_PER_TEST = 0.5
#: Files that share the session-scoped ``batch`` fixture of tests/onsite/conftest.py.
SHARED = {
    path: "tests/onsite (the batch of worker runs)"
    for path in (
        "tests/onsite/test_supervisor.py",
        "tests/onsite/test_triton_eval.py",
        "tests/onsite/test_worker.py",
    )
}


def file_costs() -> dict[str, float]:
    """:data:`COSTS_FILE` as ``{file: seconds}``; empty where it is missing or unreadable."""
    try:
        costs = json.loads(COSTS_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in costs.items()} if isinstance(costs, dict) else {}


class CostOrderedFileScheduling(LoadFileScheduling):
    """``--dist loadfile`` with :data:`SHARED` files as one unit and the longest units first."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self._costs = file_costs()
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        path = super()._split_scope(nodeid)
        return SHARED.get(path, path)

    def _cost(self, scope: str, nodeids: dict[str, bool]) -> float:
        files = [p for p, unit in SHARED.items() if unit == scope] or [scope]
        if all(f in self._costs for f in files):
            return sum(self._costs[f] for f in files)
        return UNLISTED_S_PER_TEST * len(nodeids)

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the work queue is complete before the first unit leaves it
            self._ordered = True
            units = sorted(self.workqueue.items(), key=lambda unit: -self._cost(*unit))
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)
