"""Tests of ``accelopt memory ...`` (accelopt_cli.memory): in-process through argparse and
through ``python -m accelopt_cli.main`` in subprocesses (one of them on a real pseudo-terminal)."""

from __future__ import annotations

import argparse
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelopt_cli.memory import add_memory_parser, run_memory_command
from accelopt_core.memory import OptimizationMemory
from accelopt_core.onsite.protocol import JUDGE_VERSION
from accelopt_core.settings import Settings
from tests.memory.experiences import make_exp, matmul_exp, softmax_exp

REPO = Path(__file__).resolve().parents[2]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="accelopt")
    sub = p.add_subparsers(dest="command", required=True)
    add_memory_parser(sub)
    return p


def run(argv: list[str], settings: Settings | None = None) -> int:
    args = parser().parse_args(["memory", *argv])
    return run_memory_command(args, settings or Settings())


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A memory directory with a softmax, a matmul, a negative and an NKI experience."""
    root = tmp_path / "mem"
    m = OptimizationMemory(root / "memory")
    ids = {
        "softmax": m.add(softmax_exp(created_at=100)).id,
        "matmul": m.add(matmul_exp(created_at=200)).id,
        "negative": m.add(
            softmax_exp(title="did not help: BLOCK_SIZE 8192", speedup=0.7, created_at=300)
        ).id,
        "nki": m.add(
            make_exp(
                "import neuronxcc.nki.language as nl\n",
                backend="nki",
                device="trn1",
                title="tile over nl.tile_size.pmax",
                created_at=400,
            )
        ).id,
    }
    m.close()
    return root, ids


def test_list_json_filters(seeded, capsys):
    root, ids = seeded
    assert run(["--memory-dir", str(root), "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [ids["nki"], ids["negative"], ids["matmul"], ids["softmax"]]
    assert "slow_source" not in rows[0] and rows[0]["backend"] == "nki"
    assert run(["list", "--memory-dir", str(root), "--negative", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [ids["negative"]]
    assert (
        run(["--memory-dir", str(root), "list", "--backend", "triton", "--positive", "--json"]) == 0
    )
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [ids["matmul"], ids["softmax"]]
    assert run(["--memory-dir", str(root), "list", "--device", "trn1", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [ids["nki"]]


def test_list_table_and_settings_dir(seeded, capsys):
    root, ids = seeded
    # no --memory-dir: the directory comes from the settings
    assert run(["list"], Settings(memory_dir=str(root))) == 0
    out = capsys.readouterr().out
    assert "4 of 4 experiences" in out
    for eid in ids.values():
        assert eid in out
    assert run(["list"], Settings(memory_dir=str(root / "empty"))) == 0
    assert "no experiences" in capsys.readouterr().out


def test_show(seeded, capsys):
    root, ids = seeded
    assert run(["--memory-dir", str(root), "show", ids["softmax"][:10]]) == 0
    out = capsys.readouterr().out
    assert "single-pass online softmax" in out and "Fuse the max and the sum" in out
    assert "+# faster" in out  # the slow -> fast diff
    assert run(["--memory-dir", str(root), "show", ids["matmul"], "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["id"] == ids["matmul"] and "tl.dot" in data["slow_source"]
    assert run(["--memory-dir", str(root), "show", "ffffffffffffffff"]) == 1
    assert "no experience with id ffffffffffffffff" in capsys.readouterr().err


def test_search(seeded, capsys):
    root, ids = seeded
    assert (
        run(["--memory-dir", str(root), "search", "tl.dot BLOCK_K tiles", "-k", "1", "--json"]) == 0
    )
    hits = json.loads(capsys.readouterr().out)
    assert [h["id"] for h in hits] == [ids["matmul"]] and 0 < hits[0]["similarity"] <= 1
    assert run(["--memory-dir", str(root), "search", "online softmax"]) == 0
    out = capsys.readouterr().out
    assert "best" in out and ids["softmax"] in out
    assert (
        run(
            ["--memory-dir", str(root), "search", "fuse max sum tile", "--backend", "nki", "--json"]
        )
        == 0
    )
    assert [h["id"] for h in json.loads(capsys.readouterr().out)] == [ids["nki"]]
    assert run(["--memory-dir", str(root), "search", "x", "-k", "0"]) == 1


def test_export_import(seeded, tmp_path, capsys):
    root, ids = seeded
    out_file = tmp_path / "mem.jsonl"
    assert run(["--memory-dir", str(root), "export", str(out_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"exported": 4, "file": str(out_file)}
    other = tmp_path / "other"
    assert run(["--memory-dir", str(other), "import", str(out_file)]) == 0
    assert "imported 4 experiences" in capsys.readouterr().out
    assert run(["--memory-dir", str(other), "list", "--json"]) == 0
    assert {r["id"] for r in json.loads(capsys.readouterr().out)} == set(ids.values())

    bad = tmp_path / "bad.jsonl"
    bad.write_text(out_file.read_text().splitlines()[0] + "\n{broken\n")
    assert run(["--memory-dir", str(tmp_path / "third"), "import", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "line 2" in err and "nothing imported" in err
    assert (
        run(["--memory-dir", str(tmp_path / "third"), "import", str(tmp_path / "nope.jsonl")]) == 1
    )
    assert "cannot read" in capsys.readouterr().err


def test_clear(seeded, capsys, monkeypatch):
    root, _ = seeded
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal
    assert run(["--memory-dir", str(root), "clear"]) == 1
    assert "refusing to clear 4 experiences" in capsys.readouterr().err
    assert run(["--memory-dir", str(root), "clear", "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"cleared": 4}
    assert len(OptimizationMemory(root / "memory")) == 0


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        parser().parse_args(["memory", "show"])
    assert info.value.code == 2 and "ID" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser().parse_args(["memory", "list", "--negative", "--positive"])


def test_unusable_memory_dir_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    assert run(["--memory-dir", str(blocker), "list"]) == 1
    err = capsys.readouterr().err
    assert "optimization memory at" in err and "Not a directory" in err
    assert "Traceback" not in err


# -- through the real `accelopt` entry point ----------------------------------------------------


def cli(*argv: str, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )


def test_cli_subprocess(seeded, tmp_path):
    root, ids = seeded
    res = cli("memory", "--memory-dir", str(root), "list", "--json")
    assert res.returncode == 0, res.stderr
    assert {r["id"] for r in json.loads(res.stdout)} == set(ids.values())
    res = cli("memory", "--memory-dir", str(root), "clear", stdin=subprocess.DEVNULL)
    assert res.returncode == 1 and "without --yes" in res.stderr
    # the directory also comes from $ACCELOPT_MEMORY_DIR (settings.resolved_memory_dir)
    env_res = subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", "memory", "list", "--json"],
        cwd=REPO,
        env={**os.environ, "ACCELOPT_MEMORY_DIR": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert env_res.returncode == 0 and len(json.loads(env_res.stdout)) == 4


def _run_on_pty(argv: list[str], answer: bytes) -> tuple[int, str]:
    """Run the CLI with stdin/stdout on a real pseudo-terminal, answer its prompt."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelopt_cli.main", *argv],
        cwd=REPO,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    output = b""
    answered = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if not answered and b"[y/n]" in output:
                os.write(master, answer)
                answered = True
        elif proc.poll() is not None:
            break
    code = proc.wait(30)
    os.close(master)
    return code, re.sub(r"\x1b\[[0-9;]*m", "", output.decode(errors="replace"))


