"""The run store's order (issue 30's run folders): runs started in the same second are listed
and evicted by their start time, not by the random part of their ids."""

from __future__ import annotations

from pathlib import Path

from accelopt_core.memory.runs import RunStore


def test_runs_started_in_one_second_keep_their_order(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs", keep=50)
    logs = [store.create({"file": f"k{i}.py"}, now=1_700_000_000.0 + i / 10) for i in range(8)]
    ids = [log.id for log in logs]
    for log in reversed(logs):  # a search's last summary (recording.finish) keeps its start
        log.write_summary({"file": "k.py", "stopped_reason": "completed"})
    assert len({i[:15] for i in ids}) == 1  # one second
    assert [r["id"] for r in store.list()] == ids[::-1]  # newest first
    store.evict(3)
    assert [r["id"] for r in store.list()] == ids[:-4:-1]  # the oldest went first
