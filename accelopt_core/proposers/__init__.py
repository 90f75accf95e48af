"""Proposers of plans and samples.

- :mod:`.base` (re-exported here): the Proposer protocol and its data (Plan, Sample, Rule,
  Usage, ProposalContext, CallRecord: one agent call of a transcript) and the agent ROLES.
- :mod:`.offline`: the offline proposer (launch-parameter retuning, no LLM).
- :mod:`.agents`: the LLM agents (planner, executor, summarizer, fixer) as a Proposer;
  :mod:`.llm` the OpenAI-compatible client (retries, a cut reply continued once, tokens; its
  cost and budget in :mod:`.llm_usage`); :mod:`.prompting` the prompt files (``prompts/``) and
  the values that fill them; :mod:`.parsing` the replies turned into plans, candidates and
  rules, with :mod:`.codeblocks` (code found as CommonMark defines it, bare code),
  :mod:`.code_chars` (Unicode spaces, zero-width characters and typographic quotes in code),
  :mod:`.replies` (reasoning and wrapper tags taken off, JSON answers, unified diffs) and
  :mod:`.merging` (partial code merged by top-level name).

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
