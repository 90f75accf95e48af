"""Evaluator, evaluation cache and LocalTarget with real worker subprocesses."""

from __future__ import annotations

import ast
import asyncio
import logging
import os
import signal
import time
from pathlib import Path

import pytest

import accelopt_core.evaluation.evaluator as evaluator_module
from accelopt_core.evaluation import EvaluationCache, Evaluator
from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.settings import Settings
from accelopt_core.targets import make_target
from accelopt_core.targets.local import LocalTarget
from tests.onsite.runs import UNCONFINED_FILES, alive

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
BASE = (CANDIDATES / "add.py").read_text()
OK = (CANDIDATES / "ok_block128.py").read_text()
HANG = (CANDIDATES / "hang.py").read_text()


def settings(warm: bool = True, **evaluation) -> Settings:
    ev = {"seeds": 2, "repMs": 5.0, "warmupMs": 1.0, "timeoutS": 90.0, "warmWorkers": warm}
    ev.update(evaluation)
    return Settings.model_validate({"evaluation": ev})


class CountingTarget(LocalTarget):
    """The real LocalTarget, counting the evaluations that reach it."""

    def __init__(self, s: Settings) -> None:
        super().__init__(s)
        self.calls = 0

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        self.calls += 1
        return await super().evaluate(request)


def test_make_target_local_and_fingerprint():
    target = make_target(settings())
    assert isinstance(target, LocalTarget)
    assert target.fingerprint.startswith("local:cpu:torch-")
    assert ":triton-" in target.fingerprint
    assert target.capacity == Settings().evaluation.cpu_slots


@pytest.mark.slow
async def test_cache_hit_costs_no_target_time(tmp_path):
    # the cache sits in front of the target: a warm or a cold worker behind it is the same
    s = settings()
    target = CountingTarget(s)
    evaluator = Evaluator(target, s, EvaluationCache(tmp_path / "evals"))
    first = await evaluator.evaluate(BASE, OK, "add", source_name="add.py")
    assert first.status == "ok", first.message
    assert not first.cached and first.eval_s > 0
    # Same candidate with a comment and other formatting: same normalized source, a hit.
    reformatted = OK.replace("def add(x, y):", "def add(x,   y):  # same code")
    second = await evaluator.evaluate(BASE, reformatted, "add", source_name="add.py")
    assert target.calls == 1
    assert second.cached and second.latency_ms == first.latency_ms
    assert evaluator.stats == {"evaluations": 1, "cache_hits": 1, "gate_rejections": 0}
    # A new evaluator on the same directory still hits (the cache is on disk).
    again = Evaluator(target, s, EvaluationCache(tmp_path / "evals"))
    assert (await again.evaluate(BASE, OK, "add", source_name="add.py")).cached
    assert target.calls == 1
    # retime bypasses the cache.
    fresh = await evaluator.retime(BASE, OK, "add", source_name="add.py")
    assert fresh.status == "ok" and not fresh.cached
    assert target.calls == 2


async def test_gate_rejection_never_reaches_the_target(tmp_path):
    s = settings()
    target = CountingTarget(s)
    evaluator = Evaluator(target, s, EvaluationCache(tmp_path / "evals"))
    result = await evaluator.evaluate(BASE, (CANDIDATES / "torch_ref.py").read_text(), "add")
    assert result.status == "rejected" and "torch.add" in result.message
    syntax = await evaluator.evaluate(BASE, BASE.replace("def add(x, y):", "def add(x, y)"), "add")
    assert syntax.status == "compile_error" and syntax.line is not None
    assert target.calls == 0 and evaluator.gate_rejections == 2


class RecordingTarget:
    """A target that records the requests it gets and answers ``ok`` (the evaluator's request
    is under test here, not an evaluation)."""

    fingerprint = "recording"
    capacity = 1

    def __init__(self) -> None:
        self.requests: list[EvalRequest] = []

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        self.requests.append(request)
        return EvalResult(status="ok", latency_ms=1.0, timing="interpreter")

    async def close(self) -> None:
        pass


