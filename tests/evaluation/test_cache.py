"""The evaluation cache: its key, what it stores, and an unusable directory."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from accelopt_core.evaluation import EvaluationCache, cache_key
from accelopt_core.kernelfile import normalize_source
from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.onsite.sandbox.policy import NOTE_PREFIX

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
BASE = (CANDIDATES / "add.py").read_text()
OK = (CANDIDATES / "ok_block128.py").read_text()


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


def test_a_cached_verdict_does_not_repeat_how_its_evaluation_was_sandboxed(tmp_path):
    cache = EvaluationCache(tmp_path / "evals")
    note = NOTE_PREFIX + "candidates ran with no network isolation (turned off)"
    cache.put("k", EvalResult(status="ok", warnings=["sizes scaled", note]))
    assert cache.get("k").warnings == ["sizes scaled"]


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
