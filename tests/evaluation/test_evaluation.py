"""Evaluator, evaluation cache and LocalTarget with real worker subprocesses."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest

from accelopt_core.evaluation import EvaluationCache, Evaluator, cache_key, normalize_source
from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.settings import Settings
from accelopt_core.targets import make_target
from accelopt_core.targets.local import LocalTarget

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
BASE = (CANDIDATES / "add.py").read_text()
OK = (CANDIDATES / "ok_block128.py").read_text()
HANG = (CANDIDATES / "hang.py").read_text()


def settings(**evaluation) -> Settings:
    ev = {"seeds": 2, "repMs": 5.0, "warmupMs": 1.0, "timeoutS": 90.0, **evaluation}
    return Settings.model_validate({"evaluation": ev})


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


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


def test_only_deterministic_verdicts_are_cached(tmp_path):
    cache = EvaluationCache(tmp_path / "evals")
    for status, stored in [
        ("ok", True),
        ("incorrect", True),
        ("compile_error", True),
        ("rejected", True),
        ("timeout", False),
        ("runtime_error", False),
    ]:
        assert cache.put(status, EvalResult(status=status)) is stored  # type: ignore[arg-type]
        assert (cache.get(status) is not None) is stored


def test_cache_key_covers_what_decides_the_verdict():
    req = EvalRequest(candidate_source=OK, harness_source=BASE, entry="add")
    key = cache_key(req, "local:cpu")
    assert key == cache_key(
        EvalRequest(candidate_source=OK + "\n# comment\n", harness_source=BASE, entry="add"),
        "local:cpu",
    )
    assert key != cache_key(req, "local:NVIDIA H100 80GB HBM3")
    assert key != cache_key(EvalRequest(OK, BASE + "\n", "add"), "local:cpu")
    assert key != cache_key(EvalRequest(OK, BASE, "add", seeds=[1, 2]), "local:cpu")
    assert key != cache_key(EvalRequest(OK, BASE, "add", timing="none"), "local:cpu")
    assert normalize_source("def f(:") == "def f(:"


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


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_cache_directory_disables_the_cache(tmp_path, caplog):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with caplog.at_level(logging.WARNING, logger="accelopt_core.evaluation"):
            cache = EvaluationCache(ro / "evals")
            assert cache.put("k", EvalResult(status="ok")) is False
            assert cache.get("k") is None
        assert not cache.enabled
    finally:
        ro.chmod(0o700)


async def test_cancellation_kills_the_worker_within_a_second(tmp_path, monkeypatch):
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("ACCELOPT_TEST_PIDFILE", str(pidfile))
    s = settings(timeoutS=120.0)
    target = LocalTarget(s)
    evaluator = Evaluator(target, s)
    task = asyncio.create_task(evaluator.evaluate(BASE, HANG, "add", source_name="hang.py"))
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert pidfile.exists(), "the hanging candidate never started"
    child = int(pidfile.read_text())
    (supervisor,) = target.active_pids
    assert alive(child) and alive(supervisor)
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
    # the slot is free again: a new evaluation runs
    assert (await evaluator.evaluate(BASE, OK, "add")).status == "ok"


async def test_capacity_limits_concurrent_workers(tmp_path):
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
