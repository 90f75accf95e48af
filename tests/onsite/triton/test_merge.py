"""How the compile stage's failure meets the evaluation's verdict (issue 21; issue 31: the same
verdict with or without the GPU). Plain dicts: :func:`stage.merge` is data in, data out."""

from __future__ import annotations

from accelopt_core.onsite.triton import stage

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


def test_off_the_gpu_an_error_of_the_candidate_keeps_its_own_verdict() -> None:
    # under the interpreter the candidate's own runtime error is a different fault than a
    # launch the GPU would refuse (the stage did not see it fail the same way)
    merged = stage.merge(dict(LAUNCH_ERROR), FAILURE, {"interpreter": True})
    assert merged["status"] == "runtime_error"
    assert merged["message"] == LAUNCH_ERROR["message"]


def test_an_incorrect_result_is_never_replaced() -> None:
    wrong = {"status": "incorrect", "message": "seed 1: max abs error 3.2"}
    assert stage.merge(dict(wrong), FAILURE, {"interpreter": False})["message"] == wrong["message"]
