"""Search overhead: wall time of a beam search against its critical path.

The LLM is the scripted OpenAI-compatible double (tests/llm_double.py, a loopback HTTP server that
the real openai client talks to, run in its own process) answering every call after a fixed
delay; the optimization memory is real (a fresh diskcache directory: retrieval for every
parent, summaries written); evaluation is a fixed-cost target (sleeps ``--eval-s`` and reports a
latency derived from the candidate, so every rewrite is a distinct, faster candidate).
Everything else is the product's code: AgentProposer, reply parsing, harness restoration, the
Evaluator with its static gate, BeamSearch.

Critical path (issue 2's definition): T x (planner delay + executor delay + evaluation delay).
A search also needs the baseline evaluation before the first plan (the planner sees its profile)
and the re-timing of the last finalists after the last evaluation, so the script prints the ratio
against both paths. Target (issue 20): wall / full path within 1.10x at B=4, N=4, K=2, T=4
(issue 14 asked 1.15x of the critical path alone, which the required steps put out of reach).
The machine is shared and the ratio is noisy, so it runs ``--runs`` searches (one LLM double,
a fresh memory each) and its last two lines are the median ratios (critical path, then full
path); it prints the machine's load before and after, and the CPU time the search's own
process spent per search (less sensitive to the load than the wall time). A second table says where the time to the final ranking goes, step by step: the
baseline, each iteration (from the previous step's last first-evaluation to its own) with the
slowest planner and executor call beyond the double's delay, and the last finalists' A/B rounds,
each against what the full path counts for it (the proposer is the product's, timed by a
subclass; the steps come from the search's events).

    python benchmarks/search_overhead.py            # B=4 N=4 K=2 T=4, 0.5 s LLM, 0.25 s evaluation
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelopt_core.evaluation import Evaluator  # noqa: E402
from accelopt_core.kernelfile import parse_kernel_file  # noqa: E402
from accelopt_core.memory import OptimizationMemory  # noqa: E402
from accelopt_core.onsite.protocol import EvalRequest, EvalResult  # noqa: E402
from accelopt_core.proposers.agents import AgentProposer  # noqa: E402
from accelopt_core.proposers.base import Plan, ProposalContext, Sample  # noqa: E402
from accelopt_core.search import BeamSearch  # noqa: E402
from accelopt_core.search.events import CandidateEvaluated, SearchEvent  # noqa: E402
from accelopt_core.settings import load_settings  # noqa: E402
from tests.llm_double import TEST_API_KEY, LLMDouble, RecordedRequest, delay, text  # noqa: E402

multiprocessing.freeze_support()

TEMPLATE = """import torch
import triton
import triton.language as tl

STEP = {step}


@triton.jit
def add_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def add_one(x):
    out = torch.empty_like(x)
    add_one_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


def get_inputs(seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1024, generator=g).to(device),)


def reference(x):
    return x + 1.0


