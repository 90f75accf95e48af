"""Tests of accelopt_core.memory.experience: ids, validation, merging."""

from __future__ import annotations

import json

import pytest

from accelopt_core.memory import Experience, experience_id
from accelopt_core.memory.experience import merge
from tests.memory.experiences import softmax_exp


def test_experience_id_is_stable_and_normalizes_title():
    a = softmax_exp()
    b = softmax_exp(title="  Single-pass   ONLINE softmax ", speedup=2.0)
    assert a.id == b.id and len(a.id) == 16
    assert a.id == experience_id("triton", a.source_fingerprint, a.title, True)
    assert softmax_exp(title="other rule").id != a.id
    assert softmax_exp(speedup=0.8).id != a.id  # negative: a different experience
    assert softmax_exp(speedup=0.8).positive is False


def test_experience_dict_round_trip_and_validation():
    exp = softmax_exp()
    assert Experience.from_dict(json.loads(json.dumps(exp.to_dict()))) == exp
    bad = exp.to_dict()
    del bad["rule"]
    with pytest.raises(ValueError, match="missing field.*rule"):
        Experience.from_dict(bad)
    with pytest.raises(ValueError, match="speedup"):
        Experience.from_dict({**exp.to_dict(), "speedup": "fast"})
    with pytest.raises(ValueError, match="positive"):
        Experience.from_dict({**exp.to_dict(), "positive": "yes"})
    with pytest.raises(ValueError, match="seen"):
        Experience.from_dict({**exp.to_dict(), "seen": 0})
    with pytest.raises(ValueError, match="speedup"):
        Experience.create(
            backend="triton",
            device="cpu",
            timing="interpreter",
            kernel_name="k",
            slow_source="",
            fast_source="",
            speedup=float("nan"),
            title="t",
            rule="r",
        )
    assert "softmax" in repr(exp) and "tl.load" not in repr(exp)


def test_merge_keeps_the_best_speedup_and_the_newest_text():
    old = softmax_exp(speedup=1.8, created_at=1000.0, rule="old rule")
    new = softmax_exp(speedup=1.3, created_at=2000.0, rule="new rule")
    observed = merge(old, new, add_seen=True)
    assert observed.id == old.id and observed.seen == 2
    assert observed.speedup == 1.8 and observed.rule == "new rule"
    assert (observed.created_at, observed.updated_at) == (1000.0, 2000.0)
    imported = merge(observed, old, add_seen=False)  # an import: the larger count, not the sum
    assert imported.seen == 2 and imported.rule == "new rule"
