"""Proposers of plans and samples: the Proposer protocol and its data (this package's root),
the offline proposer (:mod:`.offline`), the LLM client (:mod:`.llm`) and the LLM agents
(:mod:`.agents`: planner, executor, summarizer, fixer; replies parsed in :mod:`.parsing`,
prompts in ``prompts/``). Only the protocol is imported here, so the openai client loads only
when agents are used."""

from accelopt_core.proposers.base import Plan, ProposalContext, Proposer, Rule, Sample, Usage

__all__ = ["Plan", "ProposalContext", "Proposer", "Rule", "Sample", "Usage"]
