"""The pipelined iterations (accelopt_core.search.iterations) in a whole BeamSearch with the real
evaluator (worker subprocesses, Triton interpreter on CPU, one evaluation at a time) and the
offline proposer: a member certain to stay in the beam starts its next iteration while the
iteration's last sample is still being evaluated. Order of events only, no clock."""

from __future__ import annotations

import pytest

from accelopt_core.evaluation import Evaluator
from accelopt_core.kernelfile import KernelFile, parse_kernel_file
from accelopt_core.proposers import Plan, ProposalContext, Sample
from accelopt_core.proposers.offline import OfflineProposer
from accelopt_core.search import BeamSearch, CandidateEvaluated, IterationStarted, SearchEvent
from accelopt_core.settings import SearchSettings
from tests.search.conftest import candidate_source

LAUNCH = "    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)"


def slow_add() -> KernelFile:
    """The add fixture launching 50 programs of 4 elements (grid and block from one variable),
    so that each rewrite the offline proposer makes of it (a larger block) is clearly faster
    under the interpreter."""
    source = candidate_source("add")
    assert LAUNCH in source
    launch = "    block = 4\n    add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)"
    return parse_kernel_file(source.replace(LAUNCH, launch), "add.py")


class RecordingProposer(OfflineProposer):
    """The offline proposer, writing each planner and executor call into ``log``."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        super().__init__()
        self.log = log

    async def plan(self, ctx: ProposalContext, n: int) -> list[Plan]:
        self.log.append(("plan", ctx.iteration))
        return await super().plan(ctx, n)

    async def implement(self, ctx: ProposalContext, plan: Plan, k: int) -> list[Sample]:
        samples = await super().implement(ctx, plan, k)
        self.log.append(("samples", len(samples)))
        return samples


@pytest.mark.slow  # a real two-iteration search
async def test_next_iteration_plans_while_the_last_sample_is_evaluated(
    one_slot_evaluator: Evaluator,
) -> None:
    log: list[tuple[str, int]] = []
    settings = SearchSettings(
        iterations=2,
        beam_width=2,
        plans_per_candidate=2,
        samples_per_plan=1,
        fixer_attempts=0,
        retime_rounds=1,  # one A/B round per entrant: the pipelining is under test here
    )
    search = BeamSearch(
        slow_add(), "add_kernel", settings, one_slot_evaluator, RecordingProposer(log)
    )

    def record(event: SearchEvent) -> None:
        if isinstance(event, CandidateEvaluated) and event.candidate.iteration > 0:
            log.append(("evaluated", event.candidate.iteration))
        elif isinstance(event, IterationStarted):
            log.append(("iteration", event.iteration))

    search.subscribe(record)
    report = await search.run()

    assert report.stopped_reason == "completed" and report.iterations_run == 2
    first = log[: log.index(("iteration", 2))]
    assert first.count(("samples", 1)) == 2  # two plans of one sample each in iteration 1
    last_of_first = max(i for i, entry in enumerate(log) if entry == ("evaluated", 1))
    # One slot: the first rewrite's verdict (faster than the baseline) leaves one sample pending,
    # which cannot push that rewrite out of a beam of 2, so it plans iteration 2 while the other
    # sample of iteration 1 is still being evaluated.
    assert log.index(("iteration", 2)) < log.index(("plan", 2)) < last_of_first
    assert len(report.candidates) >= 2  # both rewrites beat the baseline
