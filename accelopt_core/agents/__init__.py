"""The LLM agents of the beam search: planner, executor, summarizer and fixer (AccelOpt,
arXiv 2511.15915), their prompt files, and the parsing of their replies."""

from accelopt_core.agents.parsing import (
    NO_CODE,
    NO_OP,
    apply_edits,
    parse_code_reply,
    parse_plan_reply,
    parse_rule_reply,
)
from accelopt_core.agents.proposer import (
    FALLBACK_MARK,
    AgentProposer,
    error_excerpt,
    format_experiences,
    format_profile,
)

__all__ = [
    "FALLBACK_MARK",
    "NO_CODE",
    "NO_OP",
    "AgentProposer",
    "apply_edits",
    "error_excerpt",
    "format_experiences",
    "format_profile",
    "parse_code_reply",
    "parse_plan_reply",
    "parse_rule_reply",
]
