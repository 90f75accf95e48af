"""Tests of accelopt_core.memory: the optimization memory and the search-results store.

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
    DEVICE_PENALTY,
    Experience,
    MemoryUnavailable,
    OptimizationMemory,
    ResultsStore,
    experience_id,
)
from accelopt_core.settings import Settings

SOFTMAX = """
import triton
import triton.language as tl

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * n_cols + offs, num / den, mask=mask)
"""

MATMUL = """
import triton
import triton.language as tl

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
"""

# A softmax written by someone else (other names): what the planner would be asked about.
SOFTMAX_QUERY = """
import triton
import triton.language as tl

@triton.jit
def row_softmax(inp, out, stride, n, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(inp + r * stride + cols, mask=cols < n, other=-float("inf"))
    m = tl.max(v, axis=0)
    e = tl.exp(v - m)
    tl.store(out + r * stride + cols, e / tl.sum(e, axis=0), mask=cols < n)
"""

MATMUL_QUERY = """
import triton
import triton.language as tl

@triton.jit
def gemm(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(A), tl.load(B))
    tl.store(C, acc)
"""

NKI_SOFTMAX = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def softmax_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nl.max(t, axis=1, keepdims=True)
    e = nl.exp(t - m)
    nl.store(out, e / nl.sum(e, axis=1, keepdims=True))
    return out
"""


def make_exp(
    source: str = SOFTMAX,
    *,
    title: str = "single-pass online softmax",
    rule: str = "Fuse the max and the sum into one pass with an online rescaling of the sum.",
    speedup: float = 1.6,
    backend: str = "triton",
    device: str = "NVIDIA H100 80GB HBM3",
    kernel_name: str = "softmax_kernel",
    positive: bool | None = None,
    created_at: float | None = None,
    fast: str | None = None,
) -> Experience:
    return Experience.create(
        backend=backend,
        device=device,
        timing="cuda",
        kernel_name=kernel_name,
        slow_source=source,
        fast_source=fast if fast is not None else source + "\n# faster\n",
        speedup=speedup,
        title=title,
        rule=rule,
        positive=positive,
        created_at=created_at,
    )


def softmax_exp(**kw) -> Experience:
    return make_exp(SOFTMAX, **kw)


def matmul_exp(**kw) -> Experience:
    kw.setdefault("title", "larger K tiles for tl.dot")
    kw.setdefault("rule", "Raise BLOCK_K to 64 and use num_stages=3 so tl.dot overlaps loads.")
    kw.setdefault("kernel_name", "matmul_kernel")
    return make_exp(MATMUL, **kw)


@pytest.fixture
def mem(tmp_path: Path) -> OptimizationMemory:
    m = OptimizationMemory(tmp_path / "memory")
    yield m
    m.close()


# -- Experience --------------------------------------------------------------------------------


def test_experience_id_is_stable_and_normalizes_title():
    a = softmax_exp()
    b = softmax_exp(title="  Single-pass   ONLINE softmax ", speedup=2.0)
    assert a.id == b.id and len(a.id) == 16
    assert a.id == experience_id("triton", a.source_fingerprint, a.title, True)
    assert softmax_exp(title="other rule").id != a.id
    assert softmax_exp(speedup=0.8).id != a.id  # negative: a different experience
    assert softmax_exp(speedup=0.8).positive is False


def test_experience_dict_round_trip_and_validation():
    exp = softmax_exp()
    assert Experience.from_dict(json.loads(json.dumps(exp.to_dict()))) == exp
    bad = exp.to_dict()
    del bad["rule"]
    with pytest.raises(ValueError, match="missing field.*rule"):
        Experience.from_dict(bad)
    with pytest.raises(ValueError, match="speedup"):
        Experience.from_dict({**exp.to_dict(), "speedup": "fast"})
    with pytest.raises(ValueError, match="positive"):
        Experience.from_dict({**exp.to_dict(), "positive": "yes"})
    with pytest.raises(ValueError, match="seen"):
        Experience.from_dict({**exp.to_dict(), "seen": 0})
    with pytest.raises(ValueError, match="speedup"):
        Experience.create(
            backend="triton",
            device="cpu",
            timing="interpreter",
            kernel_name="k",
            slow_source="",
            fast_source="",
            speedup=float("nan"),
            title="t",
            rule="r",
        )
    assert "softmax" in repr(exp) and "tl.load" not in repr(exp)


# -- retrieval ---------------------------------------------------------------------------------


def test_retrieve_for_ranks_the_matching_kernel_first(mem: OptimizationMemory):
    mem.add(softmax_exp())
    mem.add(matmul_exp())
    mem.add(softmax_exp(title="did not help: BLOCK_SIZE 4096", speedup=0.7, rule="Slower."))
    pos, neg = mem.retrieve_for(SOFTMAX_QUERY, "triton", "NVIDIA H100 80GB HBM3", 3)
    assert [e.kernel_name for e in pos] == ["softmax_kernel", "matmul_kernel"]
    assert all(e.positive for e in pos)
    assert [e.title for e in neg] == ["did not help: BLOCK_SIZE 4096"]
    pos, _ = mem.retrieve_for(MATMUL_QUERY, "triton", None, 1)
    assert [e.kernel_name for e in pos] == ["matmul_kernel"]


def test_search_text_ranks_by_similarity(mem: OptimizationMemory):
    mem.add(softmax_exp())
    mem.add(matmul_exp())
    hits = mem.search("online softmax: fuse max and sum")
    assert hits[0][0].kernel_name == "softmax_kernel"
    assert 0 < hits[-1][1] <= hits[0][1] <= 1.0
    hits = mem.search("tl.dot tiles BLOCK_K", k=1)
    assert len(hits) == 1 and hits[0][0].kernel_name == "matmul_kernel"
    assert mem.search("zzzz qqqq") == []


def test_backend_filter(mem: OptimizationMemory):
    nki = make_exp(NKI_SOFTMAX, backend="nki", device="trn1 NeuronCore-v2")
    mem.add(nki)
    mem.add(matmul_exp())
    pos, _ = mem.retrieve_for(SOFTMAX_QUERY, "triton", None, 5)
    assert [e.backend for e in pos] == ["triton"]
    pos, _ = mem.retrieve_for(NKI_SOFTMAX, "nki", None, 5)
    assert [e.id for e in pos] == [nki.id]
    assert {e.backend for e, _ in mem.search("softmax", backend="nki")} == {"nki"}
    assert [e.id for e in mem.all(backend="nki")] == [nki.id]


def test_other_device_ranks_lower_but_stays(mem: OptimizationMemory):
    h100 = softmax_exp(device="NVIDIA H100 80GB HBM3")
    h200 = softmax_exp(device="NVIDIA H200", title="online softmax, H200 variant")
    mem.add(h100)
    mem.add(h200)
    base = {e.id: s for e, s in mem.search("online softmax")}
    on_h200 = mem.search("online softmax", device="NVIDIA H200")
    assert on_h200[0][0].id == h200.id and len(on_h200) == 2
    sims = {e.id: s for e, s in on_h200}
    assert sims[h100.id] == pytest.approx(base[h100.id] * DEVICE_PENALTY, rel=1e-5)
    assert [e.id for e in mem.all(device="NVIDIA H200")] == [h200.id]


def test_mentioning_matches_whole_api_names(mem: OptimizationMemory):
    dot = mem.add(matmul_exp())
    mem.add(softmax_exp(rule="Use tl.max then tl.exp once; keep the row in registers."))
    scaled = mem.add(matmul_exp(title="use tl.dot_scaled", rule="Use tl.dot_scaled for fp8."))
    assert [e.id for e in mem.mentioning("tl.dot")] == [dot.id]
    assert [e.id for e in mem.mentioning("tl.dot_scaled")] == [scaled.id]
    assert mem.mentioning("dot") == []  # a bare name is not a mention of tl.dot
    assert mem.mentioning("tl.dot", backend="nki") == []
    assert len(mem.mentioning("tl.exp")) == 1


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


def test_eviction_order(tmp_path: Path):
    m = OptimizationMemory(tmp_path / "m", max_experiences=3)
    neg = m.add(softmax_exp(title="neg", speedup=0.9, created_at=100))
    weak = m.add(softmax_exp(title="weak", speedup=1.1, created_at=200))
    strong = m.add(softmax_exp(title="strong", speedup=3.0, created_at=50))
    mid = m.add(softmax_exp(title="mid", speedup=1.5, created_at=300))
    # 4 > 3: the negative goes first although it is not the oldest
    assert {e.id for e in m.all()} == {weak.id, strong.id, mid.id}
    m.add(softmax_exp(title="mid2", speedup=1.5, created_at=400))
    # then the lowest seen x speedup (weak: 1.1)
    assert {e.id for e in m.all()} == {strong.id, mid.id, experience_id_of(m, "mid2")}
    m.add(softmax_exp(title="mid3", speedup=1.5, created_at=500))
    # three at 1.5: the least recently observed one (mid, t=300) goes
    assert mid.id not in {e.id for e in m.all()}
    # seen counts: a rule seen twice at 1.5 (score 3.0) outlives one seen once at 2.9
    m.add(softmax_exp(title="mid3", speedup=1.5, created_at=600))
    m.add(softmax_exp(title="single", speedup=2.9, created_at=700))
    titles = {e.title for e in m.all()}
    assert "mid3" in titles and "strong" in titles and neg.id not in {e.id for e in m.all()}
    assert len(m) == 3
    m.close()


def experience_id_of(m: OptimizationMemory, title: str) -> str:
    return next(e.id for e in m.all() if e.title == title)


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


# -- results store -----------------------------------------------------------------------------


def test_results_store_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    store, warning = ResultsStore.open(Settings(memory_dir=str(tmp_path)))
    assert warning is None and store is not None
    assert store.directory == tmp_path / "results"
    kernel_file = tmp_path / "softmax.py"
    report = {"kernel_name": "softmax_kernel", "candidates": [{"id": "c1", "speedup": 1.7}]}
    store.save(str(kernel_file), "softmax_kernel", SOFTMAX, report)
    assert store.load(str(kernel_file), "softmax_kernel", SOFTMAX) == report
    monkeypatch.chdir(tmp_path)
    assert store.load("softmax.py", "softmax_kernel", SOFTMAX) == report  # relative path
    # formatting and comments do not change the fingerprint
    assert store.load(str(kernel_file), "softmax_kernel", SOFTMAX + "\n# a comment\n") == report
    store.close()
    reopened = ResultsStore(tmp_path / "results")  # survives a restart
    assert reopened.load(str(kernel_file), "softmax_kernel", SOFTMAX) == report
    assert reopened.remove(str(kernel_file), "softmax_kernel", SOFTMAX) is True
    assert reopened.load(str(kernel_file), "softmax_kernel", SOFTMAX) is None
    reopened.close()


def test_results_store_source_change_and_other_keys(tmp_path: Path):
    store = ResultsStore(tmp_path / "results")
    path = str(tmp_path / "k.py")
    store.save(path, "softmax_kernel", SOFTMAX, {"best": 1})
    changed = SOFTMAX.replace("num / den", "num * (1.0 / den)")
    assert store.load(path, "softmax_kernel", changed) is None
    assert store.load(path, "other_kernel", SOFTMAX) is None
    assert store.load(str(tmp_path / "elsewhere.py"), "softmax_kernel", SOFTMAX) is None
    store.save(path, "softmax_kernel", changed, {"best": 2})
    assert store.load(path, "softmax_kernel", SOFTMAX) == {"best": 1}
    assert store.load(path, "softmax_kernel", changed) == {"best": 2}
    with pytest.raises(TypeError):
        store.save(path, "softmax_kernel", SOFTMAX, {"bad": object()})
    assert store.load(path, "softmax_kernel", SOFTMAX) == {"best": 1}
    other = str(tmp_path / "other.py")
    store.save(other, "softmax_kernel", SOFTMAX, {"best": 3})
    assert store.clear(path) == 2  # both sources of k.py, not other.py
    assert store.load(path, "softmax_kernel", changed) is None
    assert store.load(other, "softmax_kernel", SOFTMAX) == {"best": 3}
    assert store.clear() == 1 and store.load(other, "softmax_kernel", SOFTMAX) is None
    store.close()