BENCH = {{"entry": add_one}}
"""


class FixedCostTarget:
    """A benchmark target (not a test double): every evaluation takes ``seconds`` and reports a
    latency of 10 / (1 + STEP) ms, so a later rewrite is faster. Unlimited capacity."""

    name = "fixed-cost"
    fingerprint = "fixed-cost"
    capacity = 1024

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        self.calls += 1
        await asyncio.sleep(self.seconds)
        step = int(re.search(r"^STEP = (\d+)", request.candidate_source, re.M).group(1))  # type: ignore[union-attr]
        latency = 10.0 / (1 + step)
        return EvalResult(
            status="ok",
            latency_ms=latency,
            p20_ms=latency,
            p80_ms=latency,
            timing="none",
            device="bench",
        )

    async def close(self) -> None:
        pass


@dataclass
class Phases:
    """Where one search's wall time went (seconds from the start of ``run``).

    Attributes:
        baseline: the baseline's evaluation ended (the first plan may start).
        ends: per iteration, when the last first-evaluation of its children ended.
        planner / executor: per iteration, the duration of each ``plan`` call (one parent's N
            planner calls at once) and each ``implement`` call (one plan's K executor calls at
            once, replies parsed and the harness restored), in s.
        ranking: ``run`` returned the final ranking (the last finalists' A/B rounds ended).
        cpu: CPU time of this process (s) from the start of ``run`` to the final ranking.
    """

    t0: float = 0.0
    baseline: float = 0.0
    ends: dict[int, float] = field(default_factory=dict)
    planner: dict[int, list[float]] = field(default_factory=dict)
    executor: dict[int, list[float]] = field(default_factory=dict)
    ranking: float = 0.0
    cpu: float = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def on_event(self, event: SearchEvent) -> None:
        """Subscriber of the search: first evaluations (the baseline's and the children's)."""
        if isinstance(event, CandidateEvaluated):
            it = event.candidate.iteration
            if it == 0:
                self.baseline = self.now()
            else:
                self.ends[it] = max(self.ends.get(it, 0.0), self.now())


class TimedProposer(AgentProposer):
    """The product's LLM proposer, timing its planner and executor calls into :class:`Phases`."""

    phases: Phases

    async def plan(self, ctx: ProposalContext, n: int) -> list[Plan]:
        start = time.perf_counter()
        plans = await super().plan(ctx, n)
        self.phases.planner.setdefault(ctx.iteration, []).append(time.perf_counter() - start)
        return plans

    async def implement(self, ctx: ProposalContext, plan: Plan, k: int) -> list[Sample]:
        start = time.perf_counter()
        samples = await super().implement(ctx, plan, k)
        self.phases.executor.setdefault(ctx.iteration, []).append(time.perf_counter() - start)
        return samples


def serve_double(
    llm_s: float, port_out: multiprocessing.Queue, stop: multiprocessing.Event
) -> None:
    """The scripted LLM in its own process (a real service does not share our interpreter)."""
    steps = count(1)

    def script(req: RecordedRequest):
        if req.role == "planner":
            return delay(llm_s, text(f"Title: plan {next(steps)}\nDo the thing."))
        if req.role == "executor":
            return delay(llm_s, text("```python\n" + TEMPLATE.format(step=next(steps)) + "```"))
        return delay(llm_s, text("Title: a rule\nRule: do the thing when it applies."))

    with LLMDouble(script=script) as double:
        port_out.put((double.base_url, double.llm_settings(), double.api_key_env))
        stop.wait()
        port_out.put(len(double.requests))


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-N", type=int, default=4)
    ap.add_argument("-K", type=int, default=2)
    ap.add_argument("-T", type=int, default=4)
    ap.add_argument("--llm-s", type=float, default=0.5, help="delay of every LLM reply (s)")
    ap.add_argument("--eval-s", type=float, default=0.25, help="cost of one evaluation (s)")
    ap.add_argument("--runs", type=int, default=3, help="searches to run (the median is reported)")
    ap.add_argument(
        "--retime-rounds",
        type=int,
        default=3,
        help="search.retimeRounds: A/B rounds of a beam entrant against its parent (issue 10)",
    )
    return ap.parse_args()


Run = tuple[float, float, str, Phases]


async def one_search(args: argparse.Namespace, llm_settings: dict) -> Run:
    """One search against a fresh memory; ``(s to the final ranking, s incl. memory writes,
    summary line, phases)``."""
    settings, issues = load_settings(
        {
            "llm": llm_settings,
            "search": {
                "beamWidth": args.B,
                "plansPerCandidate": args.N,
                "samplesPerPlan": args.K,
                "iterations": args.T,
                "retimeRounds": args.retime_rounds,
            },
        }
    )
    assert not issues, issues
    target = FixedCostTarget(args.eval_s)
    original = parse_kernel_file(TEMPLATE.format(step=0), "bench.py")
    memory = OptimizationMemory(tempfile.mkdtemp(prefix="accelopt-bench-memory-"))
    proposer = TimedProposer(settings.llm, max_tokens=settings.search.max_tokens)
    proposer.phases = phases = Phases()
    search = BeamSearch(
        original,
        "add_one_kernel",
        settings.search,
        Evaluator(target, settings, None),
        proposer,
        memory=memory,  # real retrieval for every parent, real writes
    )
    search.subscribe(phases.on_event)
    cpu0 = time.process_time()
    t0 = phases.t0 = time.perf_counter()
    report = await search.run(wait_for_memory=False)
    t_report = phases.ranking = time.perf_counter() - t0
    phases.cpu = time.process_time() - cpu0
    await search.drain()
    t_total = time.perf_counter() - t0
    summary = (
        f"evaluations {target.calls}, candidates {len(report.candidates)}, "
        f"{len(memory)} experiences, stopped: {report.stopped_reason}"
    )
    return t_report, t_total, summary, phases


async def main() -> None:
    args = parse_args()
    ctx = multiprocessing.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=serve_double, args=(args.llm_s, queue, stop), daemon=True)
    server.start()
    _base_url, llm_settings, key_env = queue.get(timeout=60)
    runs: list[Run] = []
    load_before = os.getloadavg()[0]
    try:
        os.environ[key_env] = TEST_API_KEY
        for _ in range(args.runs):
            runs.append(await one_search(args, llm_settings))
    finally:
        stop.set()
    llm_calls = queue.get(timeout=30)
    server.join(timeout=10)
    print(
        f"machine load (os.getloadavg, 1 min): {load_before:.2f} -> {os.getloadavg()[0]:.2f}"
        f" on {os.cpu_count()} CPU(s)"
    )
    print_table(args, runs, llm_calls)


