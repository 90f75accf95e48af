"""The warm worker (:mod:`accelopt_core.onsite.process.zygote`): one long-lived process that imported
torch and triton once and forks a child per request. A candidate that exits, hangs, eats memory
or corrupts module state is classified, and the next candidate on the same warm worker is
evaluated against a fresh stack; no warm worker or child outlives the process that owns it."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.onsite.runs import (
    BASE,
    MODES,
    UNCONFINED_FILES,
    WarmRunner,
    alive,
    make_request,
    run_worker,
    src,
)

#: A candidate that patches torch in its process: the inputs of every later seed, and of any
#: later candidate sharing the module, would be zeros, so ``zeros.py`` would pass.
CORRUPTS = BASE.replace(
    "def add(x, y):",
    "torch.randn = lambda n, generator=None: torch.zeros(n)\n"
    "torch.Tensor.__add__ = lambda a, b: torch.zeros_like(a)\n\n\n"
    "def add(x, y):",
)


@pytest.fixture
def runner():
    warm = WarmRunner()
    yield warm
    if warm.proc.poll() is None:
        warm.close()


def _next_is_fresh(runner: WarmRunner) -> None:
    """The warm worker is still the same process and evaluates correctly afterwards."""
    pid = runner.hello["pid"]
    assert runner.proc.poll() is None and alive(pid)
    assert run_worker(BASE, runner=runner, source_name="add.py")[0].status == "ok"
    zeros = run_worker(src("zeros.py"), runner=runner, source_name="zeros.py")[0]
    assert zeros.status == "incorrect" and "mismatch" in zeros.message


def test_hello_preloads_the_stack_without_cuda(runner):
    assert {"torch", "triton"} <= set(runner.hello["preloaded"])
    assert runner.hello["versions"]["torch"] and runner.hello["versions"]["triton"]
    assert runner.hello["cuda_initialized"] is False
    assert runner.hello["pid"] == runner.proc.pid


@pytest.mark.slow
def test_exit_hang_memory_and_corruption_leave_the_next_candidate_a_fresh_stack(runner):
    exited = run_worker(src("exit3.py"), runner=runner, source_name="exit3.py")[0]
    assert exited.status == "runtime_error" and "exited with code 3" in exited.message
    _next_is_fresh(runner)
    hung = run_worker(src("hang.py"), runner=runner, timeout_s=4.0, source_name="hang.py")[0]
    assert hung.status == "timeout" and "4 s" in hung.message
    _next_is_fresh(runner)
    alloc = run_worker(src("alloc.py"), runner=runner, memory_limit_mb=1024)[0]
    assert alloc.status == "runtime_error" and "memory limit" in alloc.message
    _next_is_fresh(runner)
    # gated against itself: the static gate rejects patching torch (tests/onsite/runs.py SELF_GATED)
    corrupt = run_worker(
        CORRUPTS, runner=runner, source_name="corrupts.py", baseline_source=CORRUPTS
    )[0]
    assert corrupt.status in ("ok", "incorrect"), corrupt.message  # classified, not a crash
    _next_is_fresh(runner)
    segv = run_worker(src("segfault.py"), runner=runner, source_name="segfault.py")[0]
    assert segv.status == "runtime_error" and "SIGSEGV" in segv.message
    _next_is_fresh(runner)


def test_bad_request_frame_gets_a_result_and_the_worker_goes_on(runner):
    assert runner.run_raw([1, 2])["status"] == "runtime_error"
    assert runner.run_raw({"probe": True})["status"] == "ok"


def test_requests_with_ids_are_answered_by_id(runner):
    """``N`` frames (the local target's, several in flight): a bad one is answered at once
    under its id, a good one gets its supervisor's pid (``P``) and then its result (``A``)."""

    def send(kind: bytes, body: bytes) -> None:
        runner.proc.stdin.write(kind + struct.pack("<Q", len(body)) + body)

    send(b"N", struct.pack("<I", 7) + b"[1, 2]")
    send(b"N", struct.pack("<I", 8) + json.dumps({"probe": True}).encode())
    runner.proc.stdin.flush()
    bad = runner._frame(b"A")
    assert struct.unpack("<I", bad[:4]) == (7,)
    assert json.loads(bad[4:])["status"] == "runtime_error"
    rid, supervisor = struct.unpack("<II", runner._frame(b"P"))
    assert rid == 8 and supervisor not in (runner.proc.pid, 0)
    good = runner._frame(b"A")
    assert struct.unpack("<I", good[:4]) == (8,) and json.loads(good[4:])["status"] == "ok"
    assert not alive(supervisor)  # reaped by the zygote
    assert runner.run_raw({"probe": True})["status"] == "ok"  # the one-at-a-time frames too


def test_a_killed_supervisor_is_answered_for_and_its_directories_removed(tmp_path):
    """A supervisor that dies without a result (the OOM killer, a SIGKILL) gets a
    ``runtime_error`` naming the signal; the directories it made in the zygote's scratch
    roots are removed then, not when the zygote ends."""
    runner = WarmRunner(env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        body = make_request(src("hang.py"), timeout_s=120.0).to_json().encode()
        frame = struct.pack("<I", 1) + body
        runner.proc.stdin.write(b"N" + struct.pack("<Q", len(frame)) + frame)
        runner.proc.stdin.flush()
        rid, supervisor = struct.unpack("<II", runner._frame(b"P"))
        zygote = runner.hello["pid"]
        mine = f"accelopt-eval-{supervisor}-*"
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(f"accelopt-eval-{zygote}-*/{mine}")):
            assert time.monotonic() < deadline, "the supervisor made no directory"
            time.sleep(0.02)
        os.kill(supervisor, signal.SIGKILL)
        answer = runner._frame(b"A")
        result = json.loads(answer[4:])
        assert struct.unpack("<I", answer[:4]) == (rid,) == (1,)
        assert result["status"] == "runtime_error" and "SIGKILL" in result["message"]
        assert list(tmp_path.glob(f"accelopt-eval-{zygote}-*")), "the zygote's root is gone"
        assert not list(tmp_path.glob(f"accelopt-eval-{zygote}-*/{mine}"))
        assert runner.run_raw({"probe": True})["status"] == "ok"  # the zygote goes on
    finally:
        runner.close()
    assert not list(tmp_path.glob("accelopt-eval-*"))  # the zygote removed its roots


#: The owner: starts a warm (or cold) worker, sends it the hanging candidate, prints the
#: worker's pid, waits.
_OWNER = """
import json, struct, subprocess, sys, time
sys.path.insert(0, {root!r})
from accelopt_core.targets.shipping import encode_stdin, worker_argv
from tests.onsite.runs import WarmRunner, make_request, src
request = make_request(src("hang.py"), timeout_s=300.0)
if {mode!r} == "warm":
    worker = WarmRunner().proc
    body = request.to_json().encode()
    worker.stdin.write(b"E" + struct.pack("<Q", len(body)) + body)
else:
    worker = subprocess.Popen(worker_argv(sys.executable), stdin=subprocess.PIPE)
    worker.stdin.write(encode_stdin(request))
    worker.stdin.close()
worker.stdin.flush() if not worker.stdin.closed else None
print(json.dumps({{"worker": worker.pid}}), flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_kill_9_of_the_owner_takes_the_worker_and_its_candidate_down(tmp_path, mode):
    pidfile = tmp_path / "pid"
    root = str(Path(__file__).resolve().parents[2])
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER.format(root=root, mode=mode)],
        stdout=subprocess.PIPE,
        env=dict(os.environ, ACCELOPT_TEST_PIDFILE=str(pidfile), **UNCONFINED_FILES),
    )
    worker = json.loads(owner.stdout.readline())["worker"]
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    assert alive(worker) and alive(child)
    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    deadline = time.monotonic() + 5
    while (alive(worker) or alive(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker) and not alive(child)


@pytest.mark.slow  # two softmax evaluations per parameter in a warm worker
@pytest.mark.parametrize("preset", [None, "0"])
def test_triton_standard_library_runs_in_the_childs_interpreter_mode(preset):
    """``tl.max`` / ``tl.sum`` are decorated when triton.language is imported: the parent
    imports it in the interpreter mode, and a parent that imported it in the other mode
    (``TRITON_INTERPRET=0`` preset, as on a GPU machine) has its child re-import it."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if preset is not None:
        env["TRITON_INTERPRET"] = preset
    softmax = (Path(__file__).resolve().parents[2] / "examples/triton/softmax.py").read_text()
    warm = WarmRunner(env=env)
    try:
        request = make_request(softmax, source_name="softmax.py")
        request.harness_source, request.entry = softmax, "softmax"
        for _ in range(2):
            result = warm.run(request)
            assert result.status == "ok", result.message
    finally:
        assert warm.close() == 0
