"""Issue 30 in the agents (accelopt_core.proposers.agents): every call handed over with its
verdict (the run's transcript), a prompt over the context trimmed once, an unusable key said
once, a reply the model spent on reasoning named as such. The LLM is the scripted TEST DOUBLE
(tests/llm_double.py) spoken to by the real openai client."""

from __future__ import annotations

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import CallRecord, Plan
from accelopt_core.proposers.base import UNUSABLE_REPLY
from accelopt_core.proposers.prompting import LEFT_OUT, load_prompt
from tests.llm_double import LLMDouble, context_length, status, text
from tests.llm_double import llm_double as llm_double  # noqa: F401  (fixture)
from tests.proposers.test_agents import WIDE, make_ctx, make_proposer
from tests.proposers.test_parsing import fence

PLAN = Plan(title="widen", text="Title: widen\nUse BLOCK=1024.")


def recorded(proposer) -> list[CallRecord]:
    calls: list[CallRecord] = []
    proposer.record_calls(calls.append)
    return calls


async def test_every_call_is_recorded_with_its_verdict(llm_double: LLMDouble) -> None:
    llm_double.queue("Title: widen the block", role="planner")
    llm_double.queue(fence(WIDE), "only advice", status(400, "bad"), role="executor")
    llm_double.queue("Title: wide blocks\nRule: use 1024.", role="summarizer")
    proposer = make_proposer(llm_double, maxRetries=0)
    calls = recorded(proposer)
    ctx = make_ctx()
    [plan] = await proposer.plan(ctx, 1)
    samples = await proposer.implement(ctx, plan, 3)
    rule = await proposer.summarize(ctx, plan, ctx.parent_source, WIDE, 2.0)

    assert sorted(c.n for c in calls) == [1, 2, 3, 4, 5]
    by_n = {c.n: c for c in calls}
    assert plan.call == 1 and by_n[1].verdict == "plan" and by_n[1].detail == "widen the block"
    verdicts = sorted((c.verdict, c.detail) for c in calls if c.role == "executor")
    assert verdicts == [
        ("candidate", None),
        ("failed", f"executor call to {llm_double.base_url} (model double-model) failed: "
                   "HTTP 400: bad"),
        ("unusable", "reply held no code"),
    ]  # fmt: skip
    ok = next(s for s in samples if s.source is not None)
    assert by_n[ok.call].verdict == "candidate" and by_n[ok.call].reply == fence(WIDE)
    failed = next(c for c in calls if c.verdict == "failed")
    assert failed.status == 400 and failed.reply is None and failed.prompt_tokens == 0
    assert next(s for s in samples if s.stage == "llm").error.startswith("LLM unavailable")
    assert rule.call == 5 and by_n[5].verdict == "rule"
    planner = by_n[1]
    assert planner.prompt[1]["content"] == llm_double.requests[0].user
    assert planner.prompt_tokens > 0 and planner.latency_s > 0 and planner.model == "double-model"


async def test_prompts_and_replies_are_not_kept_when_told_not_to(llm_double: LLMDouble) -> None:
    llm_double.queue("Title: widen the block", role="planner")
    proposer = make_proposer(llm_double, storePrompts=False)
    calls = recorded(proposer)
    await proposer.plan(make_ctx(), 1)
    [call] = calls
    assert call.prompt == [] and call.reply is None
    assert call.verdict == "plan" and call.prompt_tokens > 0


async def test_a_prompt_over_the_context_loses_the_experiences_then_the_glossary(
    llm_double: LLMDouble,
) -> None:
    glossary = load_prompt("profile_glossary").strip()
    # 904 tokens over (~3,600 characters): the experiences alone are far less; the glossary too
    llm_double.queue(context_length(4096, 5000), "Title: widen", role="planner")
    proposer = make_proposer(llm_double)
    calls = recorded(proposer)
    [plan] = await proposer.plan(make_ctx(), 1)
    first, second = llm_double.requests
    assert "Widen blocks for memory-bound" in first.user and glossary in first.system
    assert "Widen blocks for memory-bound" not in second.user and LEFT_OUT in second.user
    assert glossary not in second.system
    assert [(c.verdict, c.trimmed) for c in calls] == [
        ("failed", []),
        ("plan", ["experiences", "glossary"]),
    ]
    assert plan.title == "widen" and proposer.usage()["planner"].calls == 1

    # 1 token over: leaving out the experiences is enough, the glossary stays
    llm_double.queue(context_length(4096, 4097), "Title: widen", role="planner")
    await proposer.plan(make_ctx(), 1)
    again = llm_double.requests[-1]
    assert LEFT_OUT in again.user and glossary in again.system


async def test_a_prompt_with_nothing_to_trim_fails_once(llm_double: LLMDouble) -> None:
    llm_double.queue(context_length(), role="executor")
    proposer = make_proposer(llm_double)
    [sample] = await proposer.implement(make_ctx(), PLAN, 1)
    assert len(llm_double.requests) == 1  # the executor's prompt has no experiences, no glossary
    assert sample.stage == "llm" and "maximum context length is 4096" in sample.error


async def test_a_rejected_key_makes_the_proposer_unusable(llm_double: LLMDouble) -> None:
    llm_double.api_key = "sk-another-key"
    proposer = make_proposer(llm_double)
    assert proposer.unusable() is None  # a key is set: only the server can reject it
    assert await proposer.plan(make_ctx(), 2) == []
    assert "was rejected" in (proposer.unusable() or "")
    assert len(llm_double.requests) <= 2  # the two planner calls in flight, nothing after
    [sample] = await proposer.implement(make_ctx(), PLAN, 1)
    assert sample.stage == "llm" and len(llm_double.requests) <= 2


async def test_the_fixer_is_told_the_previous_answer_held_no_code(llm_double: LLMDouble) -> None:
    llm_double.queue(fence(WIDE), role="fixer")
    proposer = make_proposer(llm_double)
    why = f"{UNUSABLE_REPLY}: reply held no code"
    failure = EvalResult.failure("compile_error", why, rule=UNUSABLE_REPLY)
    ctx = make_ctx()
    fixed = await proposer.fix(ctx, PLAN, ctx.parent_source, failure)
    assert fixed is not None and fixed.source is not None
    user = llm_double.requests[0].user
    assert "status: the previous answer held no usable code" in user
    assert "unusable reply: reply held no code" in user


async def test_a_reply_spent_on_reasoning_says_so(llm_double: LLMDouble) -> None:
    llm_double.queue(
        text("", reasoning_content="x " * 50, finish_reason="length"),
        text("<think>Let me see\n" + fence(WIDE)),  # the tag never closed
        role="executor",
    )
    proposer = make_proposer(llm_double)
    first, second = await proposer.implement(make_ctx(), PLAN, 2)
    errors = sorted([first.error, second.error])
    assert errors == [
        "the reply ended inside the model's reasoning (<think> without </think>): it held no "
        "answer",
        "the reply held only the model's reasoning (reasoning_content) and no answer (the "
        "reply was cut off at the output token limit)",
    ]