def print_table(args: argparse.Namespace, runs: list[Run], calls: int) -> None:
    critical = args.T * (args.llm_s + args.llm_s + args.eval_s)
    # the baseline, then the last finalist's A/B rounds (a majority decides: R // 2 + 1 rounds
    # of parent + child, back to back)
    ab_evals = 2 * (args.retime_rounds // 2 + 1)
    full = critical + (1 + ab_evals) * args.eval_s
    print(f"B={args.B} N={args.N} K={args.K} T={args.T}  llm={args.llm_s}s eval={args.eval_s}s")
    print(f"critical path T x (planner + executor + evaluation) = {critical:.2f} s")
    print(
        f"  + baseline evaluation + last A/B re-timing ({ab_evals} evaluations, "
        f"{args.retime_rounds} rounds) = {full:.2f} s"
    )
    print(f"LLM calls in all {args.runs} runs: {calls}")
    print("run  to final ranking  ratio  (vs full path)  incl. memory writes  ratio  host CPU")
    for i, (t_report, t_total, summary, phases) in enumerate(runs, start=1):
        print(
            f"{i:3d}  {t_report:14.2f} s  {t_report / critical:5.3f}  ({t_report / full:5.3f})"
            f"  {t_total:17.2f} s  {t_total / critical:5.3f}  {phases.cpu:6.2f} s   {summary}"
        )
    print_phases(args, [phases for *_, phases in runs])
    median = statistics.median(t for t, *_ in runs)
    cpu = statistics.median(p.cpu for *_, p in runs)
    print(f"median wall time to the final ranking {median:.2f} s, host CPU {cpu:.2f} s per search")
    print(f"search wall / critical path at {args.llm_s:g} s LLM delay: {median / critical:.2f}")
    print(
        f"search wall / full path (baseline + iterations + last A/B) at {args.llm_s:g} s LLM "
        f"delay: {median / full:.3f} (target 1.10)"
    )


def print_phases(args: argparse.Namespace, all_phases: list[Phases]) -> None:
    """Where the wall time to the final ranking went, step by step (medians over the runs): the
    baseline, each iteration (from the previous step's last first-evaluation to its own last),
    and the last finalists' A/B rounds, against what the full path counts for each. The LLM
    columns give the slowest planner (``plan``: N calls at once) and executor (``implement``:
    K calls at once, replies parsed) call of the iteration beyond the double's delay."""
    ab_evals = 2 * (args.retime_rounds // 2 + 1)
    step_s = args.llm_s + args.llm_s + args.eval_s
    rows: list[tuple[str, list[float], float, list[str]]] = [
        ("baseline evaluation", [p.baseline for p in all_phases], args.eval_s, [])
    ]
    for it in range(1, args.T + 1):
        walls = [p.ends.get(it, p.ranking) - p.ends.get(it - 1, p.baseline) for p in all_phases]
        slow = (
            [max(p.planner.get(it, [0.0])) - args.llm_s for p in all_phases],
            [max(p.executor.get(it, [0.0])) - args.llm_s for p in all_phases],
        )
        llm = [
            f"planner {statistics.median(slow[0]):+.2f} s",
            f"executor {statistics.median(slow[1]):+.2f} s",
        ]
        rows.append((f"iteration {it}", walls, step_s, llm))
    tails = [p.ranking - p.ends.get(args.T, p.ranking) for p in all_phases]
    rows.append(("last A/B re-timing", tails, ab_evals * args.eval_s, []))
    print("where the time to the final ranking goes (medians over the runs):")
    print("step                   wall     path    over    slowest LLM call beyond its delay")
    for name, walls, path, llm in rows:
        wall = statistics.median(walls)
        print(f"{name:20s} {wall:6.2f} s {path:5.2f} s {wall - path:+6.2f} s  {', '.join(llm)}")


if __name__ == "__main__":
    asyncio.run(main())
