"""Proposers of plans and samples.

- :mod:`.base` (re-exported here): the Proposer protocol and its data (Plan, Sample, Rule,
  Usage, ProposalContext, CallRecord: one agent call of a transcript) and the agent ROLES.
- :mod:`.offline`: the offline proposer (launch-parameter retuning, no LLM).
- :mod:`.agents`: the LLM agents (planner, executor, summarizer, fixer) as a Proposer;
  :mod:`.llm` the OpenAI-compatible client (retries, tokens, cost, budget); :mod:`.prompting`
  the prompt files (``prompts/``) and the values that fill them; :mod:`.parsing` the replies
  turned into plans, candidates and rules, with :mod:`.replies` (reasoning taken off, unified
  diffs) and :mod:`.merging` (partial code merged by top-level name).

Only the protocol is imported here, so the openai client loads only when agents are used.
"""

from accelopt_core.proposers.base import (
    ROLES,
    CallRecord,
    Plan,
    ProposalContext,
    Proposer,
    Rule,
    Sample,
    Usage,
)

__all__ = ["ROLES", "CallRecord", "Plan", "ProposalContext", "Proposer", "Rule", "Sample", "Usage"]
