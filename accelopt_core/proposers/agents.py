"""AgentProposer: AccelOpt's planner / executor / summarizer agents (+ a fixer) over an
OpenAI-compatible endpoint (arXiv 2511.15915, section 3).

- plan: N planner calls in flight at once (asyncio.gather), each asked for ONE plan, with
  temperature > 0 so that they differ; plans with the same title
  (:func:`accelopt_core.proposers.parsing.title_key`) are dropped.
- implement: K executor calls at once for one plan; each reply is parsed into a candidate
  (:func:`accelopt_core.proposers.parsing.parse_code_reply`) with the original harness restored.
- fix: one fixer call given the failing source, the error message and the failing line.
- summarize: one summarizer call turning a slow->fast pair into a reusable rule.

The calls go through :class:`accelopt_core.proposers.llm.LLMClient`; the prompts and the values
that fill them are :mod:`accelopt_core.proposers.prompting`'s.

No method raises for an unreachable endpoint or a bad reply (only ``asyncio.CancelledError``
passes through): a failed planner call yields fewer plans, a failed executor/fixer call a
``Sample(None, "LLM unavailable: ...", stage="llm")``, a failed summarizer call a fallback rule
built from the plan title, its text starting with :data:`FALLBACK_MARK`.

Issue 30: a prompt over the model's context is trimmed once (memory experiences first, then the
glossary: :func:`~accelopt_core.proposers.prompting.trim_prompt`) and sent again; a missing or
rejected key or a spent quota makes :meth:`AgentProposer.unusable` say why, so the search stops
with one message. Every call is handed, with its verdict, to the callbacks of
:meth:`AgentProposer.record_calls` as a :class:`~accelopt_core.proposers.base.CallRecord` (the
run's transcript); with ``llm.storePrompts`` false, without its prompt and reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers.base import (
    UNUSABLE_REPLY,
    CallRecord,
    Plan,
    ProposalContext,
    Rule,
    Sample,
    Usage,
)
from accelopt_core.proposers.calls import CallLog
from accelopt_core.proposers.llm import (
    Completion,
    LLMClient,
    LLMContextError,
    LLMError,
    LLMUnusable,
)
from accelopt_core.proposers.parsing import (
    NO_CODE,
    parse_code_reply,
    parse_plan_reply,
    parse_rule_reply,
    title_key,
)
from accelopt_core.proposers.prompting import (
    common_values,
    error_excerpt,
    format_error,
    format_experiences,
    format_profile,
    load_prompt,
    proposal_hint,
    render,
    trim_prompt,
)
from accelopt_core.settings import LLMSettings

log = logging.getLogger("accelopt.agents")

#: Start of a fallback rule's text (the summarizer was unavailable).
FALLBACK_MARK = "[fallback rule: the summarizer was unavailable]"
#: Planner temperature used when several plans are asked for and the setting is 0.
MIN_PLAN_TEMPERATURE = 0.7


class AgentProposer:
    """The LLM proposer (name ``"llm"``) implementing :class:`accelopt_core.proposers.Proposer`.

    Args:
        llm: the ``llm`` settings section (endpoint, model, roles, temperature).
        max_tokens: the search's token budget for a client made here (None: no limit).
        client: an :class:`LLMClient` to share (its usage then includes other users' calls);
            None makes one.
    """

    name = "llm"

    def __init__(
        self,
        llm: LLMSettings,
        *,
        max_tokens: int | None = None,
        client: LLMClient | None = None,
    ) -> None:
        self.llm = llm
        self.client = client or LLMClient(llm, max_tokens=max_tokens)
        self.calls = CallLog(llm)

    # -- Proposer ----------------------------------------------------------------------------
    async def plan(self, ctx: ProposalContext, n: int) -> list[Plan]:
        """Up to ``n`` plans with distinct titles from ``n`` concurrent planner calls; a call
        that fails (LLMError, empty reply) contributes nothing."""
        if n <= 0:
            return []
        temperature = self.llm.temperature
        if n > 1 and temperature <= 0:
            temperature = MIN_PLAN_TEMPERATURE
        values = common_values(ctx) | {
            "glossary": load_prompt("profile_glossary").strip(),
            "source": ctx.parent_source.rstrip("\n"),
            "profile": format_profile(ctx.parent_result, ctx.baseline_result),
            "positives": format_experiences(list(ctx.positives), positive=True),
            "negatives": format_experiences(list(ctx.negatives), positive=False),
        }
        plans = await asyncio.gather(
            *(
                self._plan_call(values | {"proposal_hint": proposal_hint(i, n)}, temperature)
                for i in range(n)
            )
        )
        return _distinct(plans)

    async def implement(self, ctx: ProposalContext, plan: Plan, k: int) -> list[Sample]:
        """``k`` concurrent executor calls implementing ``plan`` on ``ctx.parent_source``; one
        Sample per call, failed ones with ``source=None`` and the reason in ``error``."""
        if k <= 0:
            return []
        values = common_values(ctx) | {
            "plan": plan.text,
            "source": ctx.parent_source.rstrip("\n"),
        }
        messages = render("executor", values)  # the K calls send the same prompt: render once
        samples = (
            self._code_call("executor", values, ctx, ctx.parent_source, messages) for _ in range(k)
        )
        return list(await asyncio.gather(*samples))

    async def fix(
        self, ctx: ProposalContext, plan: Plan, source: str, result: EvalResult
    ) -> Sample | None:
        """One fixer call for ``source`` that failed with ``result`` (status, message, line);
        edit blocks in the reply apply to ``source``."""
        unusable = result.rule == UNUSABLE_REPLY
        values = common_values(ctx) | {
            "plan": plan.text,
            "source": source.rstrip("\n"),
            "status": "the previous answer held no usable code" if unusable else result.status,
            "error": format_error(result),
            "excerpt": error_excerpt(source, result.line),
        }
        return await self._code_call("fixer", values, ctx, source)

    async def summarize(
        self, ctx: ProposalContext, plan: Plan, slow_source: str, fast_source: str, speedup: float
    ) -> Rule:
        """A reusable rule from the slow->fast pair (``speedup`` = slow / fast latency; a
        negative experience when <= 1). Falls back to a rule made from the plan title, its text
        starting with :data:`FALLBACK_MARK`, when the call or its reply fails."""
        device = ctx.parent_result.device or ctx.baseline_result.device or "an unknown device"
        verdict = "faster" if speedup > 1 else "no gain: a negative example"
        values = common_values(ctx) | {
            "device": device,
            "speedup": f"{speedup:.3g}",
            "verdict": verdict,
            "plan": plan.text,
            "slow_source": slow_source.rstrip("\n"),
            "fast_source": fast_source.rstrip("\n"),
        }
        done: Completion | None = None
        try:
            done = await self._ask("summarizer", values)
            rule = parse_rule_reply(done.text)
        except LLMError as exc:
            why = str(exc)
        except ValueError as exc:
            why = str(exc)
            self.calls.verdict(done, "unusable", why)
        except Exception as exc:
            log.exception("summarizer call failed unexpectedly")
            why = f"{type(exc).__name__}: {exc}"
        else:
            rule.usage, rule.call = done.usage, self.calls.verdict(done, "rule", rule.title)
            return rule
        return _fallback_rule(ctx, plan, speedup, why)

    def usage(self) -> dict[str, Usage]:
        """Tokens and cost so far per role (from the client)."""
        return self.client.usage_by_role()

    def unusable(self) -> str | None:
        """Why no call can succeed (a missing or rejected API key, a spent quota: checked
        without a request, then as calls fail), None while calls may succeed. The search stops
        with this message."""
        return self.client.preflight()

    def record_calls(self, callback: Callable[[CallRecord], None]) -> None:
        """Hand every later call, with its verdict, to ``callback`` (on the event loop; an
        exception it raises is logged and ignored)."""
        self.calls.subscribe(callback)

    async def warm(self) -> None:
        """Prepare the LLM clients (no request is sent); see :meth:`LLMClient.warm`."""
        await self.client.warm()

    async def close(self) -> None:
        """Close the client's HTTP connections."""
        await self.client.close()

    # -- calls -------------------------------------------------------------------------------
    async def _ask(
        self,
        role: str,
        values: dict[str, str],
        *,
        temperature: float | None = None,
        messages: list[dict[str, str]] | None = None,
    ) -> Completion:
        """One chat completion of ``role`` with its prompt filled from ``values`` (or the
        ``messages`` already rendered from them). A prompt over the model's context is trimmed
        (:func:`trim_prompt`) and sent once more; a call that fails is recorded and re-raised.

        Raises:
            LLMError: the call failed (after the client's retries; after the trimmed retry).
        """
        messages = messages or render(role, values)
        try:
            return await self.calls.request(self.client, role, messages, temperature)
        except LLMContextError as exc:
            trimmed, cut = trim_prompt(values, exc.excess_tokens)
            if not cut:
                raise
            log.info("%s prompt over the model's context: %s left out", role, " and ".join(cut))
            return await self.calls.request(
                self.client, role, render(role, trimmed), temperature, cut
            )

    async def _plan_call(self, values: dict[str, str], temperature: float) -> Plan | None:
        """One planner call; None (logged) when the call fails or its reply holds no plan."""
        done: Completion | None = None
        try:
            done = await self._ask("planner", values, temperature=temperature)
            plan = parse_plan_reply(done.text)
        except LLMUnusable as exc:  # the search stops with this one message
            log.debug("planner call failed: %s", exc)
            return None
        except LLMError as exc:
            log.warning("planner call failed: %s", exc)
            return None
        except ValueError as exc:
            log.warning("planner reply unusable: %s", exc)
            self.calls.verdict(done, "unusable", str(exc))
            return None
        except Exception:
            log.exception("planner call failed unexpectedly")
            return None
        plan.usage, plan.call = done.usage, self.calls.verdict(done, "plan", plan.title)
        return plan

    async def _code_call(
        self,
        role: str,
        values: dict[str, str],
        ctx: ProposalContext,
        current_source: str,
        messages: list[dict[str, str]] | None = None,
    ) -> Sample:
        """One executor or fixer call whose reply edits ``current_source``; an unreachable LLM or
        any other failure becomes a Sample with ``source=None`` and the reason."""
        try:
            done = await self._ask(role, values, messages=messages)
        except LLMError as exc:
            return Sample(None, error=f"LLM unavailable: {exc}", stage="llm")
        except Exception as exc:
            log.exception("%s call failed unexpectedly", role)
            return Sample(None, error=f"{role} failed: {type(exc).__name__}: {exc}", stage="llm")
        sample = parse_code_reply(
            done.text,
            current_source,
            original=ctx.original,
            entry=ctx.entry,
            cut=done.finish_reason == "length",
        )
        sample.usage = done.usage
        if sample.source is None:
            sample.error = _why_no_code(sample.error, done)
        if done.record is not None:  # the transcript shows what reading the reply changed
            done.record.notes = [*done.notes, *sample.notes]
        verdict = "candidate" if sample.source is not None else "unusable"
        sample.call = self.calls.verdict(done, verdict, sample.error)
        return sample


def _why_no_code(error: str | None, done: Completion) -> str | None:
    """A parse error made plainer: a reply that was all ``reasoning_content``, or one cut off
    at the output token limit (continued or not), says so."""
    if error == NO_CODE and not done.text.strip() and done.reasoning_chars:
        error = "the reply held only the model's reasoning (reasoning_content) and no answer"
    if done.finish_reason == "length":
        error = f"{error} (the reply was cut off at the output token limit)"
    elif done.continued:
        error = f"{error} (the reply was cut off at the output token limit and continued once)"
    return error


def _distinct(plans: list[Plan | None]) -> list[Plan]:
    """The plans in order, without failed calls (None) and without repeated titles."""
    seen: set[str] = set()
    out: list[Plan] = []
    for plan in plans:
        if plan is not None and title_key(plan.title) not in seen:
            seen.add(title_key(plan.title))
            out.append(plan)
    return out


def _fallback_rule(ctx: ProposalContext, plan: Plan, speedup: float, why: str) -> Rule:
    """The rule recorded when the summarizer failed (``why``): the plan's title and text."""
    plan_text = " ".join(plan.text.split())[:500]
    return Rule(
        title=plan.title,
        rule=f"{FALLBACK_MARK} ({why}) Plan '{plan.title}' measured {speedup:.2f}x on "
        f"`{ctx.kernel_name}`. Plan: {plan_text}",
    )
