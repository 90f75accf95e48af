"""``accelopt report`` (issue 32), in process through the real parser: a saved search found by
run id, by kernel file or as a JSON file, written as one HTML page; and the located errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelopt_cli.main import main
from accelopt_core.memory import RunStore
from tests.report.pages import view_of
from tests.report.synthetic import synthetic_report


@pytest.fixture
def runs(tmp_path: Path) -> tuple[RunStore, Path]:
    """A memory directory with two kept runs of a kernel file and one of another file."""
    store = RunStore(tmp_path / "mem" / "runs")
    kernel = tmp_path / "softmax.py"
    kernel.write_text("# a kernel file\n")
    for i, (path, kernel_name, n) in enumerate(
        [(kernel, "softmax_kernel", 8), (kernel, "softmax_kernel", 12), ("/x/add.py", "add", 5)]
    ):
        report = synthetic_report(n)
        report.update(path=str(path), kernel=kernel_name)
        log = store.create({"path": str(path), "kernel": kernel_name}, now=1000.0 + i)
        report["run_id"] = log.id
        log.write_report(report)
    return store, kernel


def run(*args: str, store: RunStore) -> int:
    return main(["report", *args, "--memory-dir", str(store.directory.parent)])


def test_by_run_id_by_kernel_file_and_the_newest(runs, tmp_path: Path, capsys) -> None:
    store, kernel = runs
    ids = [r["id"] for r in store.list()]  # newest first
    out = tmp_path / "by-id.html"
    assert run(ids[1][:17], "-o", str(out), store=store) == 0
    assert len(view_of(out.read_text())["nodes"]) > 12
    assert f"search report of run {ids[1]}: {out}" in capsys.readouterr().out

    out = tmp_path / "by-file.html"
    assert run(str(kernel), "-o", str(out), store=store) == 0
    view = view_of(out.read_text())
    assert view["meta"]["run_id"] == ids[1] and view["meta"]["path"] == str(kernel)

    out = tmp_path / "newest.html"
    assert run("-o", str(out), store=store) == 0
    assert view_of(out.read_text())["meta"]["kernel"] == "add"


def test_a_json_report_and_the_default_file_name(runs, tmp_path: Path, monkeypatch) -> None:
    store, _ = runs
    report = synthetic_report(5)
    saved = tmp_path / "search.json"
    saved.write_text(json.dumps(report))
    monkeypatch.chdir(tmp_path)
    assert run(str(saved), store=store) == 0
    written = tmp_path / f"softmax-softmax_kernel-{report['run_id']}.html"
    assert view_of(written.read_text())["meta"]["evaluated"] == report["evaluated"]


def test_errors_are_located_and_exit_1(runs, tmp_path: Path, capsys) -> None:
    store, kernel = runs
    assert run("nope", store=store) == 1
    assert "no run 'nope'" in capsys.readouterr().err
    assert run(str(kernel), "--kernel", "other_kernel", store=store) == 1
    assert "no search of other_kernel in" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a report"}')
    assert run(str(bad), store=store) == 1
    assert "not a search report" in capsys.readouterr().err
    assert main(["report", "--memory-dir", str(tmp_path / "empty")]) == 1
    assert "no search is kept in" in capsys.readouterr().err
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert run(store.list()[0]["id"], "-o", str(blocked / "r.html"), store=store) == 1
    assert "cannot write the search report" in capsys.readouterr().err
