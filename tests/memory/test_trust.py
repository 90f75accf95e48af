"""Issue 10 in the memory: reward-hack experiences, the timing filter of retrieval, judge versions
(re-check and drop), and stores written before these fields existed.

All on real diskcache/SQLite directories under tmp_path; nothing is mocked.
"""

from __future__ import annotations

import json
from pathlib import Path

import diskcache
import pytest

from accelopt_core.memory import Experience, OptimizationMemory
from accelopt_core.memory.experience import merge, timing_label
from accelopt_core.onsite.protocol import JUDGE_VERSION
from tests.memory.experiences import SOFTMAX, SOFTMAX_QUERY, matmul_exp, softmax_exp


def hack_exp(rule: str = "timing inconsistent", **kw) -> Experience:
    kw.setdefault("plan", "Cache the output keyed by x.data_ptr() in a default argument.")
    return softmax_exp(
        title=f"reward-hack: {rule}",
        rule=f"Caught by the judge ({rule}).",
        speedup=1.0,
        positive=False,
        hack=rule,
        **kw,
    )


def test_a_hack_is_a_negative_and_never_a_positive() -> None:
    exp = hack_exp()
    assert exp.hack == "timing inconsistent" and not exp.positive
    assert exp.judge_version == JUDGE_VERSION
    with pytest.raises(ValueError, match="never positive"):
        softmax_exp(title="reward-hack: x", speedup=3.0, hack="x")
    with pytest.raises(ValueError, match="cannot be positive"):
        Experience.from_dict({**hack_exp().to_dict(), "positive": True})
    with pytest.raises(ValueError, match="'hack'"):
        Experience.from_dict({**hack_exp().to_dict(), "hack": 3})


def test_retrieval_keeps_hacks_apart(mem: OptimizationMemory) -> None:
    good = mem.add(softmax_exp())
    slower = mem.add(softmax_exp(title="did not help: BLOCK 8192", speedup=0.7))
    hacks = [mem.add(hack_exp(rule, created_at=100 + i)) for i, rule in enumerate("abcd")]
    pos, neg = mem.retrieve_for(SOFTMAX_QUERY, "triton", None, 10)
    assert [e.id for e in pos] == [good.id]
    assert [e.id for e in neg] == [slower.id]  # no hack among the negatives
    shown = mem.hacks_for(SOFTMAX_QUERY, "triton", 3)
    assert len(shown) == 3 and all(e.hack in "abcd" for e in shown)
    assert {e.id for e in shown} <= {h.id for h in hacks}
    assert mem.hacks_for(SOFTMAX_QUERY, "nki", 3) == []
    assert [e.id for e in mem.all(hack=True)] == [h.id for h in reversed(hacks)]
    assert {e.id for e in mem.all(hack=False)} == {good.id, slower.id}


def test_hacks_for_falls_back_to_recent_hacks_of_the_backend(mem: OptimizationMemory) -> None:
    """A hack learned on an unrelated kernel is still a "do not" example."""
    other = mem.add(
        matmul_exp(
            title="reward-hack: no kernel launch",
            speedup=1.0,
            positive=False,
            hack="no kernel launch",
        )
    )
    assert [e.id for e in mem.hacks_for("x = 1  # nothing in common", "triton", 3)] == [other.id]
    assert mem.hacks_for(SOFTMAX_QUERY, "triton", 0) == []


def test_host_timed_experiences_never_steer_a_hardware_search(mem: OptimizationMemory) -> None:
    gpu = mem.add(softmax_exp(title="online softmax on the GPU"))
    interp = mem.add(softmax_exp(title="num_warps 8 -> 4", timing="interpreter", device="cpu"))
    sim = mem.add(softmax_exp(title="nki tiles", timing="simulated", device="cpu"))
    unknown = mem.add(softmax_exp(title="old record", timing="unknown"))

    def ids(timing: str | None) -> set[str]:
        pos, _ = mem.retrieve_for(SOFTMAX_QUERY, "triton", None, 10, timing=timing)
        return {e.id for e in pos}

    everything = {gpu.id, interp.id, sim.id, unknown.id}
    assert ids("cuda") == ids("neuron") == ids("none") == {gpu.id, unknown.id}
    assert ids("interpreter") == ids("simulated") == ids(None) == everything
    # the negatives are filtered the same way
    slow = mem.add(softmax_exp(title="bad", speedup=0.5, timing="interpreter", device="cpu"))
    assert mem.retrieve_for(SOFTMAX_QUERY, "triton", None, 10, timing="cuda")[1] == []
    assert [e.id for e in mem.retrieve_for(SOFTMAX_QUERY, "triton", None, 10)[1]] == [slow.id]
    assert timing_label("interpreter") == "interpreter-timed"
    assert timing_label("simulated") == "simulator-timed"
    assert timing_label("cuda") == ""


