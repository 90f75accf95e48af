"""What a search writes to the optimization memory (accelopt_core.search.learning): summaries of
confirmed slow->fast steps, negative experiences, reward-hack experiences for candidates the judge
caught (and what the planner is shown of them), nothing without a memory, and a warning (never
an exception) when a write fails. Real memory on disk, the offline proposer's summarizer; the
whole-search test uses the scripted evaluator of tests/search/scripted.py."""

from __future__ import annotations

import re
from pathlib import Path

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile
from accelopt_core.memory import OptimizationMemory
from accelopt_core.onsite.protocol import JUDGE_VERSION, EvalResult
from accelopt_core.proposers import Plan
from accelopt_core.proposers.offline import OfflineProposer
from accelopt_core.proposers.prompting import format_experiences
from accelopt_core.search import BeamSearch, Candidate, CandidateEvaluated
from accelopt_core.search.events import Subscribers
from accelopt_core.search.learning import Learner
from accelopt_core.search.proposing import HACKS_SHOWN, Contexts
from accelopt_core.search.report import Tally
from accelopt_core.search.trials import Trials
from accelopt_core.settings import SearchSettings
from tests.search.conftest import candidate_source
from tests.search.scripted import ScriptedEvaluator


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
    # a step confirmed in A/B rounds records their median ratio, not its latency against a
    # parent timed at another moment (here the stale figures would say 0.95x)
    other = OptimizationMemory(tmp_path / "other")
    learn = learner(add_file, other, Tally())
    slow, fast = step(add_file, 2.0, 2.1)
    fast.ab_ratios = [0.5, 0.9, 0.6]
    learn.learn(slow, fast, positive=True)
    assert await learn.drain() == 1
    [exp] = other.all()
    assert exp.positive and exp.speedup == 1 / 0.6
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
    assert exp.reason == "correct but slower: 0.5x of its parent's speed (2 ms against 1 ms)"


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


# -- issue 10: candidates the judge caught are remembered as hacks ------------------------------


def caught(rule: str | None, message: str = "per-call latencies sum to 2% of the wall time"):
    return EvalResult.failure("rejected", message, rule=rule, timing="interpreter", device="cpu")


async def test_a_caught_candidate_becomes_a_reward_hack_negative(
    add_file: KernelFile, tmp_path: Path
) -> None:
    memory = OptimizationMemory(tmp_path / "memory")
    learn = learner(add_file, memory, Tally())
    slow, fast = step(add_file, 2.0, 1.0)
    fast.result = caught("timing inconsistent")
    assert learn.learn_hack(slow, fast)
    assert not learn.learn_hack(slow, fast)  # once per candidate
    learn.learn(slow, fast, positive=True)  # never a positive, whatever the caller says
    assert await learn.drain() == 1
    [exp] = memory.all()
    assert exp.title == "reward-hack: timing inconsistent" and exp.hack == "timing inconsistent"
    assert not exp.positive and exp.speedup == 1.0
    assert exp.slow_source == slow.source and exp.fast_source == fast.source
    assert exp.plan == "Use BLOCK=128 in add_kernel."
    assert "Raise BLOCK to 128" in exp.rule and "2% of the wall time" in exp.rule
    assert exp.reason == (
        "gate: timing inconsistent: per-call latencies sum to 2% of the wall time"
    )  # issue 30: the reason in full, where the rule keeps 300 characters of it
    assert exp.timing == "interpreter" and exp.judge_version == JUDGE_VERSION
    assert memory.all(positive=True) == []


async def test_only_a_rejection_with_a_rule_is_a_hack(add_file: KernelFile, tmp_path: Path) -> None:
    memory = OptimizationMemory(tmp_path / "memory")
    learn = learner(add_file, memory, Tally())
    slow, fast = step(add_file, 2.0, 1.0)
    fast.result = caught(None)  # rejected, but no trust rule named
    assert not learn.learn_hack(slow, fast)
    fast.result = EvalResult.failure("incorrect", "max abs error 1.0", rule="timing inconsistent")
    assert not learn.learn_hack(slow, fast)
    assert not learner(add_file, None, Tally()).learn_hack(slow, caught_cand(fast))
    assert await learn.drain() == 0 and len(memory) == 0


def caught_cand(cand: Candidate) -> Candidate:
    cand.result = caught("no kernel launch")
    return cand


async def test_a_search_stores_every_caught_rewrite_and_no_positive(
    add_file: KernelFile, tmp_path: Path
) -> None:
    """The whole BeamSearch with the offline proposer and a scripted evaluator: the original is
    timed, every rewrite is caught by a trust rule (as the judge would for an output cache)."""
    base = add_file.source

    def script(source: str, n: int) -> EvalResult:
        return timed(2.0) if source == base else caught("output cache")

    memory = OptimizationMemory(tmp_path / "memory")
    settings = SearchSettings(iterations=2, beam_width=1, plans_per_candidate=2, fixer_attempts=0)
    search = BeamSearch(
        add_file,
        "add_kernel",
        settings,
        ScriptedEvaluator(script),
        OfflineProposer(),
        memory=memory,
    )
    evaluated: list[Candidate] = []
    search.subscribe(
        lambda e: evaluated.append(e.candidate) if isinstance(e, CandidateEvaluated) else None
    )
    report = await search.run()
    rewrites = {c.id: c for c in evaluated if c.parent_id is not None}.values()
    assert rewrites and report.candidates == []
    # one experience per (parent, rule): the same hack caught again on the same parent is
    # merged (seen counts the catches, the newest rewrite and plan are kept)
    [hack] = memory.all()
    assert hack.title == "reward-hack: output cache" and hack.hack == "output cache"
    assert hack.seen == len(rewrites) == report.memory_added
    assert hack.slow_source == base and hack.fast_source in {c.source for c in rewrites}
    assert memory.all(positive=True) == []


