"""Issue 30 in a whole BeamSearch: every failed sample and candidate leaves a record (stage,
reason, line) in the report and an event; a reply without usable code gets a fixer round that
quotes why; the run's folder keeps the report, the plans and every agent call, within its
bounds; an API key no call can use stops the search with one reason.

The LLM agents are real and talk to the scripted LLM TEST DOUBLE (tests/llm_double.py) through
the real openai client; evaluation is scripted (tests/search/scripted.py): the rules under test
are the search's, not the judge's."""

from __future__ import annotations

import json
from pathlib import Path

from accelopt_core.kernelfile import KernelFile
from accelopt_core.memory import OptimizationMemory, RunStore
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers.agents import AgentProposer
from accelopt_core.search import BeamSearch, CandidateFailed, SearchEvent, SearchReport
from accelopt_core.settings import Settings
from tests.llm_double import LLMDouble, RecordedRequest
from tests.llm_double import llm_double as llm_double  # noqa: F401  (fixture)
from tests.search.scripted import ScriptedEvaluator, timed

ADD_LAUNCH = "add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)"


def rewrite(add_file: KernelFile, block: int) -> str:
    """The add fixture launched with ``block``-wide programs, as a fenced reply."""
    launch = f"add_kernel[(triton.cdiv(n, {block}),)](x, y, out, n, BLOCK={block})"
    return "```python\n" + add_file.source.replace(ADD_LAUNCH, launch) + "```\n"


def results(add_file: KernelFile):
    """The scripted verdicts: the baseline 2 ms, BLOCK=1024 1 ms, BLOCK=2048 a compile error at
    line 21, BLOCK=4096 incorrect."""

    def script(source: str, n: int) -> EvalResult:
        if "BLOCK=2048" in source:
            return EvalResult.failure("compile_error", "Triton compilation error: boom", line=21)
        if "BLOCK=4096" in source:
            return EvalResult.failure("incorrect", "max abs error 0.5 on seed 1")
        return timed(1.0) if "BLOCK=1024" in source else timed(2.0)

    return script


def search(
    add_file: KernelFile,
    double: LLMDouble,
    *,
    k: int = 3,
    runs: RunStore | None = None,
    memory: OptimizationMemory | None = None,
    **llm,
) -> BeamSearch:
    settings = Settings.model_validate(
        {
            "llm": double.llm_settings(maxRetries=0, **llm),
            "search": {
                "iterations": 1,
                "beamWidth": 1,
                "plansPerCandidate": 1,
                "samplesPerPlan": k,
                "fixerAttempts": 1,
                "retimeRounds": 1,
            },
        }
    )
    return BeamSearch(
        add_file,
        "add_kernel",
        settings.search,
        ScriptedEvaluator(results(add_file)),
        AgentProposer(settings.llm),
        runs=runs,
        memory=memory,
    )


def script_llm(double: LLMDouble, add_file: KernelFile) -> None:
    """Planner: one plan; executor: prose, a compile error, a good rewrite (in arrival order);
    fixer: for the reply without code an incorrect rewrite, for the compile error prose."""
    double.queue(
        "Widen the block, I think.", rewrite(add_file, 2048), rewrite(add_file, 1024),
        role="executor",
    )  # fmt: skip

    def answer(req: RecordedRequest) -> str:
        if req.role == "planner":
            return "Title: wider blocks\nUse BLOCK=1024."
        if req.role == "fixer" and "held no usable code" in req.user:
            return rewrite(add_file, 4096)
        if req.role == "summarizer":
            return "Title: wide blocks\nRule: use 1024."
        return "Sorry, I cannot fix that."

    double.script = answer


