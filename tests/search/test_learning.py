"""What a search writes to the optimization memory (accelopt_core.search.learning): summaries of
confirmed slow->fast steps, negative experiences, nothing without a memory, and a warning (never
an exception) when a write fails. Real memory on disk, the offline proposer's summarizer."""

from __future__ import annotations

from pathlib import Path

from accelopt_core.kernelfile import KernelFile
from accelopt_core.memory import OptimizationMemory
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan
from accelopt_core.proposers.offline import OfflineProposer
from accelopt_core.search import Candidate
from accelopt_core.search.events import Subscribers
from accelopt_core.search.learning import Learner
from accelopt_core.search.proposing import Contexts
from accelopt_core.search.report import Tally
from accelopt_core.search.trials import Trials
from tests.search.conftest import candidate_source


def timed(ms: float | None) -> EvalResult:
    if ms is None:
        return EvalResult.failure("incorrect", "max abs error 1.0")
    return EvalResult(status="ok", latency_ms=ms, timing="interpreter", device="cpu")


def learner(add_file: KernelFile, memory: OptimizationMemory | None, tally: Tally) -> Learner:
    """A learner for add_kernel whose baseline was timed at 2 ms (nothing is evaluated here)."""
    trials = Trials(None, add_file, "add", tally, Subscribers())
    trials.baseline = Candidate.baseline(add_file.source, timed(2.0))
    contexts = Contexts(add_file, add_file.kernel("add_kernel"), "add", trials, tally)
    return Learner(memory, OfflineProposer(), add_file.kernel("add_kernel"), contexts, tally)


def step(
    add_file: KernelFile, slow_ms: float | None, fast_ms: float
) -> tuple[Candidate, Candidate]:
    slow = Candidate.baseline(add_file.source, timed(slow_ms))
    plan = Plan(title="Raise BLOCK to 128", text="Use BLOCK=128 in add_kernel.")
    fast = Candidate.child(slow, plan, candidate_source("ok_block128"), 1)
    fast.result, fast.retimed = timed(fast_ms), True
    return slow, fast


async def test_confirmed_step_is_summarized_into_a_positive_experience(
    add_file: KernelFile, tmp_path: Path
) -> None:
    memory = OptimizationMemory(tmp_path / "memory")
    learn = learner(add_file, memory, Tally())
    slow, fast = step(add_file, 2.0, 1.0)
    learn.learn(slow, fast, positive=True)
    assert await learn.drain() == 1
    [exp] = memory.all()
    assert exp.positive and exp.speedup == 2.0
    assert exp.title == "Raise BLOCK from 64 to 128"  # the offline summarizer's rule
    assert (exp.kernel_name, exp.backend, exp.device) == ("add_kernel", "triton", "cpu")
    assert exp.slow_source == slow.source and exp.fast_source == fast.source


async def test_slower_rewrite_becomes_a_negative_experience(
    add_file: KernelFile, tmp_path: Path
) -> None:
    memory = OptimizationMemory(tmp_path / "memory")
    learn = learner(add_file, memory, Tally())
    slow, fast = step(add_file, 1.0, 2.0)
    learn.learn(slow, fast, positive=False)
    assert await learn.drain() == 1
    [exp] = memory.all()
    assert not exp.positive and exp.speedup == 0.5
    assert exp.title == "did not help: Raise BLOCK to 128"
    assert exp.rule == (
        "'Raise BLOCK to 128' made add_kernel slower (0.50x of its parent's speed). "
        "Use BLOCK=128 in add_kernel."
    )


async def test_without_memory_nothing_is_written(add_file: KernelFile) -> None:
    learn = learner(add_file, None, Tally())
    learn.learn(*step(add_file, 2.0, 1.0), positive=True)
    assert learn.pending() == []
    assert await learn.drain() == 0


async def test_a_write_that_fails_is_a_warning(add_file: KernelFile, tmp_path: Path) -> None:
    memory = OptimizationMemory(tmp_path / "memory")
    tally = Tally()
    learn = learner(add_file, memory, tally)
    slow, fast = step(add_file, None, 1.0)  # the slow side was never timed: speedup 0, invalid
    learn.learn(slow, fast, positive=False)
    learn.learn(slow, fast, positive=False)
    assert await learn.drain() == 0
    assert len(memory) == 0
    assert tally.warnings == [
        "optimization memory not updated: speedup must be a positive finite number, got 0.0"
    ]
