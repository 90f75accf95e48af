"""How the compile stage's failure meets the evaluation's verdict (issue 21; issue 31: the same
verdict with or without the GPU; issue 33: the judge polls for it between the candidate's
calls). Plain dicts: :func:`stage.merge` is data in, data out; the poll reads a pipe."""

from __future__ import annotations

import json
import os
import time

from accelopt_core.onsite.runtime.channel import Channel
from accelopt_core.onsite.triton import stage
from accelopt_core.onsite.triton.devices import lookup

FAILURE = {
    "failure": {
        "status": "incorrect",
        "message": "cannot launch on H100 SXM5 (sm_90): threads per block 2,048 > 1,024",
        "line": 12,
    }
}
LAUNCH_ERROR = {
    "status": "runtime_error",
    "message": "OutOfResources: out of resource: threads, Required: 2048, Hardware limit: 1024",
    "device": "NVIDIA H100 80GB HBM3",
    "versions": {"torch": "2.11.0"},
}


def test_on_a_cuda_target_the_stage_names_a_kernel_that_cannot_launch() -> None:
    merged = stage.merge(dict(LAUNCH_ERROR), FAILURE, {"interpreter": False})
    assert merged["status"] == "incorrect"
    assert merged["message"] == FAILURE["failure"]["message"]
    assert merged["line"] == 12
    assert merged["device"] == LAUNCH_ERROR["device"]  # the env fields are kept
    assert merged["versions"] == LAUNCH_ERROR["versions"]


def test_off_the_gpu_the_stage_failure_is_the_verdict_too() -> None:
    # the kernel never runs on the GPU, whatever the interpreter made of it: the same verdict
    # with or without the GPU, and one the judge may give as soon as the stage knows it
    merged = stage.merge(dict(LAUNCH_ERROR), FAILURE, {"interpreter": True})
    assert merged["status"] == "incorrect"
    assert merged["message"] == FAILURE["failure"]["message"]
    assert merged["device"] == LAUNCH_ERROR["device"]


def test_an_incorrect_result_is_replaced_by_the_stage_failure() -> None:
    wrong = {"status": "incorrect", "message": "seed 1: max abs error 3.2", "device": "cpu"}
    for ctx in ({"interpreter": False}, {"interpreter": True}):
        merged = stage.merge(dict(wrong), FAILURE, ctx)
        assert merged["message"] == FAILURE["failure"]["message"] and merged["device"] == "cpu"


def test_a_compile_error_of_its_own_stands_off_the_gpu_and_a_hack_everywhere() -> None:
    # the source does not compile even for the interpreter: its own message names the line;
    # on a CUDA target the same compile failed there, and the stage names it
    own = {"status": "compile_error", "message": "arange's range must be a power of 2"}
    assert stage.merge(dict(own), FAILURE, {"interpreter": True}) == own
    assert stage.merge(dict(own), FAILURE, {"interpreter": False})["status"] == "incorrect"
    hack = {"status": "rejected", "message": "no kernel launch", "rule": "no kernel launch"}
    for ctx in ({"interpreter": False}, {"interpreter": True}):
        assert stage.merge(dict(hack), FAILURE, ctx) == hack


def test_facts_leave_the_candidates_own_verdict_alone() -> None:
    wrong = {"status": "incorrect", "message": "seed 1: max abs error 3.2"}
    facts = stage.facts_of(lookup("H100"), "no kernel compiled")
    merged = stage.merge(dict(wrong), facts, {"interpreter": True})
    assert (merged["status"], merged["message"]) == (wrong["status"], wrong["message"])


class _Proc:
    """The stage process's end the judge holds: only its channel (a pipe here)."""

    def __init__(self) -> None:
        rfd, self.wfd = os.pipe()
        self.chan = Channel(rfd, os.open(os.devnull, os.O_WRONLY))

    def say(self, message: dict) -> None:
        os.write(self.wfd, (json.dumps(message) + "\n").encode())


def test_the_judge_polls_the_stage_for_a_failure_without_waiting() -> None:
    proc = _Proc()
    peer = stage.StagePeer(proc, lookup("H100"))
    t0 = time.monotonic()
    assert peer.failure() is None  # nothing said yet: no wait
    assert time.monotonic() - t0 < 0.5
    proc.say(FAILURE)
    got = peer.failure()
    assert got is not None and (got["status"], got["line"]) == ("incorrect", 12)
    assert got["message"] == FAILURE["failure"]["message"]
    assert peer.answer(time.monotonic() + 1.0) == {"failure": got}  # kept, not read again
    facts = stage.StagePeer(_Proc(), lookup("H100"))
    facts.proc.say({"gpu": {"kernels": []}})
    assert facts.failure() is None
    # the stage stays alive after its answer (on a GPU it waits to run Nsight Compute): the
    # wait before the timing must not wait for a second answer
    t0 = time.monotonic()
    facts.settle(time.monotonic() + 60.0)
    assert time.monotonic() - t0 < 1.0
    assert "gpu" in facts.answer(time.monotonic() + 1.0)
