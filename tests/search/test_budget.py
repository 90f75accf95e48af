"""The search's budget (accelopt_core.search.budget): tokens, wall time and the cancellation
checkpoint; and a real search stopped by each budget."""

from __future__ import annotations

import asyncio
import time

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile
from accelopt_core.proposers import Usage
from accelopt_core.proposers.agents import AgentProposer
from accelopt_core.proposers.offline import OfflineProposer
from accelopt_core.search import BeamSearch
from accelopt_core.search.budget import Budget, BudgetSpent
from accelopt_core.settings import SearchSettings, Settings
from tests.llm_double import LLMDouble, text
from tests.llm_double import llm_double as llm_double  # noqa: F401  (fixture)


def test_tokens_of_every_role_count_against_max_tokens() -> None:
    usage = {"planner": Usage(prompt_tokens=40, completion_tokens=20, calls=1)}
    budget = Budget(SearchSettings(max_tokens=100), lambda: usage)
    budget.check()  # 60 < 100
    usage["executor"] = Usage(prompt_tokens=30, completion_tokens=10, calls=1)
    with pytest.raises(BudgetSpent, match=r"^budget: tokens \(100 >= 100\)$"):
        budget.check()


def test_no_limit_a_failing_usage_and_cancellation() -> None:
    plenty = {"planner": Usage(prompt_tokens=10**9)}
    Budget(SearchSettings(), lambda: plenty).check()  # no max_tokens: never spent

    def broken() -> dict[str, Usage]:
        raise RuntimeError("usage unavailable")

    budget = Budget(SearchSettings(max_tokens=1), broken)
    assert budget.usage() == {}
    budget.check()  # no usage known: nothing spent
    budget.cancel_requested = True
    with pytest.raises(asyncio.CancelledError):
        budget.check()


async def test_wall_clock_cuts_the_block_at_max_wall_s() -> None:
    budget = Budget(SearchSettings(max_wall_s=0.2), dict)
    budget.start()
    with pytest.raises(BudgetSpent, match="^budget: wall time$"):
        async with budget.wall_clock():
            await asyncio.sleep(30)
    assert 0.15 < budget.elapsed_s() < 5

    budget.start()
    async with budget.wall_clock():  # a block that ends in time is left alone
        await asyncio.sleep(0.01)
    async with Budget(SearchSettings(), dict).wall_clock():  # no max_wall_s
        await asyncio.sleep(0.01)


@pytest.mark.slow
async def test_search_stopped_by_wall_time_before_the_baseline(
    add_file: KernelFile, evaluator: Evaluator
) -> None:
    settings = SearchSettings(max_wall_s=0.3)
    search = BeamSearch(add_file, "add_kernel", settings, evaluator, OfflineProposer())
    started = time.monotonic()
    report = await search.run()
    assert time.monotonic() - started < 10  # the worker was killed, not awaited
    assert report.stopped_reason == "budget: wall time"
    assert report.baseline.result.status == "timeout" and not report.baseline.retimed
    assert report.baseline.result.message == "budget: wall time before the baseline was timed"
    assert report.candidates == [] and report.iterations_run == 0
    assert evaluator.target.active_pids == set()


@pytest.mark.slow
async def test_search_stops_when_the_planner_spent_the_tokens(
    add_file: KernelFile, evaluator: Evaluator, llm_double: LLMDouble
) -> None:
    llm_double.queue(text("Title: a\nDo a.", prompt_tokens=50, completion_tokens=50))
    settings = Settings.model_validate(
        {"llm": llm_double.llm_settings(), "search": {"maxTokens": 100, "plansPerCandidate": 1}}
    )
    search = BeamSearch(
        add_file,
        "add_kernel",
        settings.search,
        evaluator,
        AgentProposer(settings.llm, max_tokens=settings.search.max_tokens),
    )
    report = await search.run()
    assert report.baseline.result.ok
    assert report.stopped_reason == "budget: tokens (100 >= 100)"
    assert [r.role for r in llm_double.requests] == ["planner"]  # no executor call past it
    assert report.tokens["planner"]["total_tokens"] == 100
    assert report.tokens["total"]["total_tokens"] == 100
    assert report.candidates == [] and report.evaluated == 1