async def test_every_failure_is_recorded_with_its_stage_reason_and_line(
    add_file: KernelFile, llm_double: LLMDouble
) -> None:
    script_llm(llm_double, add_file)
    beam = search(add_file, llm_double)
    failed_events: list[SearchEvent] = []
    beam.subscribe(lambda e: failed_events.append(e) if isinstance(e, CandidateFailed) else None)
    report = await beam.run()

    assert [c.plan_title for c in report.candidates] == ["wider blocks"]  # BLOCK=1024 ranked
    records = {(f.stage, f.fixed): f for f in report.failed_candidates}
    assert set(records) == {
        ("parse", False),  # the executor's prose
        ("incorrect", True),  # the fixer's answer to it
        ("compile", False),  # BLOCK=2048
        ("parse", True),  # the fixer's prose for the compile error
    }
    prose = records[("parse", False)]
    assert prose.reason == "reply held no code" and prose.candidate_id is None
    assert prose.plan == "wider blocks" and prose.call is not None and prose.iteration == 1
    compiled = records[("compile", False)]
    assert compiled.reason == "Triton compilation error: boom" and compiled.line == 21
    assert compiled.status == "compile_error" and compiled.candidate_id
    assert ">> 21 |" in compiled.excerpt
    assert records[("incorrect", True)].reason == "max abs error 0.5 on seed 1"
    assert report.failures == {"no_code": 2, "compile_error": 1, "incorrect": 1}
    assert [e.failure for e in failed_events] == report.failed_candidates
    fixer_prompts = [r.user for r in llm_double.requests_for("fixer")]
    assert len(fixer_prompts) == 2
    assert any("unusable reply: reply held no code" in p for p in fixer_prompts)
    back = SearchReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert back.failed_candidates == report.failed_candidates


async def test_the_run_folder_keeps_the_report_plans_and_every_call(
    add_file: KernelFile, llm_double: LLMDouble, tmp_path: Path
) -> None:
    runs = RunStore(tmp_path / "runs", keep=2)
    script_llm(llm_double, add_file)
    memory = OptimizationMemory(tmp_path / "memory")  # the summarizer runs after the ranking
    beam = search(add_file, llm_double, runs=runs, memory=memory)
    report = await beam.run(wait_for_memory=False)
    assert await beam.drain() == 1
    assert report.run_id
    run = runs.load(report.run_id[:15])  # a unique prefix names it
    calls = run["transcript"]
    assert len(calls) == len(llm_double.requests) == run["run"]["calls"]
    assert sorted(c["n"] for c in calls) == list(range(1, len(calls) + 1))
    verdicts = sorted(c["verdict"] for c in calls)
    assert verdicts.count("plan") == 1 and verdicts.count("candidate") == 3
    assert verdicts.count("unusable") == 2 and verdicts.count("rule") == 1
    assert all(c["prompt"] and c["reply"] is not None for c in calls)
    assert run["report"]["plans"] == [{"call": 1, "title": "wider blocks"}]
    assert len(run["report"]["failed_candidates"]) == 4
    summary = run["run"]
    assert summary["kernel"] == "add_kernel" and summary["best_speedup"] == 2.0
    assert summary["stopped_reason"] == "completed" and summary["failed"] == 4

    # two more runs (without prompts): only the newest two are kept
    later = []
    for _ in range(2):
        llm_double.queue("Title: x", role="planner")
        later.append(await search(add_file, llm_double, k=1, runs=runs, storePrompts=False).run())
    assert [r["id"] for r in runs.list()] == [later[1].run_id, later[0].run_id]
    newest = runs.load(later[1].run_id)["transcript"]
    assert newest and all(c["prompt"] == [] and c["reply"] is None for c in newest)


async def test_a_missing_key_stops_the_search_before_anything_runs(
    add_file: KernelFile, tmp_path: Path
) -> None:
    settings = Settings.model_validate(
        {"llm": {"model": "gpt-4o", "apiKeyEnv": "ACCELOPT_TEST_UNSET_KEY"}}
    )
    evaluator = ScriptedEvaluator(results(add_file))
    beam = BeamSearch(
        add_file, "add_kernel", settings.search, evaluator, AgentProposer(settings.llm)
    )
    report = await beam.run()
    assert report.stopped_reason.startswith("LLM unusable: ")
    assert "ACCELOPT_TEST_UNSET_KEY" in report.stopped_reason
    assert evaluator.calls == [] and report.failed_candidates == []


async def test_a_rejected_key_stops_the_search_after_the_first_plans(
    add_file: KernelFile, llm_double: LLMDouble
) -> None:
    llm_double.api_key = "sk-the-server-wants-another-key"
    report = await search(add_file, llm_double).run()
    assert report.stopped_reason.startswith("LLM unusable: ")
    assert "was rejected" in report.stopped_reason
    assert {r.role for r in llm_double.requests} == {"planner"}
    assert report.failed_candidates == []  # no sample was asked for
