"""``accelopt runs`` (accelopt_cli.runs) and the failure tables (accelopt_cli.render_runs), in
process through the real parser, over run folders written by the RunStore itself
(accelopt_core.memory.runs); and the store's bounds."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from accelopt_cli import render_runs
from accelopt_cli.main import main
from accelopt_core.memory import RunStore
from accelopt_core.search import FailedCandidate

FAILURES = [
    FailedCandidate("wider blocks", "parse", "reply held no code", call=2),
    FailedCandidate(
        "more warps",
        "compile",
        "Triton compilation error: at 37:8\nnum_warps must be a power of two",
        line=37,
        status="compile_error",
        candidate_id="3f2a9c0d1e4b",
        call=3,
        excerpt=">> 37 | tl.store(...)",
    ),
]


def console(width: int = 200) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=False, color_system=None), buf


def write_run(store: RunStore, kernel: str, now: float, calls: int = 2) -> str:
    log = store.create({"path": f"/src/{kernel}.py", "kernel": kernel}, now=now)
    assert log is not None
    for n in range(1, calls + 1):
        log.append_call({"n": n, "role": "planner", "model": "m", "prompt": [], "reply": None,
                         "verdict": "plan", "detail": f"plan {n}"})  # fmt: skip
    report = {"candidates": [], "failed_candidates": [f.to_dict() for f in FAILURES],
              "plans": [{"call": 1, "title": "wider blocks"}]}  # fmt: skip
    log.write_report(report)
    log.write_summary({"id": log.id, "path": f"/src/{kernel}.py", "kernel": kernel,
                       "started_at": now, "calls": calls, "cost_usd": 0.0123,
                       "best_speedup": 1.5, "stopped_reason": "completed"})  # fmt: skip
    return log.id


def test_the_short_table_and_the_full_reasons() -> None:
    out, buf = console()
    render_runs.print_failures(out, FAILURES, verbose=False)
    table = buf.getvalue()
    assert "failed candidates: parse 1, compile 1" in table
    assert "Triton compilation error: at 37:8" in table and "power of two" not in table
    out, buf = console()
    render_runs.print_failures(out, [f.to_dict() for f in FAILURES], verbose=True)
    full = buf.getvalue()
    assert "failure 2: compile (line 37) · plan 'more warps': Triton compilation" in full
    assert "num_warps must be a power of two" in full and ">> 37 | tl.store(...)" in full
    assert "candidate 3f2a9c0d1e4b · call 3" in full


def test_runs_lists_newest_first_and_shows_one_by_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = RunStore(tmp_path / "runs")
    old = write_run(store, "softmax_kernel", now=1_700_000_000)
    new = write_run(store, "matmul_kernel", now=1_700_100_000, calls=3)
    assert main(["runs", "--memory-dir", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed] == [new, old] and listed[0]["calls"] == 3

    assert main(["runs", "--memory-dir", str(tmp_path), "show", new[:15]]) == 0
    shown = capsys.readouterr().out
    assert "matmul_kernel" in shown and "call 1: wider blocks" in shown
    assert "failure 1: parse · plan 'wider blocks': reply held no code" in shown
    assert "call 3 planner" in shown and "(prompt and reply not stored)" in shown

    assert main(["runs", "--memory-dir", str(tmp_path), "--json", "show", old]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["run"]["kernel"] == "softmax_kernel" and len(run["transcript"]) == 2


def test_an_unknown_or_ambiguous_id_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = RunStore(tmp_path / "runs")
    write_run(store, "a", now=1_700_000_000)
    write_run(store, "b", now=1_700_000_000)  # the same second: ids share the time prefix
    assert main(["runs", "--memory-dir", str(tmp_path), "show", "nope"]) == 1
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["runs", "--memory-dir", str(tmp_path), "show", "2023"]) == 1
    assert "names 2 runs" in capsys.readouterr().err
    assert main(["runs", "--memory-dir", str(tmp_path / "empty")]) == 0
    assert "no runs kept" in capsys.readouterr().out


def test_the_store_keeps_the_newest_runs_within_its_bounds(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs", keep=3)
    ids = [write_run(store, f"k{i}", now=1_700_000_000 + i * 60) for i in range(5)]
    assert [r["id"] for r in store.list()] == ids[:1:-1]  # the newest three
    big = RunStore(tmp_path / "runs", keep=10, max_bytes=1)  # any run is over a byte
    assert big.evict(10) == 3 and big.list() == []
    none = RunStore(tmp_path / "runs", keep=0)
    write_run(store, "again", now=1_700_001_000)
    assert none.create({"kernel": "x"}) is None and none.list() == []


def test_a_ranked_candidate_shows_the_seed_its_search_ran_with() -> None:
    """Issue 52: ``runs show`` gives each ranked candidate's property-based search (seed,
    examples tried, checked calls of its budget) so it can be rerun; a candidate of an older run has none."""
    from tests.gpu_metrics import gpu_metrics, searched_metrics

    cands = [
        {"rank": 1, "speedup": 1.4, "plan": "wider blocks", "id": "c1", "call": 2,
         "result": {"metrics": searched_metrics()}},
        {"rank": 2, "speedup": 1.2, "plan": "more warps", "id": "c2", "call": 3,
         "result": {"metrics": gpu_metrics()}},
        {"rank": 3, "speedup": 1.1, "plan": "old", "id": "c3", "call": 4, "result": "odd"},
    ]  # fmt: skip
    run = {"run": {"id": "r1"}, "report": {"candidates": cands}, "transcript": []}
    out, buf = console(width=80)
    render_runs.print_run(out, run, prompts=False)
    lines = buf.getvalue().splitlines()
    first = lines.index("  1. 1.40x wider blocks (id c1, call 2)")
    assert lines[first + 1] == (
        "     search (seed 1234): 37 examples tried, 35 usable, 12 of 40 checked calls; no "
        "disagreement with the baseline (2.1 s)"
    )
    assert lines[first + 2].startswith("  2. 1.20x more warps")
    assert lines[first + 3].startswith("  3. 1.10x old") and lines[first + 4] == ""
