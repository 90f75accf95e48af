"""An experience remembers what its rewrite did on the GPU the kernels were compiled for
(issue 21): registers, occupancy and its limiter, spills, shared memory and SASS counts before
and after. Stored with the experience, exported and imported, merged, written by the search's
learner from the two results, shown by `accelopt memory show` and given to the planner."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from accelopt_cli import render
from accelopt_core.devicefacts import before_after
from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.memory import Experience, OptimizationMemory
from accelopt_core.memory.experience import merge, read_jsonl, write_jsonl
from accelopt_core.proposers import Plan
from accelopt_core.proposers.offline import OfflineProposer
from accelopt_core.proposers.prompting import format_experiences
from accelopt_core.search import Candidate
from accelopt_core.search.learning import Learner
from accelopt_core.search.report import Tally
from tests.gpu_metrics import gpu_metrics, ok_result
from tests.memory.experiences import SOFTMAX, make_exp

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"

FASTER = {"registers": 32,
          "occupancy": {"warps": 48, "max_warps": 64, "percent": 75.0, "limiter": "warps"}}  # fmt: skip


def facts() -> dict:
    return before_after(gpu_metrics(), gpu_metrics(**FASTER))


def with_facts(**kw) -> Experience:
    exp = make_exp(**kw)
    exp.gpu_facts = facts()
    return exp


def test_gpu_facts_round_trip_through_the_store_and_jsonl(
    mem: OptimizationMemory, tmp_path: Path
) -> None:
    exp = with_facts()
    mem.add(exp)
    [stored] = mem.all()
    assert stored.gpu_facts == facts()
    assert write_jsonl(tmp_path / "out.jsonl", [stored]) == 1
    [back] = read_jsonl(tmp_path / "out.jsonl")
    assert back.gpu_facts["after"]["kernels"]["softmax_kernel"]["registers"] == 32


def test_records_without_gpu_facts_still_read_and_bad_ones_are_refused() -> None:
    data = make_exp().to_dict()
    del data["gpu_facts"]
    assert Experience.from_dict(data).gpu_facts == {}
    data["gpu_facts"] = "registers 44"
    with pytest.raises(ValueError, match="gpu_facts"):
        Experience.from_dict(data)


def test_merge_keeps_the_newest_facts_and_never_drops_them() -> None:
    old = with_facts(created_at=100.0)
    newer = make_exp(created_at=200.0)  # observed again, by a run without a compile stage
    assert merge(old, newer, add_seen=True).gpu_facts == facts()
    fresher = with_facts(created_at=300.0)
    fresher.gpu_facts["after"]["kernels"]["softmax_kernel"]["registers"] = 30
    merged = merge(old, fresher, add_seen=True)
    assert merged.gpu_facts["after"]["kernels"]["softmax_kernel"]["registers"] == 30


def test_memory_show_and_the_planner_read_the_before_and_after() -> None:
    exp = with_facts()
    buf = io.StringIO()
    render.print_experience(Console(file=buf, width=250), exp)
    text = buf.getvalue()
    assert "on the GPU (slow → fast)" in text
    assert "softmax_kernel on sm_90: registers 44→32, occupancy 50%→75% (registers→warps)" in text
    prompt = format_experiences([exp], positive=True)
    assert "\n  GPU: softmax_kernel on sm_90: registers 44→32, occupancy 50%→75%" in prompt
    assert "GPU:" not in format_experiences([make_exp()], positive=True)


async def test_the_learner_stores_both_sides_facts(tmp_path: Path) -> None:
    add_file = parse_kernel_file((CANDIDATES / "add.py").read_text(), "add.py")
    kernel = add_file.kernel("add_kernel")
    memory = OptimizationMemory(tmp_path / "memory")
    try:
        learn = Learner(memory, OfflineProposer(), kernel, None, Tally())  # type: ignore[arg-type]
        slow_metrics = gpu_metrics(kernel="add_kernel")
        fast_metrics = gpu_metrics(kernel="add_kernel", **FASTER)
        slow = Candidate.baseline(add_file.source, ok_result(slow_metrics, latency_ms=1.0))
        plan = Plan(title="Raise BLOCK to 128", text="Use BLOCK=128 in add_kernel.")
        fast = Candidate.child(slow, plan, (CANDIDATES / "ok_block128.py").read_text(), 1)
        fast.result, fast.retimed = ok_result(fast_metrics, latency_ms=2.0), True
        learn.learn(slow, fast, positive=False)  # slower: a negative, no summarizer call
        assert await learn.drain() == 1
        [exp] = memory.all()
        assert exp.gpu_facts["before"]["kernels"]["add_kernel"]["registers"] == 44
        assert exp.gpu_facts["after"]["kernels"]["add_kernel"]["limiter"] == "warps"
        assert exp.gpu_facts["after"]["arch"] == "sm_90"
    finally:
        memory.close()


def test_an_experience_without_a_compile_stage_has_no_facts() -> None:
    assert make_exp().gpu_facts == {}
    assert Experience.create(
        backend="triton", device="cpu", timing="interpreter", kernel_name="k",
        slow_source=SOFTMAX, fast_source=SOFTMAX + "#", speedup=2.0, title="t", rule="r",
        gpu_facts=before_after({}, {}),
    ).gpu_facts == {}  # fmt: skip
