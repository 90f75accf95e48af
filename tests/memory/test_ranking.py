"""Tests of accelopt_core.memory.ranking through the memory: retrieval, device penalty,
mentions, eviction order."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.memory import DEVICE_PENALTY, OptimizationMemory
from accelopt_core.memory.ranking import eviction_order
from tests.memory.experiences import (
    MATMUL_QUERY,
    NKI_SOFTMAX,
    SOFTMAX_QUERY,
    make_exp,
    matmul_exp,
    softmax_exp,
)


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


def test_eviction_order_of_an_index():
    index = {  # id -> (positive, seen x speedup, updated_at, rev)
        "old-strong": (True, 3.0, 10.0, 1),
        "new-weak": (True, 1.1, 90.0, 2),
        "negative": (False, 9.0, 95.0, 3),
        "old-weak": (True, 1.1, 20.0, 4),
    }
    assert eviction_order(index) == ["negative", "old-weak", "new-weak", "old-strong"]