async def test_a_timing_round_checks_seed_one_and_no_derived_input(tmp_path):
    s = settings(seeds=5)
    target = RecordingTarget()
    evaluator = Evaluator(target, s, EvaluationCache(tmp_path / "evals"))  # type: ignore[arg-type]
    derived = [{"kind": "values", "name": "x \u00d7 63.4 (large)", "input": 0, "op": "large"}]
    await evaluator.evaluate(BASE, OK, "add", derived_inputs=derived)
    await evaluator.time_again(BASE, OK, "add", derived_inputs=derived)
    await evaluator.time_again(BASE, OK, "add", derived_inputs=derived)  # never from the cache
    await evaluator.retime(BASE, OK, "add", derived_inputs=derived)  # a whole evaluation
    seeds = [(r.seeds, r.derived_inputs) for r in target.requests]
    whole = ([1, 2, 3, 4, 5], derived)
    assert seeds == [whole, ([1], []), ([1], []), whole]
    assert {r.timing_seed for r in target.requests} == {1000}  # timed on the same inputs


async def test_broken_cache_directory_warns_once_and_still_evaluates(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    s = settings()
    target = CountingTarget(s)
    with caplog.at_level(logging.WARNING, logger="accelopt_core.evaluation"):
        cache = EvaluationCache(blocker / "evals")
        evaluator = Evaluator(target, s, cache)
        result = await evaluator.evaluate(BASE, OK, "add", use_cache=True)
    assert not cache.enabled and cache.disabled_reason
    assert result.status == "ok", result.message
    assert target.calls == 1
    warnings = [r for r in caplog.records if "evaluation cache" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.parametrize(
    "warm", [pytest.param(False, marks=pytest.mark.slow), True]
)  # cold: a fresh Python per evaluation, each importing torch (the full suite runs it)
async def test_cancellation_kills_the_worker_within_a_second(tmp_path, monkeypatch, warm):
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("ACCELOPT_TEST_PIDFILE", str(pidfile))
    for name, value in UNCONFINED_FILES.items():  # the candidate writes its pid there
        monkeypatch.setenv(name, value)
    s = settings(warm, timeoutS=120.0)
    target = LocalTarget(s)
    evaluator = Evaluator(target, s)
    task = asyncio.create_task(
        evaluator.evaluate(BASE, HANG, "add", source_name="hang.py", baseline_source=HANG)
    )
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert pidfile.exists(), "the hanging candidate never started"
    child = int(pidfile.read_text())
    (supervisor,) = target.active_pids  # the cold worker, or the warm worker's fork
    assert alive(child) and alive(supervisor)
    zygotes = set(target.warm.pids) if warm else set()
    assert len(zygotes) == warm and supervisor not in zygotes
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    while (alive(child) or alive(supervisor)) and time.monotonic() - cancelled_at < 1.0:
        await asyncio.sleep(0.02)
    assert not alive(supervisor)
    assert not alive(child)
    assert time.monotonic() - cancelled_at < 1.0
    assert target.active_pids == set()
    # the slot is free again: a new evaluation runs (on the same warm worker)
    assert (await evaluator.evaluate(BASE, OK, "add")).status == "ok"
    if warm:
        assert target.warm.pids == zygotes and all(alive(pid) for pid in zygotes)
    await target.close()


async def test_capacity_limits_concurrent_workers(tmp_path):
    # the slot pool is in front of both paths (LocalTarget.evaluate): the warm one shows it
    s = settings(cpuSlots=1)
    target = LocalTarget(s)
    assert target.capacity == 1
    seen: list[int] = []

    async def watch():
        while True:
            seen.append(len(target.active_pids))
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    evaluator = Evaluator(target, s)
    results = await asyncio.gather(
        evaluator.evaluate(BASE, OK, "add"), evaluator.evaluate(BASE, BASE, "add")
    )
    watcher.cancel()
    assert [r.status for r in results] == ["ok", "ok"]
    assert max(seen) == 1
    await target.close()


class ScriptedTarget:
    """A target double (no worker, no hardware): answers each request with the next scripted
    result and records the requests it got."""

    name = "scripted"
    fingerprint = "scripted:cpu"
    capacity = 1

    def __init__(self, *results: EvalResult) -> None:
        self.results = list(results)
        self.requests: list[EvalRequest] = []

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        self.requests.append(request)
        return self.results.pop(0)

    async def close(self) -> None:
        pass


async def test_retime_is_evaluate_without_the_cache(tmp_path):
    target = ScriptedTarget(
        EvalResult("ok", latency_ms=2.0), EvalResult("ok", latency_ms=3.0), EvalResult("timeout")
    )
    evaluator = Evaluator(target, settings(), EvaluationCache(tmp_path / "evals"))
    first = await evaluator.evaluate(BASE, OK, "add", source_name="add.py")
    assert first.latency_ms == 2.0 and not first.cached
    assert (await evaluator.evaluate(BASE, OK, "add", source_name="add.py")).cached
    fresh = await evaluator.retime(BASE, OK, "add", source_name="add.py")
    assert fresh.latency_ms == 3.0 and not fresh.cached
    assert target.requests[0] == target.requests[1]  # one request-building path
    assert target.requests[0].source_name == "add.py" and target.requests[0].seeds == [1, 2]
    # the fresh result replaced the cached one
    assert (await evaluator.evaluate(BASE, OK, "add", source_name="add.py")).latency_ms == 3.0
    assert (await evaluator.retime(BASE, OK, "add", source_name="add.py")).status == "timeout"
    # a timeout is never cached: the earlier verdict stays
    assert (await evaluator.evaluate(BASE, OK, "add", source_name="add.py")).latency_ms == 3.0
    assert evaluator.stats == {"evaluations": 3, "cache_hits": 3, "gate_rejections": 0}
    rejected = await evaluator.retime(BASE, (CANDIDATES / "torch_ref.py").read_text(), "add")
    assert rejected.status == "rejected" and len(target.requests) == 3  # the gate still runs


@pytest.mark.slow
async def test_warm_slot_is_reused_and_a_killed_worker_is_replaced(tmp_path):
    target = LocalTarget(settings(cpuSlots=1))
    evaluator = Evaluator(target, settings(cpuSlots=1))
    first = await evaluator.evaluate(BASE, OK, "add", use_cache=False)
    (pid,) = target.warm.pids
    second = await evaluator.evaluate(BASE, BASE, "add", use_cache=False)
    assert [first.status, second.status] == ["ok", "ok"]
    assert target.warm.pids == {pid}  # the same warm worker served both
    assert second.eval_s < first.eval_s  # no python start, no import
    os.kill(pid, signal.SIGKILL)  # dies while idle: replaced at the next evaluation
    while alive(pid):
        await asyncio.sleep(0.02)
    third = await evaluator.evaluate(BASE, OK, "add", use_cache=False)
    assert third.status == "ok", third.message
    assert pid not in target.warm.pids and len(target.warm.pids) == 1
    await target.close()
    assert target.warm.pids == set()


@pytest.mark.slow
async def test_changed_stack_restarts_the_slot(tmp_path, monkeypatch):
    from accelopt_core.targets import warm

    target = LocalTarget(settings(cpuSlots=1))
    assert (await target.evaluate(_request(OK))).status == "ok"
    (pid,) = target.warm.pids
    real = warm.stack_stamp
    monkeypatch.setattr(warm, "stack_stamp", lambda python: (*real(python), "upgraded"))
    assert (await target.evaluate(_request(OK))).status == "ok"
    assert pid not in target.warm.pids and not alive(pid)
    await target.close()


def _request(candidate: str) -> EvalRequest:
    return EvalRequest(
        candidate_source=candidate, harness_source=BASE, entry="add", seeds=[1], rep_ms=5.0
    )


async def test_the_gate_reads_a_parsed_tree_and_judges_a_source_once(monkeypatch):
    """A candidate handed over parsed is not parsed again, and its verdict is kept: the A/B
    re-timing rounds of a finalist do not run the gate again (the real gate, counted)."""
    gated: list[tuple[str, bool]] = []
    real = evaluator_module.precheck

    def counted(source, entry, baseline, filename, mod, tree=None, **kw):
        gated.append((source, tree is not None))
        return real(source, entry, baseline, filename, mod, tree, **kw)

    monkeypatch.setattr(evaluator_module, "precheck", counted)
    target = ScriptedTarget(*(EvalResult("ok", latency_ms=2.0) for _ in range(4)))
    evaluator = Evaluator(target, settings(), None)
    tree = ast.parse(OK)
    assert (await evaluator.evaluate(BASE, OK, "add", tree=tree)).ok
    for _ in range(3):
        assert (await evaluator.retime(BASE, OK, "add", tree=tree)).ok
    assert gated == [(OK, True)] and len(target.requests) == 4
    bad = (CANDIDATES / "torch_ref.py").read_text()
    for _ in range(2):
        assert (await evaluator.evaluate(BASE, bad, "add")).status == "rejected"
    assert gated[1:] == [(bad, False)] and evaluator.gate_rejections == 2
    assert len(target.requests) == 4