async def test_the_planner_is_shown_hacks_as_do_not_examples(
    add_file: KernelFile, tmp_path: Path
) -> None:
    """What the memory hands the planner: rules and negatives by similarity, at most
    HACKS_SHOWN hacks apart from them, and no interpreter-timed rule on a GPU search."""
    memory = OptimizationMemory(tmp_path / "memory")
    learn = learner(add_file, memory, Tally())
    slow, fast = step(add_file, 2.0, 1.0)
    learn.learn(slow, fast, positive=True)  # an interpreter-timed positive
    for i, rule in enumerate(["timing inconsistent", "no kernel launch", "gate: eval", "x"]):
        cand = Candidate.child(slow, Plan(f"hack {i}", f"Hack number {i}."), f"x = {i}\n", 1)
        cand.result = caught(rule)
        learn.learn_hack(slow, cand)
    await learn.drain()

    def contexts(timing: str) -> Contexts:
        trials = Trials(None, add_file, "add", Tally(), Subscribers())
        result = EvalResult(status="ok", latency_ms=2.0, timing=timing, device="GPU")
        trials.baseline = Candidate.baseline(add_file.source, result)
        kernel = add_file.kernel("add_kernel")
        return Contexts(add_file, kernel, "add", trials, Tally(), memory=memory, top_k=3)

    on_cpu = await contexts("interpreter").for_parent(slow, 1)
    assert [e.title for e in on_cpu.positives] == ["Raise BLOCK from 64 to 128"]
    assert len(on_cpu.negatives) == HACKS_SHOWN and all(e.hack for e in on_cpu.negatives)
    on_gpu = await contexts("cuda").for_parent(slow, 1)
    assert on_gpu.positives == [] and len(on_gpu.negatives) == HACKS_SHOWN

    text = format_experiences(on_cpu.negatives, positive=False)
    none, section = text.split("\n\n")
    assert none == "(none recorded)"
    head, *lines = section.splitlines()
    assert head == "# Do not (caught as reward hacks)" and len(lines) == HACKS_SHOWN
    assert all(re.fullmatch(r"- [\w: ]+: Hack number \d\.", line) for line in lines)
    shown = format_experiences(on_cpu.positives, positive=True)
    assert "interpreter-timed" in shown and "Do not" not in shown


async def test_a_finalist_caught_at_its_re_timing_becomes_a_hack(
    add_file: KernelFile, tmp_path: Path
) -> None:
    """A rewrite timed fast at first, then caught by the judge when it is timed again: a hack,
    not a positive, and not ranked."""
    base = add_file.source

    def script(source: str, n: int) -> EvalResult:
        if source == base:
            return timed(2.0)
        return timed(1.0) if n == 0 else caught("implausible speedup")

    memory = OptimizationMemory(tmp_path / "memory")
    settings = SearchSettings(iterations=1, beam_width=1, plans_per_candidate=1, fixer_attempts=0)
    search = BeamSearch(
        add_file,
        "add_kernel",
        settings,
        ScriptedEvaluator(script),
        OfflineProposer(),
        memory=memory,
    )
    report = await search.run()
    assert report.candidates == [] and memory.all(positive=True) == []
    [hack] = memory.all()
    assert hack.hack == "implausible speedup" and hack.slow_source == base


async def test_a_gate_rejection_reaches_the_memory_as_a_hack(
    add_file: KernelFile, evaluator: Evaluator, tmp_path: Path
) -> None:
    """The host-side static gate of the real Evaluator (no target run): its rejection names the
    rule, and the learner stores it as ``reward-hack: gate: ...``. The shell is reached through
    torch's re-export of ``os`` (an ``import os`` the original does not have is already
    ``gate: module not allowed``, issue 53)."""
    bad = add_file.source.replace("def add(", 'torch.os.system("true")\n\ndef add(', 1)
    slow, _ = step(add_file, 2.0, 1.0)
    fast = Candidate.child(slow, Plan("shell out", "Run a shell."), bad, 1)
    fast.result = await evaluator.evaluate(add_file.source, bad, "add")
    assert fast.result.status == "rejected" and fast.result.rule == "gate: shell"
    memory = OptimizationMemory(tmp_path / "memory")
    learn = learner(add_file, memory, Tally())
    assert learn.learn_hack(slow, fast)
    await learn.drain()
    [exp] = memory.all(hack=True)
    assert exp.title == "reward-hack: gate: shell" and exp.fast_source == bad
    assert "os.system" in exp.rule