def test_older_judged_and_remove_many(mem: OptimizationMemory) -> None:
    old = mem.add(softmax_exp(title="weak judge", judge_version="1"))
    new = mem.add(softmax_exp(title="current judge"))
    assert [e.id for e in mem.older_judged(JUDGE_VERSION)] == [old.id]
    assert mem.older_judged("1") == []
    newer = str(int(JUDGE_VERSION) + 1)
    assert [e.id for e in mem.older_judged(newer)] == [new.id, old.id]
    # compared as numbers, not as text: the current judge ("10" or later) is not below "9"
    assert int(JUDGE_VERSION) >= 10 and [e.id for e in mem.older_judged("9")] == [old.id]
    assert mem.remove_many([old.id, "0" * 16]) == 1
    assert [e.id for e in mem.all()] == [new.id]


def test_a_stricter_judge_decides_the_merged_speedup() -> None:
    weak = softmax_exp(speedup=4.0, judge_version="1", created_at=1000.0)
    strict = softmax_exp(speedup=1.2, judge_version="2", created_at=2000.0)
    merged = merge(weak, strict, add_seen=True)
    assert (merged.speedup, merged.judge_version, merged.seen) == (1.2, "2", 2)
    # the other order (an import of an older export): still the strict judge's numbers
    assert merge(strict, weak, add_seen=False).speedup == 1.2
    again = merge(strict, softmax_exp(speedup=1.5, created_at=3000.0), add_seen=True)
    assert again.speedup == 1.5  # same judge: the best speedup, as before


def _strip_new_fields(directory: Path) -> None:
    """Rewrite every stored experience as the memory wrote it before issue 10 (no ``hack``,
    no ``judge_version``), through diskcache itself."""
    with diskcache.Cache(str(directory)) as cache:
        for key in list(cache.iterkeys()):
            if isinstance(key, str) and key.startswith("exp:"):
                entry = cache.get(key)
                for name in ("hack", "judge_version"):
                    del entry["exp"][name]
                cache.set(key, entry)


def test_a_store_written_before_the_new_fields_loads_unchanged(tmp_path: Path) -> None:
    directory = tmp_path / "memory"
    with OptimizationMemory(directory) as m:
        a = m.add(softmax_exp(created_at=10))
        b = m.add(matmul_exp(created_at=20))
    _strip_new_fields(directory)
    with OptimizationMemory(directory) as m:
        loaded = m.all()
        assert [e.id for e in loaded] == [b.id, a.id]
        for e, orig in zip(loaded, [b, a], strict=True):
            assert (e.title, e.rule, e.speedup, e.slow_source) == (
                orig.title,
                orig.rule,
                orig.speedup,
                orig.slow_source,
            )
            assert e.hack is None and e.judge_version == "1"
        assert m.get(a.id).judge_version == "1"
        assert [e.id for e in m.retrieve_for(SOFTMAX, "triton", None, 5, timing="cuda")[0]] == [
            a.id,
            b.id,
        ]
        assert {e.id for e in m.older_judged(JUDGE_VERSION)} == {a.id, b.id}
        # observed again by the current judge: the record is upgraded
        assert m.add(softmax_exp(created_at=30)).judge_version == JUDGE_VERSION


def test_an_old_export_file_imports_unchanged(mem: OptimizationMemory, tmp_path: Path) -> None:
    line = softmax_exp().to_dict()
    del line["hack"], line["judge_version"]
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(line) + "\n")
    assert mem.import_jsonl(path) == 1
    [exp] = mem.all()
    assert exp.judge_version == "1" and exp.hack is None and exp.title == line["title"]
