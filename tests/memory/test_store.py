"""Tests of accelopt_core.memory.store: merging on add, listing, removal, a second handle,
export/import, two processes at once, and unusable directories.

All on real diskcache/SQLite directories under tmp_path; nothing is mocked.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from accelopt_core.memory import (
    MemoryUnavailable,
    OptimizationMemory,
    ResultsStore,
    experience_id,
)
from accelopt_core.settings import Settings
from tests.memory.experiences import MATMUL_QUERY, SOFTMAX, matmul_exp, softmax_exp

# -- storage semantics -------------------------------------------------------------------------


def test_re_add_merges(mem: OptimizationMemory):
    first = mem.add(softmax_exp(speedup=1.8, created_at=1000.0))
    again = mem.add(softmax_exp(speedup=1.3, created_at=2000.0, fast=SOFTMAX + "\n# newer\n"))
    assert len(mem) == 1 and again.id == first.id
    stored = mem.get(first.id)
    assert stored is not None
    assert stored.seen == 2
    assert stored.speedup == 1.8  # the best speedup is kept
    assert stored.fast_source.endswith("# newer\n")  # the newest sources
    assert stored.created_at == 1000.0 and stored.updated_at == 2000.0
    mem.add(softmax_exp(title="another rule"))
    assert len(mem) == 2


def test_all_is_newest_first_and_filters(mem: OptimizationMemory):
    a = mem.add(softmax_exp(created_at=10))
    b = mem.add(matmul_exp(created_at=30))
    c = mem.add(softmax_exp(title="x", speedup=0.5, created_at=20))
    assert [e.id for e in mem.all()] == [b.id, c.id, a.id]
    assert [e.id for e in mem.all(positive=False)] == [c.id]
    assert [e.id for e in mem.all(positive=True)] == [b.id, a.id]


def test_get_by_prefix_remove_and_clear(mem: OptimizationMemory):
    exps = [mem.add(softmax_exp(title=f"rule {i}")) for i in range(20)]
    target = exps[3]
    assert mem.get(target.id).title == "rule 3"
    unique = next(n for n in range(1, 17) if sum(e.id.startswith(target.id[:n]) for e in exps) == 1)
    assert mem.get(target.id[:unique]).id == target.id
    assert mem.get("zzzz") is None
    counts: dict[str, int] = {}
    for e in exps:
        counts[e.id[0]] = counts.get(e.id[0], 0) + 1
    shared = next(ch for ch, n in counts.items() if n > 1)
    with pytest.raises(ValueError, match="ambiguous"):
        mem.get(shared)
    assert mem.remove(target.id) is True and mem.remove(target.id) is False
    assert mem.get(target.id) is None and len(mem) == 19
    assert mem.clear() == 19 and len(mem) == 0 and mem.all() == []


def test_a_second_handle_sees_changes(tmp_path: Path):
    a = OptimizationMemory(tmp_path / "m")
    b = OptimizationMemory(tmp_path / "m")
    a.add(softmax_exp())
    assert [e.kernel_name for e in b.all()] == ["softmax_kernel"]  # b loads its snapshot
    a.add(matmul_exp())
    pos, _ = b.retrieve_for(MATMUL_QUERY, "triton", None, 1)
    assert pos[0].kernel_name == "matmul_kernel"  # b refreshed after a's write
    a.clear()
    assert b.all() == [] and b.search("softmax") == []
    a.close()
    b.close()


# -- export / import ---------------------------------------------------------------------------


def test_export_import_round_trip(mem: OptimizationMemory, tmp_path: Path):
    mem.add(softmax_exp())
    mem.add(softmax_exp())
    mem.add(matmul_exp())
    mem.add(softmax_exp(title="slower", speedup=0.6))
    path = tmp_path / "out.jsonl"
    assert mem.export_jsonl(path) == 3
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["id"] for line in lines)
    other = OptimizationMemory(tmp_path / "other")
    assert other.import_jsonl(path) == 3
    assert {e.id: e for e in other.all()} == {e.id: e for e in mem.all()}
    assert other.import_jsonl(path) == 3  # importing again changes nothing
    assert {e.id: e.seen for e in other.all()} == {e.id: e.seen for e in mem.all()}
    other.close()


def test_import_with_bad_lines_imports_nothing(mem: OptimizationMemory, tmp_path: Path):
    good = json.dumps(softmax_exp().to_dict())
    no_rule = softmax_exp(title="b").to_dict()
    del no_rule["rule"]
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join([good, "{not json", good, json.dumps(no_rule), "", json.dumps([1, 2])]) + "\n"
    )
    with pytest.raises(ValueError) as info:
        mem.import_jsonl(path)
    msg = str(info.value)
    assert "(2, 4, 6)" in msg and "missing field(s): rule" in msg and "nothing imported" in msg
    assert len(mem) == 0


def test_import_recomputes_the_id_of_edited_lines(mem: OptimizationMemory, tmp_path: Path):
    data = softmax_exp().to_dict()
    data["title"] = "edited by hand"
    path = tmp_path / "edited.jsonl"
    path.write_text(json.dumps(data) + "\n")
    assert mem.import_jsonl(path) == 1
    (stored,) = mem.all()
    assert stored.id == experience_id("triton", data["source_fingerprint"], "edited by hand", True)


# -- concurrency -------------------------------------------------------------------------------


def _writer(directory: str, tag: str, count: int, barrier) -> None:
    m = OptimizationMemory(directory)
    barrier.wait(60)  # both processes start writing at the same moment
    for i in range(count):
        m.add(softmax_exp(title=f"{tag} rule {i}"))
        m.add(softmax_exp(title="shared rule"))  # the same id from both processes
    m.close()


def test_two_processes_adding_at_once(tmp_path: Path):
    directory = str(tmp_path / "m")
    OptimizationMemory(directory).close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(directory, tag, 40, barrier)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    m = OptimizationMemory(directory)
    titles = {e.title: e for e in m.all()}
    assert len(m) == 81 and len(titles) == 81
    assert {f"{t} rule {i}" for t in "ab" for i in range(40)} <= titles.keys()
    assert titles["shared rule"].seen == 80  # no lost update of the merged entry
    m.close()
    con = sqlite3.connect(Path(directory) / "cache.db")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


# -- unusable directories ----------------------------------------------------------------------


def _chattr_works(tmp: Path) -> bool:
    if shutil.which("chattr") is None or os.geteuid() != 0:
        return False
    probe = tmp / "chattr-probe"
    probe.write_text("x")
    ok = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    return ok


@pytest.fixture
def immutable(tmp_path: Path):
    """Make paths immutable (chattr +i: even root cannot write them), undone at teardown.
    Without root + chattr, falls back to chmod, which binds non-root users only."""
    done: list[tuple[Path, int]] = []
    use_chattr = _chattr_works(tmp_path)
    if not use_chattr and os.geteuid() == 0:
        pytest.skip("running as root without a working chattr: cannot make a directory read-only")

    def make(*paths: Path) -> None:
        for p in paths:
            if use_chattr:
                subprocess.run(["chattr", "+i", str(p)], check=True)
                done.append((p, -1))
            else:
                done.append((p, p.stat().st_mode))
                p.chmod(0o555 if p.is_dir() else 0o444)

    yield make
    for p, mode in reversed(done):
        if mode == -1:
            subprocess.run(["chattr", "-i", str(p)], check=False)
        else:
            p.chmod(mode)


def test_open_in_a_read_only_directory(tmp_path: Path, immutable):
    parent = tmp_path / "ro"
    parent.mkdir()
    immutable(parent)
    settings = Settings(memory_dir=str(parent))
    memory, warning = OptimizationMemory.open(settings)
    assert memory is None
    assert warning is not None
    assert warning.startswith(f"optimization memory at {parent / 'memory'} is read-only:")
    store, warning = ResultsStore.open(settings)
    assert store is None and "results store at" in warning and "read-only" in warning


def test_open_under_a_file_is_unusable(tmp_path: Path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    memory, warning = OptimizationMemory.open(Settings(memory_dir=str(blocker)))
    assert memory is None
    assert f"optimization memory at {blocker / 'memory'} is unusable" in warning
    assert "Not a directory" in warning
    with pytest.raises(MemoryUnavailable, match="Not a directory"):
        OptimizationMemory(blocker)


def test_memory_that_becomes_read_only(tmp_path: Path, immutable):
    if os.geteuid() != 0:
        pytest.skip("needs chattr as root: an open SQLite file stays writable after chmod")
    directory = tmp_path / "m"
    m = OptimizationMemory(directory)
    kept = m.add(softmax_exp())
    immutable(directory, directory / "cache.db", directory / "cache.db-wal")
    # reads keep working
    assert [e.id for e in m.all()] == [kept.id]
    assert m.get(kept.id) is not None and m.search("softmax")[0][0].id == kept.id
    with pytest.raises(MemoryUnavailable, match=f"optimization memory at {directory} is read-only"):
        m.add(matmul_exp())
    with pytest.raises(MemoryUnavailable, match="read-only"):
        m.clear()
    assert [e.id for e in m.all()] == [kept.id]
    m.close()


def test_after_a_failed_write_nothing_is_half_written(tmp_path: Path, immutable):
    if os.geteuid() != 0:
        pytest.skip("needs chattr as root")
    directory = tmp_path / "m"
    m = OptimizationMemory(directory)
    m.add(softmax_exp())
    immutable(directory, directory / "cache.db", directory / "cache.db-wal")
    with pytest.raises(MemoryUnavailable):
        m.add(matmul_exp())
    m.close()
    subprocess.run(["chattr", "-i", str(directory / "cache.db-wal")], check=True)
    subprocess.run(["chattr", "-i", str(directory / "cache.db")], check=True)
    subprocess.run(["chattr", "-i", str(directory)], check=True)
    again = OptimizationMemory(directory)
    assert [e.kernel_name for e in again.all()] == ["softmax_kernel"] and len(again) == 1
    again.close()


def test_corrupt_memory(tmp_path: Path):
    directory = tmp_path / "memory"
    directory.mkdir()
    (directory / "cache.db").write_bytes(b"this is not an SQLite database" * 100)
    memory, warning = OptimizationMemory.open(Settings(memory_dir=str(tmp_path)))
    assert memory is None
    assert f"optimization memory at {directory} is corrupt" in warning