def test_clear_asks_on_a_terminal(seeded):
    root, _ = seeded
    code, out = _run_on_pty(["memory", "--memory-dir", str(root), "clear"], b"n\n")
    assert code == 1 and "Delete all 4 experiences" in out and "nothing deleted" in out
    assert len(OptimizationMemory(root / "memory")) == 4
    code, out = _run_on_pty(["memory", "--memory-dir", str(root), "clear"], b"y\n")
    assert code == 0 and "deleted 4 experiences" in out
    assert len(OptimizationMemory(root / "memory")) == 0


def test_list_and_search_through_a_pipe_print_whole_tab_separated_rows(seeded):
    """stdout a pipe (``accelopt memory list | less``, CI): no table squeezed to a default width
    but one tab-separated line per experience, every cell whole."""
    root, ids = seeded
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", "memory", "--memory-dir", str(root), "list"],
        cwd=REPO,
        env=env,
        capture_output=True,  # stdout is a pipe
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "# 4 of 4 experiences"
    header = lines[1].split("\t")
    assert header[:3] == ["id", "sign", "speedup"] and "title" in header
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[2:]]
    assert [r["id"] for r in rows] == [ids["nki"], ids["negative"], ids["matmul"], ids["softmax"]]
    negative = rows[1]
    assert negative["sign"] == "-" and negative["title"] == "did not help: BLOCK_SIZE 8192"
    assert rows[0]["backend"] == "nki" and rows[0]["device"] == "trn1"
    assert "\x1b[" not in proc.stdout  # no terminal escapes

    found = subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", "memory", "--memory-dir", str(root)]
        + ["search", "online softmax", "-k", "2"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    head = found.stdout.splitlines()[1].split("\t")
    assert head[2] == "similarity" and len(found.stdout.splitlines()) == 4


@pytest.mark.parametrize("width", [70, 160])
def test_table_on_a_terminal_keeps_kernel_and_title_readable(width: int) -> None:
    from rich.console import Console

    from accelopt_cli import render

    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=True, color_system=None)
    render.print_experiences(console, [(softmax_exp(), None), (matmul_exp(), None)], "2 of 2")
    text = buf.getvalue()
    assert all(len(line) <= width for line in text.splitlines())
    assert ("observed" in text) is (width >= render.WIDE_TABLE_COLUMNS)
    assert "softmax_kernel" in text and "matmul_kernel" in text  # never cut to a few letters
    assert "single-pass" in text and "online softmax" in text


