"""The search report (accelopt_core.search.report): its JSON round trip, the token table, the
tally's warnings, and saving into the results store."""

from __future__ import annotations

from pathlib import Path

from accelopt_core.memory import ResultsStore
from accelopt_core.proposers import Usage
from accelopt_core.search import SearchReport
from accelopt_core.search.report import Tally, token_table
from tests.search.builders import cand


def report(**changes: object) -> SearchReport:
    base = cand("base", 10.0, parent=None)
    best = cand("best", 5.0)
    best.rank, best.speedup = 1, 2.0
    fields = dict(
        path="/work/k.py",
        kernel_name="add_kernel",
        entry="add",
        baseline=base,
        candidates=[best],
        original_source=base.source,
        target="local",
        timing="interpreter",
        proposer="offline",
        failures={"incorrect": 2},
        tokens={"total": Usage(prompt_tokens=3).to_dict()},
        warnings=["optimization memory not readable: disk"],
    )
    fields.update(changes)
    return SearchReport(**fields)  # type: ignore[arg-type]


def test_json_round_trip_and_best() -> None:
    original = report()
    data = original.to_dict()
    assert data["kernel"] == "add_kernel" and data["candidates"][0]["diff"].startswith("---")
    again = SearchReport.from_dict(data)
    assert again == original and again.best is again.candidates[0]
    assert report(candidates=[]).best is None


def test_token_table_totals_every_role() -> None:
    usage = {
        "planner": Usage(prompt_tokens=10, completion_tokens=5, calls=1, cost_usd=0.25),
        "executor": Usage(prompt_tokens=20, completion_tokens=15, calls=2, cost_usd=0.5),
    }
    tokens, cost = token_table(usage)
    assert tokens["total"] == {
        "prompt_tokens": 30,
        "completion_tokens": 20,
        "total_tokens": 50,
        "calls": 3,
        "cost_usd": 0.75,
    }
    assert tokens["planner"]["total_tokens"] == 15 and cost == 0.75
    assert token_table({}) == ({"total": Usage().to_dict()}, 0.0)


def test_tally_counts_failures_and_keeps_each_warning_once() -> None:
    tally = Tally()
    for status in ("incorrect", "no_code", "incorrect"):
        tally.count_failure(status)
    tally.warn("memory not readable")
    tally.warn("memory not readable")
    assert tally.failures == {"incorrect": 2, "no_code": 1}
    assert tally.warnings == ["memory not readable"]


async def test_save_stores_the_report_or_warns(tmp_path: Path) -> None:
    results = ResultsStore(tmp_path / "results")
    saved = report()
    await saved.save(results)
    assert results.load(saved.path, saved.kernel_name, saved.original_source) == saved.to_dict()
    assert saved.warnings == ["optimization memory not readable: disk"]

    unsavable = report(cost_usd=float("nan"))  # the store keeps strict JSON only
    await unsavable.save(results)
    assert unsavable.warnings[-1].startswith("could not save the search results:")
