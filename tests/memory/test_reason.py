"""A negative experience keeps why its rewrite failed, in full (issue 30: ``Experience.reason``):
stored, exported and imported, merged, read from records written before it existed, and shown
by ``accelopt memory show``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from accelopt_cli import render
from accelopt_core.memory import Experience, OptimizationMemory
from accelopt_core.memory.experience import merge, read_jsonl, write_jsonl
from tests.memory.experiences import make_exp

WHY = "gate: timing inconsistent: per-call latencies sum to 2% of the wall time\n(3 calls)"


def negative(**kw) -> Experience:
    exp = make_exp(title="did not help: unroll", speedup=0.8, **kw)
    exp.reason = WHY
    return exp


def test_the_reason_round_trips_through_the_store_and_jsonl(
    mem: OptimizationMemory, tmp_path: Path
) -> None:
    mem.add(negative())
    [stored] = mem.all()
    assert stored.reason == WHY and not stored.positive
    assert write_jsonl(tmp_path / "out.jsonl", [stored]) == 1
    [back] = read_jsonl(tmp_path / "out.jsonl")
    assert back.reason == WHY


def test_old_records_read_without_a_reason_and_a_bad_one_is_refused() -> None:
    data = make_exp().to_dict()
    del data["reason"]
    assert Experience.from_dict(data).reason == ""
    data["reason"] = ["not", "text"]
    with pytest.raises(ValueError, match="reason"):
        Experience.from_dict(data)


def test_merge_keeps_the_newest_reason_and_never_drops_it() -> None:
    old = negative(created_at=100.0)
    again = make_exp(title="did not help: unroll", speedup=0.7, created_at=200.0)
    assert merge(old, again, add_seen=True).reason == WHY


def test_memory_show_prints_the_reason() -> None:
    buf = io.StringIO()
    render.print_experience(Console(file=buf, width=250), negative())
    text = buf.getvalue()
    assert "why it failed" in text and "(3 calls)" in text
