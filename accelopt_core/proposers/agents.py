"""AgentProposer: AccelOpt's planner / executor / summarizer agents (+ a fixer) over an
OpenAI-compatible endpoint (arXiv 2511.15915, section 3).

- plan: N planner calls in flight at once (asyncio.gather), each asked for ONE plan, with
  temperature > 0 so that they differ; plans with the same title are dropped.
- implement: K executor calls at once for one plan; each reply is parsed into a candidate
  (:func:`accelopt_core.proposers.parsing.parse_code_reply`) with the original harness restored.
- fix: one fixer call given the failing source, the error message and the failing line.
- summarize: one summarizer call turning a slow->fast pair into a reusable rule.

No method raises for an unreachable endpoint or a bad reply (only ``asyncio.CancelledError``
passes through): a failed planner call yields fewer plans, a failed executor/fixer call a
``Sample(None, "LLM unavailable: ...")``, a failed summarizer call a fallback rule built from
the plan title, its text starting with :data:`FALLBACK_MARK`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan, ProposalContext, Rule, Sample, Usage
from accelopt_core.proposers.llm import Completion, LLMClient, LLMError
from accelopt_core.proposers.parsing import parse_code_reply, parse_plan_reply, parse_rule_reply
from accelopt_core.proposers.prompting import api_note, load_prompt, render
from accelopt_core.settings import Settings

log = logging.getLogger("accelopt.agents")

#: Start of a fallback rule's text (the summarizer was unavailable).
FALLBACK_MARK = "[fallback rule: the summarizer was unavailable]"
#: Planner temperature used when several plans are asked for and the setting is 0.
MIN_PLAN_TEMPERATURE = 0.7
#: Longest error text passed to the fixer (the tail is kept: tracebacks end with the cause).
MAX_ERROR_CHARS = 4000

_ANGLES = [
    "memory traffic (fusion, fewer passes, wider loads)",
    "parallelism and launch configuration (grid, block sizes, num_warps, num_stages)",
    "the algorithm (one-pass / online formulations, fewer operations)",
    "data reuse and tiling (keeping tiles on chip, loop order)",
    "instruction-level work (hoisting invariants, removing masks and conversions)",
]


def format_profile(result: EvalResult, baseline: EvalResult | None = None) -> str:
    """The planner's view of one evaluation: latency (ms, median with p20/p80), timing mode,
    device, % of peak and bound, achieved GB/s and TFLOP/s, and the speedup over the baseline
    (baseline latency / this latency). Missing numbers are left out."""
    lines: list[str] = []
    if not result.ok:
        lines.append(f"status: {result.status} ({result.message or 'no message'})")
    if result.latency_ms is not None:
        spread = ""
        if result.p20_ms is not None and result.p80_ms is not None:
            spread = f" (p20 {result.p20_ms:.4g} ms, p80 {result.p80_ms:.4g} ms)"
        lines.append(f"latency: {result.latency_ms:.4g} ms median{spread}")
    where = f" on {result.device}" if result.device else ""
    lines.append(f"timing: {result.timing}{where}")
    if result.timing == "interpreter":
        lines.append(
            "note: measured with the Triton interpreter on a CPU; the latency says nothing "
            "about GPU speed, so reason from the code and the byte/flop counts"
        )
    if result.pct_of_peak is not None:
        bound = f", {result.bound}-bound" if result.bound else ""
        lines.append(f"% of peak: {result.pct_of_peak:.1f}%{bound}")
    elif result.bound:
        lines.append(f"bound: {result.bound}")
    achieved = []
    if result.gbps is not None:
        achieved.append(f"{result.gbps:.4g} GB/s")
    if result.tflops is not None:
        achieved.append(f"{result.tflops:.4g} TFLOP/s")
    if achieved:
        lines.append("achieved: " + ", ".join(achieved))
    if (
        baseline is not None
        and baseline.latency_ms
        and result.latency_ms
        and baseline is not result
    ):
        speedup = baseline.latency_ms / result.latency_ms
        lines.append(
            f"baseline latency: {baseline.latency_ms:.4g} ms; speedup so far {speedup:.2f}x"
        )
    return "\n".join(lines)


def format_experiences(experiences: list[Any], *, positive: bool) -> str:
    """Memory items for the planner, one per line: ``- [1.8x, softmax on H100] title: rule``.

    Items are duck-typed (``accelopt_core.memory.Experience``: ``title``, ``rule``,
    ``speedup``, ``kernel_name``, ``device``; missing attributes are skipped)."""
    if not experiences:
        return "(none yet)" if positive else "(none recorded)"
    lines = []
    for exp in experiences:
        title = str(getattr(exp, "title", "") or "untitled")
        rule = " ".join(str(getattr(exp, "rule", "") or "").split())
        tags = []
        speedup = getattr(exp, "speedup", None)
        if isinstance(speedup, int | float):
            tags.append(f"{speedup:.2f}x")
        kernel = getattr(exp, "kernel_name", None)
        device = getattr(exp, "device", None)
        if kernel and device:
            tags.append(f"{kernel} on {device}")
        elif kernel or device:
            tags.append(str(kernel or device))
        tag = f"[{', '.join(tags)}] " if tags else ""
        lines.append(f"- {tag}{title}: {rule}" if rule and rule != title else f"- {tag}{title}")
    return "\n".join(lines)


def error_excerpt(source: str, line: int | None, context: int = 3) -> str:
    """Numbered source lines around ``line`` (1-based), the failing one marked ``>>``; empty
    when the line is unknown or out of range."""
    lines = source.splitlines()
    if not line or line < 1 or line > len(lines):
        return ""
    lo, hi = max(1, line - context), min(len(lines), line + context)
    width = len(str(hi))
    out = [f"# Failing line {line}:"]
    for n in range(lo, hi + 1):
        mark = ">>" if n == line else "  "
        out.append(f"{mark} {n:>{width}} | {lines[n - 1]}")
    return "\n".join(out) + "\n"


def _norm_title(title: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", title.lower()).split())


def _backend(ctx: ProposalContext) -> str:
    backend = getattr(ctx.original, "backend", None)
    return backend if backend in ("triton", "nki") else "triton"


class AgentProposer:
    """The LLM proposer (name ``"llm"``) implementing :class:`accelopt_core.proposers.Proposer`.

    Args:
        settings: the full settings; ``settings.llm`` configures the endpoint and
            ``settings.search.max_tokens`` the token budget of a client made here.
        client: an :class:`LLMClient` to share (its usage then includes other users' calls);
            None makes one.
    """

    name = "llm"

    def __init__(self, settings: Settings, client: LLMClient | None = None) -> None:
        self.settings = settings
        self.client = client or LLMClient(settings.llm, max_tokens=settings.search.max_tokens)

    # -- helpers -----------------------------------------------------------------------------
    def _common(self, ctx: ProposalContext) -> dict[str, str]:
        backend = _backend(ctx)
        return {
            "backend": "NKI" if backend == "nki" else "Triton",
            "api_note": api_note(backend),
            "kernel_name": ctx.kernel_name,
            "entry": ctx.entry,
        }

    async def _call(
        self, role: str, values: dict[str, str], temperature: float | None = None
    ) -> Completion:
        return await self.client.complete(role, render(role, values), temperature=temperature)

    def _sample(self, ctx: ProposalContext, done: Completion, current: str) -> Sample:
        sample = parse_code_reply(done.text, current, original=ctx.original, entry=ctx.entry)
        sample.usage = done.usage
        if sample.source is None and done.finish_reason == "length":
            sample.error = f"{sample.error} (the reply was cut off at the output token limit)"
        return sample

    # -- Proposer ----------------------------------------------------------------------------
    async def plan(self, ctx: ProposalContext, n: int) -> list[Plan]:
        """Up to ``n`` plans with distinct titles from ``n`` concurrent planner calls; a call
        that fails (LLMError, empty reply) contributes nothing."""
        if n <= 0:
            return []
        temperature = self.settings.llm.temperature
        if n > 1 and temperature <= 0:
            temperature = MIN_PLAN_TEMPERATURE
        values = self._common(ctx) | {
            "glossary": load_prompt("profile_glossary").strip(),
            "source": ctx.parent_source.rstrip("\n"),
            "profile": format_profile(ctx.parent_result, ctx.baseline_result),
            "positives": format_experiences(list(ctx.positives), positive=True),
            "negatives": format_experiences(list(ctx.negatives), positive=False),
        }

        async def one(i: int) -> Plan | None:
            hint = ""
            if n > 1:
                hint = (
                    f"This is proposal {i + 1} of {n} drafted in parallel; to make them differ, "
                    f"look first at {_ANGLES[i % len(_ANGLES)]}.\n"
                )
            try:
                done = await self._call(
                    "planner", values | {"proposal_hint": hint}, temperature=temperature
                )
                plan = parse_plan_reply(done.text)
            except LLMError as exc:
                log.warning("planner call failed: %s", exc)
                return None
            except ValueError as exc:
                log.warning("planner reply unusable: %s", exc)
                return None
            except Exception:
                log.exception("planner call failed unexpectedly")
                return None
            plan.usage = done.usage
            return plan

        plans = await asyncio.gather(*(one(i) for i in range(n)))
        seen: set[str] = set()
        out: list[Plan] = []
        for plan in plans:
            if plan is None:
                continue
            key = _norm_title(plan.title)
            if key in seen:
                continue
            seen.add(key)
            out.append(plan)
        return out

    async def implement(self, ctx: ProposalContext, plan: Plan, k: int) -> list[Sample]:
        """``k`` concurrent executor calls implementing ``plan`` on ``ctx.parent_source``; one
        Sample per call, failed ones with ``source=None`` and the reason in ``error``."""
        if k <= 0:
            return []
        values = self._common(ctx) | {
            "plan": plan.text,
            "source": ctx.parent_source.rstrip("\n"),
        }

        samples = (self._code_call("executor", values, ctx, ctx.parent_source) for _ in range(k))
        return list(await asyncio.gather(*samples))

    async def fix(
        self, ctx: ProposalContext, plan: Plan, source: str, result: EvalResult
    ) -> Sample | None:
        """One fixer call for ``source`` that failed with ``result`` (status, message, line);
        edit blocks in the reply apply to ``source``."""
        message = result.message or "(no message)"
        if len(message) > MAX_ERROR_CHARS:
            message = "...\n" + message[-MAX_ERROR_CHARS:]
        where = f"line: {result.line}\n" if result.line else ""
        values = self._common(ctx) | {
            "plan": plan.text,
            "source": source.rstrip("\n"),
            "status": result.status,
            "error": f"{where}message:\n{message}",
            "excerpt": error_excerpt(source, result.line),
        }
        return await self._code_call("fixer", values, ctx, source)

    async def _code_call(
        self, role: str, values: dict[str, str], ctx: ProposalContext, current_source: str
    ) -> Sample:
        """One executor or fixer call whose reply edits ``current_source``; an unreachable LLM or
        any other failure becomes a Sample with ``source=None`` and the reason."""
        try:
            done = await self._call(role, values)
        except LLMError as exc:
            return Sample(None, error=f"LLM unavailable: {exc}")
        except Exception as exc:
            log.exception("%s call failed unexpectedly", role)
            return Sample(None, error=f"{role} failed: {type(exc).__name__}: {exc}")
        return self._sample(ctx, done, current_source)

    async def summarize(
        self, ctx: ProposalContext, plan: Plan, slow_source: str, fast_source: str, speedup: float
    ) -> Rule:
        """A reusable rule from the slow->fast pair (``speedup`` = slow / fast latency; a
        negative experience when <= 1). Falls back to a rule made from the plan title, its text
        starting with :data:`FALLBACK_MARK`, when the call or its reply fails."""
        device = ctx.parent_result.device or ctx.baseline_result.device or "an unknown device"
        verdict = "faster" if speedup > 1 else "no gain: a negative example"
        values = self._common(ctx) | {
            "device": device,
            "speedup": f"{speedup:.3g}",
            "verdict": verdict,
            "plan": plan.text,
            "slow_source": slow_source.rstrip("\n"),
            "fast_source": fast_source.rstrip("\n"),
        }
        try:
            done = await self._call("summarizer", values)
            rule = parse_rule_reply(done.text)
        except (LLMError, ValueError) as exc:
            why = str(exc)
        except Exception as exc:
            log.exception("summarizer call failed unexpectedly")
            why = f"{type(exc).__name__}: {exc}"
        else:
            rule.usage = done.usage
            return rule
        plan_text = " ".join(plan.text.split())[:500]
        return Rule(
            title=plan.title,
            rule=f"{FALLBACK_MARK} ({why}) Plan '{plan.title}' measured {speedup:.2f}x on "
            f"`{ctx.kernel_name}`. Plan: {plan_text}",
        )

    def usage(self) -> dict[str, Usage]:
        """Tokens and cost so far per role (from the client)."""
        return self.client.usage_by_role()

    async def warm(self) -> None:
        """Prepare the LLM clients (no request is sent); see :meth:`LLMClient.warm`."""
        await self.client.warm()

    async def close(self) -> None:
        """Close the client's HTTP connections."""
        await self.client.close()