# -- issue 10: hacks, timing labels, judge versions ----------------------------------------------


@pytest.fixture
def trust_seeded(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A memory with a GPU rule, an interpreter-timed rule, a reward hack and a rule from the
    weaker judge of version 1."""
    root = tmp_path / "mem"
    m = OptimizationMemory(root / "memory")
    ids = {
        "gpu": m.add(softmax_exp(created_at=100)).id,
        "interp": m.add(
            softmax_exp(
                title="num_warps 8 -> 4", timing="interpreter", device="cpu", created_at=200
            )
        ).id,
        "hack": m.add(
            softmax_exp(
                title="reward-hack: timing inconsistent",
                speedup=1.0,
                positive=False,
                hack="timing inconsistent",
                plan="Cache the output keyed by x.data_ptr().\nStep 2.",
                created_at=300,
            )
        ).id,
        "old": m.add(matmul_exp(judge_version="1", created_at=400)).id,
    }
    m.close()
    return root, ids


def test_list_hacks_and_timing_labels_through_the_entry_point(trust_seeded):
    root, ids = trust_seeded
    res = cli("memory", "--memory-dir", str(root), "list", "--hacks")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "# 1 of 4 experiences are reward-hack experiences"
    header = lines[1].split("\t")
    assert header == ["id", "rule", "kernel", "observed", "judge", "seen", "plan"]
    [row] = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[2:]]
    assert row["id"] == ids["hack"] and row["rule"] == "timing inconsistent"
    assert row["kernel"] == "softmax_kernel" and row["judge"] == JUDGE_VERSION
    assert row["plan"] == "Cache the output keyed by x.data_ptr()."
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", row["observed"])

    res = cli("memory", "--memory-dir", str(root), "list", "--hacks", "--json")
    [data] = json.loads(res.stdout)
    assert data["hack"] == "timing inconsistent" and data["positive"] is False

    res = cli("memory", "--memory-dir", str(root), "list")
    rows = {r.split("\t")[0]: r for r in res.stdout.splitlines()[2:]}
    assert "num_warps 8 -> 4 (interpreter-timed)" in rows[ids["interp"]]
    assert "interpreter-timed" not in rows[ids["gpu"]]
    empty = cli("memory", "--memory-dir", str(root / "none"), "list", "--hacks")
    assert "no reward-hack experiences" in empty.stdout
    with pytest.raises(SystemExit):
        parser().parse_args(["memory", "list", "--hacks", "--positive"])


def test_recheck_lists_and_drop_removes_older_judged(trust_seeded):
    root, ids = trust_seeded
    res = cli("memory", "--memory-dir", str(root), "recheck")
    assert res.returncode == 0, res.stderr
    assert f"1 of 4 experiences judged before version {JUDGE_VERSION}" in res.stdout
    assert ids["old"] in res.stdout and ids["gpu"] not in res.stdout
    assert "nothing changed" in res.stdout
    assert len(OptimizationMemory(root / "memory")) == 4  # without --drop nothing changes

    res = cli("memory", "--memory-dir", str(root), "recheck", "--drop", "--json")
    data = json.loads(res.stdout)
    assert data["dropped"] == 1 and [e["id"] for e in data["older"]] == [ids["old"]]
    left = OptimizationMemory(root / "memory")
    assert {e.id for e in left.all()} == {ids["gpu"], ids["interp"], ids["hack"]}
    res = cli("memory", "--memory-dir", str(root), "recheck", "--drop")
    assert f"every experience was verified by judge version {JUDGE_VERSION}" in res.stdout


def test_recheck_drop_says_how_many(trust_seeded, capsys):
    root, ids = trust_seeded
    m = OptimizationMemory(root / "memory")
    m.add(softmax_exp(title="another weak one", judge_version="1"))
    m.close()
    assert run(["--memory-dir", str(root), "recheck", "--drop"]) == 0
    out = capsys.readouterr().out
    assert f"dropped 2 experiences judged before version {JUDGE_VERSION}" in out
    assert ids["old"] in out


def test_show_labels_a_hack_and_its_timing(trust_seeded):
    root, ids = trust_seeded
    out = cli("memory", "--memory-dir", str(root), "show", ids["hack"]).stdout
    assert "reward hack caught by: timing inconsistent" in out and f"judge {JUDGE_VERSION}" in out
    out = cli("memory", "--memory-dir", str(root), "show", ids["interp"]).stdout
    assert "interpreter timing, interpreter-timed" in out
