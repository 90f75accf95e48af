"""What the beam search asks of whoever proposes rewrites: the :class:`Proposer` protocol and
its data (:class:`Plan`, :class:`Sample`, :class:`Rule`, :class:`Usage`, :class:`ProposalContext`),
and the agent roles.

Two implementations: :class:`accelopt_core.proposers.offline.OfflineProposer` (no LLM: rewrites
launch parameters such as ``BLOCK_SIZE``, ``num_warps``, ``num_stages``) and
:class:`accelopt_core.proposers.agents.AgentProposer` (planner / executor / summarizer / fixer
LLM agents, as in AccelOpt, arXiv 2511.15915).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from accelopt_core.onsite.protocol import EvalResult

if TYPE_CHECKING:
    from accelopt_core.kernelfile import KernelFile

#: The LLM agent roles: each has a prompt file, an optional endpoint override and its own usage.
ROLES: tuple[str, ...] = ("planner", "executor", "summarizer", "fixer")
#: ``EvalResult.rule`` of the stand-in failure the search hands :meth:`Proposer.fix` for a
#: reply that held no usable code (its message quotes the parse error; issue 30).
UNUSABLE_REPLY = "unusable reply"


@dataclass
class Usage:
    """Token usage of one or more LLM calls, and their cost in USD (0 without a price table)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        """Add ``other``'s tokens, calls and cost to this one (in place)."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls
        self.cost_usd += other.cost_usd

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the tokens, their total, the calls and the cost (USD, 6 decimals)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "calls": self.calls,
            "cost_usd": round(self.cost_usd, 6),
        }


@dataclass
class Plan:
    """One optimization plan for a parent candidate (planner output).

    ``title`` is short (shown in code actions: ``single-pass online softmax``); ``text`` is the
    full plan the executor implements. ``data`` carries proposer-private details (the offline
    proposer stores the parameter it changes there).
    """

    title: str
    text: str
    usage: Usage = field(default_factory=Usage)
    data: dict[str, Any] = field(default_factory=dict)
    #: the transcript call that proposed it (:attr:`CallRecord.n`), None without an LLM.
    call: int | None = None


@dataclass
class Sample:
    """One implementation of a plan (executor or fixer output).

    ``source`` is the complete candidate module, or None when the reply held no usable code;
    then ``error`` says why (no code block, SEARCH/REPLACE block that does not apply, ...).
    ``tree`` is ``source`` parsed, when the proposer parsed it (the LLM agents do): the search
    reads it for the candidate's id and the evaluator for the static gate instead of parsing
    the source again (issue 20). Nobody may mutate it; None means "parse it yourself".
    ``stage`` says where a sample without source failed: ``parse`` (the reply held nothing
    usable: the search gives the fixer a round quoting ``error``) or ``llm`` (the call itself
    failed). ``call`` is the transcript call that produced it (:attr:`CallRecord.n`).
    ``notes``: what the parser changed in the reply's code to read it (Unicode spaces,
    zero-width characters, typographic quotes, line ends: issue 53), one line each.
    """

    source: str | None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    tree: ast.Module | None = field(default=None, repr=False, compare=False)
    stage: str = "parse"
    call: int | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class CallRecord:
    """One agent call of a search, as the run's transcript keeps it (one JSON line each).

    Attributes:
        n: 1-based number of the call in its search (plans, samples and failed candidates
            refer to it).
        role: ``planner``, ``executor``, ``fixer`` or ``summarizer``.
        model: the model that answered (as the endpoint reported it), else the one asked for.
        prompt: the chat messages sent (``[{"role", "content"}]``); ``[]`` when prompts are
            not stored (``llm.storePrompts`` false).
        reply: the assistant message; None when the call failed or replies are not stored.
        finish_reason: ``stop``, ``length`` (cut off at the output limit), ... or None.
        prompt_tokens / completion_tokens / cost_usd: what the endpoint billed for this call
            (its ``usage``; 0 for a call that failed: nothing was billed), cost in USD from the
            price table.
        latency_s: seconds from the request to its answer, the client's retries included.
        started_at: Unix time (s) the call was made.
        verdict: ``plan``, ``candidate``, ``rule`` (the reply was used), ``unusable`` (the
            reply held nothing usable) or ``failed`` (no reply: the call failed).
        detail: the plan's or rule's title, the parse error, or the call's error.
        trimmed: what was left out of the prompt to fit the model's context (``experiences``,
            ``glossary``), in the order it was left out.
        status: HTTP status of a failed call, else None.
        notes: what was done to the reply to read it (a reply cut at the output limit and
            continued; characters of its code normalized: :attr:`Sample.notes`), one line each.
    """

    n: int
    role: str
    model: str
    prompt: list[dict[str, str]]
    reply: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    started_at: float
    verdict: str
    detail: str | None = None
    trimmed: list[str] = field(default_factory=list)
    status: int | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (every attribute; the cost rounded to 6 decimals)."""
        data = dict(self.__dict__)
        data["cost_usd"] = round(self.cost_usd, 6)
        data["latency_s"] = round(self.latency_s, 3)
        return data


@dataclass
class Rule:
    """A slow->fast rewrite distilled into a reusable rule (summarizer output)."""

    title: str
    rule: str
    usage: Usage = field(default_factory=Usage)
    call: int | None = None


@dataclass
class ProposalContext:
    """Everything an agent may look at when proposing for one parent candidate.

    Attributes:
        original: the user's file as parsed (its harness is authoritative).
        kernel_name: the kernel being optimized; ``entry`` its launcher.
        parent_source: the parent candidate's full module source.
        parent_result: the parent's evaluation (latency, % of peak, ...).
        baseline_result: the original file's evaluation.
        positives / negatives: experiences retrieved from the optimization memory
            (:class:`accelopt_core.memory.Experience`).
        iteration: 1-based iteration of the beam search.
    """

    original: KernelFile
    kernel_name: str
    entry: str
    parent_source: str
    parent_result: EvalResult
    baseline_result: EvalResult
    positives: list[Any] = field(default_factory=list)
    negatives: list[Any] = field(default_factory=list)
    iteration: int = 1


@runtime_checkable
class Proposer(Protocol):
    """Proposes plans and implements them. Methods never raise for a bad LLM reply or an
    unreachable endpoint: they return fewer plans, or Samples with ``source=None``; they raise
    only on cancellation."""

    name: str

    async def plan(self, ctx: ProposalContext, n: int) -> list[Plan]:
        """Up to ``n`` distinct plans for the parent in ``ctx`` (N plans per candidate)."""
        ...

    async def implement(self, ctx: ProposalContext, plan: Plan, k: int) -> list[Sample]:
        """``k`` implementations of ``plan`` applied to ``ctx.parent_source`` (K samples)."""
        ...

    async def fix(
        self, ctx: ProposalContext, plan: Plan, source: str, result: EvalResult
    ) -> Sample | None:
        """One repair attempt for a candidate that failed to compile or was incorrect;
        None when this proposer does not repair."""
        ...

    async def summarize(
        self, ctx: ProposalContext, plan: Plan, slow_source: str, fast_source: str, speedup: float
    ) -> Rule:
        """Distill a slow->fast pair into a reusable rule (negative when speedup <= 1)."""
        ...

    def usage(self) -> dict[str, Usage]:
        """Tokens and cost so far, per role (``planner``, ``executor``, ...)."""
        ...
