"""Token, cost and budget accounting of the LLM client: :class:`UsageAccounting`, the base class
of :class:`~accelopt_core.proposers.llm.LLMClient` that holds its usage per role (what the
endpoint billed), prices a call from the ``accelopt.llm.prices`` table and tells when the token
budget is spent.
"""

from __future__ import annotations

from dataclasses import replace

from accelopt_core.proposers.base import Usage
from accelopt_core.settings import LLMSettings


class UsageAccounting:
    """Usage per role, cost and token budget of :class:`~accelopt_core.proposers.llm.LLMClient`
    (its base class: the client sets these attributes in its ``__init__`` and adds each answered
    call's usage to ``_usage``).

    Attributes:
        settings: the ``accelopt.llm`` settings (``prices``: USD per 1M tokens per model).
        max_tokens: optional token budget (prompt + completion, all roles).
    """

    settings: LLMSettings
    max_tokens: int | None
    _usage: dict[str, Usage]

    def usage_by_role(self) -> dict[str, Usage]:
        """Usage per role so far (copies), only roles that made calls."""
        return {role: replace(u) for role, u in self._usage.items()}

    def total(self) -> Usage:
        """Usage summed over all roles."""
        total = Usage()
        for u in self._usage.values():
            total.add(u)
        return total

    @property
    def over_budget(self) -> bool:
        """True when a token budget is set and prompt + completion tokens reached it."""
        return self.max_tokens is not None and self.total().total_tokens >= self.max_tokens

    def price_of(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """Cost in USD from ``settings.prices[model]`` (USD per 1M tokens); 0 when the model has
        no price entry."""
        price = self.settings.prices.get(model)
        if price is None:
            return 0.0
        return (
            prompt_tokens * price.input_per_mtok + completion_tokens * price.output_per_mtok
        ) / 1e6
