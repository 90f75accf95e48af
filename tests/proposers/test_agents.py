"""AgentProposer (accelopt_core.proposers.agents) end to end with the real openai client against the
scripted LLM TEST DOUBLE (tests/llm_double.py)."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace

import pytest

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan, ProposalContext, Proposer
from accelopt_core.proposers.agents import FALLBACK_MARK, AgentProposer
from accelopt_core.proposers.parsing import NO_CODE
from accelopt_core.proposers.prompting import format_profile
from accelopt_core.settings import Settings
from tests.llm_double import LLMDouble, RecordedRequest, delay, status, text
from tests.llm_double import llm_double as llm_double  # noqa: F401  (fixture)
from tests.proposers.test_parsing import KERNELS, SOURCE, edit, fence

PARENT = EvalResult(
    status="ok",
    latency_ms=0.5,
    p20_ms=0.49,
    p80_ms=0.52,
    timing="cuda",
    pct_of_peak=12.5,
    bound="memory",
    gbps=418.0,
    device="NVIDIA H100 80GB HBM3",
)
BASELINE = EvalResult(status="ok", latency_ms=1.0, timing="cuda", device=PARENT.device)
POSITIVE = SimpleNamespace(
    title="Widen blocks for memory-bound kernels",
    rule="Use BLOCK >= 1024 so each program moves enough bytes.",
    speedup=2.4,
    kernel_name="relu",
    device="NVIDIA H100 80GB HBM3",
)
NEGATIVE = SimpleNamespace(title="Use atomics for the sum", rule="Slower: contention.", speedup=0.6)


def make_ctx(source: str = SOURCE) -> ProposalContext:
    return ProposalContext(
        original=parse_kernel_file(source, "add.py"),
        kernel_name="add_kernel",
        entry="add",
        parent_source=source,
        parent_result=PARENT,
        baseline_result=BASELINE,
        positives=[POSITIVE],
        negatives=[NEGATIVE],
    )


def make_proposer(double: LLMDouble, **llm) -> AgentProposer:
    settings = Settings.model_validate({"llm": double.llm_settings(**llm)})
    return AgentProposer(settings.llm, max_tokens=settings.search.max_tokens)


def proposal_number(req: RecordedRequest) -> int:
    m = re.search(r"proposal (\d+) of", req.user)
    assert m, "the planner prompt numbers parallel proposals"
    return int(m.group(1))


WIDE = KERNELS.replace("BLOCK=64", "BLOCK=1024").replace("cdiv(n, 64)", "cdiv(n, 1024)")


def test_agent_proposer_is_a_proposer(llm_double: LLMDouble) -> None:
    proposer = make_proposer(llm_double)
    assert isinstance(proposer, Proposer) and proposer.name == "llm"


async def test_plan_round_trip_drops_duplicate_titles(llm_double: LLMDouble) -> None:
    titles = {1: "Widen the block to 1024", 2: "Use 8 warps", 3: "widen the block to 1024!"}
    llm_double.script = lambda req: f"Title: {titles[proposal_number(req)]}\nSteps:\n1. do it"
    proposer = make_proposer(llm_double, temperature=0.0)
    plans = await proposer.plan(make_ctx(), 3)

    assert sorted(p.title for p in plans) == ["Use 8 warps", "Widen the block to 1024"]
    assert all(p.text.startswith("Title: ") and p.usage.calls == 1 for p in plans)
    reqs = llm_double.requests_for("planner")
    assert len(reqs) == 3
    assert {proposal_number(r) for r in reqs} == {1, 2, 3}
    assert all(r.temperature and r.temperature > 0 for r in reqs)  # 0 is raised for N > 1
    user, system = reqs[0].user, reqs[0].system
    assert "def add_kernel(" in user and "BENCH = {" in user  # the kernel source
    assert format_profile(PARENT, BASELINE) in user
    assert "latency: 0.5 ms median" in user and "% of peak: 12.5%, memory-bound" in user
    assert "speedup so far 2.00x" in user
    assert "- [2.40x, relu on NVIDIA H100 80GB HBM3] Widen blocks for memory-bound" in user
    assert "Use atomics for the sum: Slower: contention." in user
    assert "Triton notes" in system and "Profile glossary" in system
    assert "{{" not in user + system
    assert proposer.usage()["planner"].calls == 3


async def test_planner_sees_nki_notes_for_nki_files(llm_double: LLMDouble) -> None:
    nki_source = (
        "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n\n"
        "@nki.jit\ndef add_kernel(a, b):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, value=nl.load(a) + nl.load(b))\n    return out\n"
    )
    llm_double.script = lambda req: "Title: tile by 128 partitions"
    ctx = make_ctx()
    ctx.original = parse_kernel_file(nki_source, "add_nki.py")
    ctx.parent_source = nki_source
    plans = await make_proposer(llm_double).plan(ctx, 1)
    assert [p.title for p in plans] == ["tile by 128 partitions"]
    req = llm_double.requests[0]
    assert "NKI notes" in req.system and "Triton notes" not in req.system
    assert "proposal 1 of" not in req.user  # no parallel hint for a single plan


async def test_plans_are_requested_concurrently(llm_double: LLMDouble) -> None:
    n = 4

    def script(req: RecordedRequest) -> str:
        # hold every reply until all n requests are in flight; sequential calls would time out
        reached = llm_double.wait_in_flight(n, timeout=20)
        return f"Title: plan {proposal_number(req)} together={reached}"

    llm_double.script = script
    plans = await make_proposer(llm_double, timeoutS=60).plan(make_ctx(), n)
    assert llm_double.max_in_flight == n
    assert sorted(p.title for p in plans) == [f"plan {i} together=True" for i in range(1, n + 1)]


async def test_implement_round_trip_with_failures(llm_double: LLMDouble) -> None:
    llm_double.queue(
        "Here it is:\n" + fence(WIDE),
        "I think BLOCK should be bigger, but I am not sure how.",
        edit("    y = tl.load(y_ptr + offs)\n", "    y = tl.load(y_ptr + offs, mask=mask)\n"),
        role="executor",
    )
    plan = Plan(title="Widen the block", text="Title: Widen the block\nUse BLOCK=1024.")
    proposer = make_proposer(llm_double)
    samples = await proposer.implement(make_ctx(), plan, 3)

    assert len(samples) == 3 and all(s.usage.calls == 1 for s in samples)
    good = [s for s in samples if s.source is not None]
    assert len(good) == 1
    assert "BLOCK=1024" in good[0].source and "def get_inputs(seed, device):" in good[0].source
    errors = sorted(s.error or "" for s in samples if s.source is None)
    assert errors == [
        "SEARCH/REPLACE block 1 does not apply: its SEARCH text starting "
        "'y = tl.load(y_ptr + offs)' is not in the current source",
        NO_CODE,
    ]
    req = llm_double.requests_for("executor")[0]
    assert "Use BLOCK=1024." in req.user and "def add_kernel(" in req.user
    assert "SEARCH" in req.system and "ROLE: executor" in req.system
    assert proposer.usage()["executor"].calls == 3


async def test_samples_are_requested_concurrently(llm_double: LLMDouble) -> None:
    def script(req: RecordedRequest) -> str:
        llm_double.wait_in_flight(3, timeout=20)
        return fence(WIDE)

    llm_double.script = script
    plan = Plan(title="Widen", text="Widen the block.")
    samples = await make_proposer(llm_double, timeoutS=60).implement(make_ctx(), plan, 3)
    assert llm_double.max_in_flight == 3
    assert all(s.source is not None for s in samples)


async def test_truncated_reply_says_so(llm_double: LLMDouble) -> None:
    # cut at the limit, and its one continuation cut again (issue 53): still a cut reply
    llm_double.queue(
        text("```python\nimport triton\n", finish_reason="length"),
        text("import torch\n", finish_reason="length"),
    )
    plan = Plan(title="Widen", text="Widen the block.")
    [sample] = await make_proposer(llm_double).implement(make_ctx(), plan, 1)
    assert sample.source is None and len(llm_double.requests) == 2
    assert "cut off inside a code block" in (sample.error or "")
    assert "output token limit" in (sample.error or "")


async def test_fix_round_trip(llm_double: LLMDouble) -> None:
    broken = SOURCE.replace("    mask = offs < n\n", "    mask = offs < N\n")
    line = broken.splitlines().index("    mask = offs < N") + 1
    failure = EvalResult.failure("compile_error", "NameError: name 'N' is not defined", line=line)
    llm_double.queue(
        "The bound is lower-case.\n" + edit("    mask = offs < N\n", "    mask = offs < n\n"),
        role="fixer",
    )
    plan = Plan(title="Widen", text="Widen the block.")
    sample = await make_proposer(llm_double).fix(make_ctx(), plan, broken, failure)
    assert sample is not None and sample.error is None
    assert sample.source is not None and "mask = offs < n" in sample.source
    req = llm_double.requests_for("fixer")[0]
    assert "status: compile_error" in req.user
    assert "NameError: name 'N' is not defined" in req.user
    assert f">> {line} |     mask = offs < N" in req.user


async def test_summarize_round_trip(llm_double: LLMDouble) -> None:
    llm_double.queue(
        "Title: Widen blocks of memory-bound element-wise kernels\n"
        "Rule: With BLOCK=64 each program moves too few bytes; use 1024.\n"
        "Slow pattern:\n```python\nBLOCK=64\n```\n",
        role="summarizer",
    )
    plan = Plan(title="Widen the block", text="Use BLOCK=1024.")
    proposer = make_proposer(llm_double)
    rule = await proposer.summarize(make_ctx(), plan, SOURCE, WIDE, 1.8)
    assert rule.title == "Widen blocks of memory-bound element-wise kernels"
    assert rule.rule == "With BLOCK=64 each program moves too few bytes; use 1024."
    assert rule.usage.calls == 1
    req = llm_double.requests_for("summarizer")[0]
    assert "Measured speedup: 1.8x (faster)" in req.user
    assert "BLOCK=64" in req.user and "BLOCK=1024" in req.user
    assert "NVIDIA H100 80GB HBM3" in req.user


async def test_endpoint_failures_never_raise(llm_double: LLMDouble) -> None:
    llm_double.script = lambda req: status(503)
    proposer = make_proposer(llm_double, maxRetries=0)
    ctx = make_ctx()
    plan = Plan(title="Widen the block", text="Use BLOCK=1024.")

    assert await proposer.plan(ctx, 2) == []
    samples = await proposer.implement(ctx, plan, 2)
    assert [s.source for s in samples] == [None, None]
    assert all((s.error or "").startswith("LLM unavailable: executor call to") for s in samples)
    assert all("HTTP 503" in (s.error or "") for s in samples)
    fixed = await proposer.fix(ctx, plan, SOURCE, EvalResult.failure("incorrect", "mismatch"))
    assert fixed is not None and (fixed.error or "").startswith("LLM unavailable:")
    rule = await proposer.summarize(ctx, plan, SOURCE, WIDE, 0.9)
    assert rule.title == "Widen the block" and rule.rule.startswith(FALLBACK_MARK)
    assert "0.90x" in rule.rule
    assert proposer.usage() == {}  # failed calls cost nothing


async def test_unusable_plan_replies_give_fewer_plans(llm_double: LLMDouble) -> None:
    llm_double.queue("", "Title: Use 8 warps", role="planner")
    plans = await make_proposer(llm_double).plan(make_ctx(), 2)
    assert [p.title for p in plans] == ["Use 8 warps"]


async def test_budget_spent_stops_planning(llm_double: LLMDouble) -> None:
    llm_double.queue(text("Title: a", prompt_tokens=50, completion_tokens=50))
    settings = Settings.model_validate(
        {"llm": llm_double.llm_settings(), "search": {"maxTokens": 100}}
    )
    proposer = AgentProposer(settings.llm, max_tokens=settings.search.max_tokens)
    assert len(await proposer.plan(make_ctx(), 1)) == 1
    assert proposer.client.over_budget
    assert await proposer.plan(make_ctx(), 2) == []
    assert len(llm_double.requests) == 1  # no request past the budget


async def test_cancellation_propagates(llm_double: LLMDouble) -> None:
    llm_double.script = lambda req: delay(30.0, "Title: too late")
    proposer = make_proposer(llm_double, timeoutS=60)
    task = asyncio.create_task(proposer.plan(make_ctx(), 2))
    while llm_double.max_in_flight < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
