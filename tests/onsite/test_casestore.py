"""Inputs and reference outputs made once per search (issue 50, item 4): the warm worker's store
of the reference process's answers (accelopt_core.onsite.runtime.casestore).

The store's own rules first, on a store in this process (records on its real socket pair,
real sealed segments): what is kept, what is refused, what is dropped for the budget. Then a
real warm worker: a second evaluation of the same harness asks the reference process for
nothing, a hostile candidate in between changes nothing for the next one, and neither the
candidate nor the reference process can reach a kept segment."""

from __future__ import annotations

import os
import re
import tempfile

import pytest
import torch

from accelopt_core.onsite.runtime import casestore, exchange

MIB = 2**20


def _answer(mib: float, fill: float) -> dict:
    """A reference process's answer to ``cases``: one input and one expected segment, ``mib``
    MiB in all."""
    x = torch.full((int(mib * MIB) // 8,), fill)
    return {
        "done": True,
        "grad_inputs": [],
        "inputs": [exchange.share((x,), torch=torch)],
        "expected": [exchange.share(x * 2, torch=torch)],
    }


def _offer(store: casestore.CaseStore, key: str, answer: dict, budget: int) -> str | None:
    why = store.offer(key, answer, budget)
    store.take()  # the zygote's loop: the record is waiting on the socket
    return why


def _memfds() -> int:
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += "accelopt-exchange" in os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    return count


@pytest.fixture
def store():
    s = casestore.CaseStore()
    yield s
    s.close_all()


def test_a_kept_answer_comes_back_with_its_values_and_fresh_descriptors(store):
    answer = _answer(0.25, 3.0)
    assert _offer(store, "k", answer, 16 * MIB) is None
    for seg in answer["inputs"] + answer["expected"]:
        seg.close()  # the judge closes what it was sent; the store keeps its own copies
    got = store.get("k")
    assert got is not None and got["done"] is True and got["grad_inputs"] == []
    (x,) = got["inputs"][0].value(torch)
    assert torch.equal(got["expected"][0].value(torch), x * 2) and float(x[0]) == 3.0
    assert all(s.sealed for s in got["inputs"] + got["expected"])
    got["inputs"][0].close()
    got["expected"][0].close()
    again = store.get("k")  # taking an answer does not use it up
    assert float(again["inputs"][0].value(torch)[0][0]) == 3.0
    assert store.get("other") is None


def test_the_least_recently_used_answers_go_beyond_the_budget(store):
    budget = 2 * MIB  # two answers of 1 MiB each (0.5 MiB of inputs, 0.5 of outputs)
    for key in ("a", "b"):
        assert _offer(store, key, _answer(1.0, 1.0), budget) is None
    assert store.get("a") is not None  # "a" used: "b" is now the least recently used
    store.take()
    assert _offer(store, "c", _answer(1.0, 1.0), budget) is None
    assert set(store.entries) == {"a", "c"} and store.nbytes <= budget


def test_answers_unused_for_ten_minutes_are_dropped(store):
    import time

    assert store.expire() is None  # nothing kept: the zygote's loop may sleep
    for key in ("old", "new"):
        assert _offer(store, key, _answer(0.1, 1.0), 16 * MIB) is None
    now = time.monotonic()
    store.used["old"] = now - casestore.IDLE_S - 1  # last used eleven minutes ago
    due = store.expire(now)
    assert set(store.entries) == {"new"} and 0 < due <= casestore.IDLE_S
    assert store.nbytes == sum(s.nbytes for s in store.entries["new"][1])
    assert store.get("new") is not None  # a use postpones it
    store.take()
    assert store.used["new"] >= now


def test_an_answer_larger_than_the_budget_is_not_kept_and_says_why(store):
    why = _offer(store, "big", _answer(2.0, 1.0), MIB)
    assert why is not None and "budget (1 MiB)" in why and "recomputed" in why
    assert store.entries == {}
    assert _offer(store, "none", _answer(0.01, 1.0), 0) is not None  # 0: nothing kept


def test_an_unsealed_segment_is_never_kept(store):
    with tempfile.TemporaryFile() as f:
        f.write(b"\0" * 64)
        f.flush()
        layout = {
            "size": 64,
            "spec": {"t": 0},
            "storages": [[0, 64]],
            "tensors": [{"s": 0, "dtype": "float32", "shape": [16], "stride": [1], "offset": 0}],
        }
        seg = exchange.Segment(os.dup(f.fileno()), layout, sealed=False)
    why = _offer(store, "u", {"done": True, "inputs": [seg], "expected": []}, 16 * MIB)
    assert why is not None and "not sealed" in why and store.entries == {}
    seg.close()


def test_malformed_records_are_dropped_and_their_descriptors_closed(store):
    import socket

    before = _memfds()
    seg = exchange.share(torch.ones(4), torch=torch)
    with socket.socket(fileno=os.dup(store.send_fd)) as sock:
        socket.send_fds(sock, [b"not json"], [seg.fd])
        socket.send_fds(sock, [b'{"key": "k", "budget": 99999, "answer": {"x": 1}}'], [seg.fd])
        socket.send_fds(sock, [b'{"key": "k", "touch": true}'], [])
    assert store.take() == 3
    assert store.entries == {}
    seg.close()
    assert _memfds() == before


# --- a real warm worker ---------------------------------------------------------------------

#: A candidate that says how many shared-memory segments and Unix sockets it holds during its
#: call (its input segment and its channel's socket are its own), by failing with the count.
HELD_PROBE = """
def _held():
    import os
    segs = socks = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        segs += "accelopt-exchange" in target
        socks += target.startswith("socket:")
    return f"held segments={segs} sockets={socks}"
"""


def _held(message: str) -> tuple[int, int]:
    found = re.search(r"held segments=(\d+) sockets=(\d+)", message)
    assert found, message
    return int(found.group(1)), int(found.group(2))


@pytest.mark.slow
def test_a_search_makes_each_input_and_reference_once():
    """The second evaluation of the same harness on a warm worker takes every input and
    reference from the store (the reference process makes none); a candidate that mutates its
    inputs in between is still rejected, and the one after it is judged on unchanged inputs."""
    from tests.onsite.runs import WarmRunner, make_request, src

    runner = WarmRunner()
    try:
        first = runner.run(make_request(src("add.py"), gpu=None))
        assert first.status == "ok", first.message
        made = first.metrics["reference_store"]
        assert made["reused"] == 0 and made["made"] >= 4  # 2 seeds, timing seed, work, ...
        hostile = runner.run(make_request(src("mutates.py"), gpu=None, derived_inputs=[]))
        assert hostile.status == "incorrect" and "mutated input" in hostile.message
        again = runner.run(make_request(src("ok_block128.py"), gpu=None, derived_inputs=[]))
        assert again.status == "ok", again.message
        kept = again.metrics["reference_store"]
        assert kept["made"] == 0 and kept["reused"] >= 4, kept
        off = runner.run(make_request(src("add.py"), gpu=None, reference_store_mb=0))
        assert off.status == "ok" and "reference_store" not in off.metrics
    finally:
        assert runner.close() == 0


@pytest.mark.slow
def test_neither_the_candidate_nor_the_reference_process_holds_a_kept_segment():
    """After evaluations have filled the store, a candidate's call and the reference process's
    ``reference`` see the same descriptors as with the store off: their own input segment and
    channel socket, never the store's segments or its socket."""
    from tests.onsite.runs import BASE, WarmRunner, make_request, src

    probe_candidate = BASE.replace(  # the kernel launches (the gate wants it), then it fails
        "def add(x, y):", HELD_PROBE + "\n\ndef add(x, y):\n    note = _held()"
    ).replace("    return out", "    raise RuntimeError(note)")
    probe_harness = BASE.replace(
        "def reference(x, y):",
        HELD_PROBE + "\n\ndef reference(x, y):\n    raise RuntimeError(_held())",
    )
    seen = {}
    for label, store_mb in (("off", 0), ("on", None)):
        runner = WarmRunner()
        try:
            for _ in range(2):  # fill the store (when on) with add.py's answers
                ok = runner.run(make_request(src("add.py"), gpu=None, reference_store_mb=store_mb))
                assert ok.status == "ok", ok.message
            cand = runner.run(
                make_request(
                    probe_candidate,
                    gpu=None,
                    reference_store_mb=store_mb,
                    baseline_source=probe_candidate,
                )
            )
            ref = runner.run(
                make_request(
                    src("add.py"),
                    gpu=None,
                    reference_store_mb=store_mb,
                    harness_source=probe_harness,
                )
            )
        finally:
            runner.close()
        assert cand.status == "runtime_error" and ref.status == "runtime_error"
        seen[label] = (_held(cand.message), _held(ref.message))
    assert seen["on"] == seen["off"], seen
    (cand_segs, _), (ref_segs, _) = seen["on"]
    assert cand_segs <= 1 and ref_segs <= 1


def test_the_budget_is_the_setting_or_a_quarter_of_what_memory_is_left(tmp_path, monkeypatch):
    assert casestore.budget_bytes(0) == 0 and casestore.budget_bytes(64) == 64 * MIB
    monkeypatch.setattr(casestore, "_mem_available", lambda: 8 * 2**30)
    monkeypatch.setattr(
        casestore, "_CGROUP_FILES", ((str(tmp_path / "max"), str(tmp_path / "cur")),)
    )
    assert casestore.budget_bytes(None) == 2 * 2**30  # no cgroup files: a quarter of the host's
    (tmp_path / "max").write_text("max\n")
    (tmp_path / "cur").write_text(str(2**30))
    assert casestore.budget_bytes(None) == 2 * 2**30  # a cgroup without a limit
    (tmp_path / "max").write_text(str(3 * 2**30))
    assert casestore.budget_bytes(None) == 2**29  # a container with 2 GiB left: 512 MiB


@pytest.mark.slow
def test_answers_past_the_budget_are_recomputed_with_a_note_never_a_failure():
    """A budget smaller than one case (1 MiB against 3 MiB of inputs and outputs): both
    evaluations pass, each makes its cases again and says why they were not kept."""
    from tests.onsite.runs import BASE, WarmRunner, make_request

    big = (
        BASE.replace("torch.randn(200,", "torch.randn(2**18,")
        .replace("triton.cdiv(n, 64)", "triton.cdiv(n, 65536)")
        .replace("BLOCK=64", "BLOCK=65536")
    )
    runner = WarmRunner()
    try:
        for _ in range(2):
            result = runner.run(
                make_request(big, harness_source=big, gpu=None, reference_store_mb=1)
            )
            assert result.status == "ok", result.message
            kept = result.metrics["reference_store"]
            assert kept["made"] >= 3, kept  # two seeds and the timing seed, every time
            assert "budget (1 MiB)" in kept["note"] and "recomputed" in kept["note"], kept
    finally:
        assert runner.close() == 0
