"""The evaluation child, the JUDGE: the forked process that decides one request's result
(:mod:`.process.supervisor` forks it; issue 10).

Set-up: a new session (the supervisor kills the whole process group), death with the supervisor
(``PR_SET_PDEATHSIG``), not dumpable (``PR_SET_DUMPABLE`` 0: the candidate process cannot
ptrace it or open its fds through ``/proc``), the sandbox (:func:`.sandbox.policy.confine_judge`:
scratch ``HOME``/``TMPDIR``, Landlock; everything it forks inherits it), faulthandler (a crash
or a hang dumps the Python stack to stderr), and an :class:`Emitter` for the one result: only
this process writes it.
Dispatch: a probe, or the static gate and then the Triton (:mod:`.triton.evaluation`: the candidate
runs in a process of its own that the judge forks, :mod:`.judge.peers`) or NKI (:mod:`.nki.evaluation`,
still in this process) evaluation, by the backend of the kernel the entry launches.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import sys
import time

from ..gate.launcher import candidate_kernels, entry_backend
from ..gate.precheck import precheck
from ..judge.peers import set_nondumpable
from ..nki import evaluation as nki_eval
from ..protocol import result_dict
from ..runtime import casestore
from ..runtime.device import arm_hang_dump, pin_device, probe
from ..runtime.failures import candidate_file
from ..runtime.sources import module_of
from ..sandbox import policy as sandbox
from ..triton import evaluation as triton_eval
from .warmstack import align


class Emitter:
    """Writes the result exactly once to the result pipe (main thread or watchdog)."""

    def __init__(self, fd: int) -> None:
        import threading

        self.fd = fd
        self.lock = threading.Lock()
        self.done = False

    def emit(self, result: dict) -> None:
        """Write ``result`` as JSON and close the pipe; later calls do nothing."""
        with self.lock:
            if self.done:
                return
            self.done = True
            data = json.dumps(result, default=str).encode()
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
            os.close(self.fd)


def set_pdeathsig() -> None:
    """Linux: SIGKILL this process when its parent dies (the supervisor, for the child; the
    owner, for a warm worker). Elsewhere nothing."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except Exception:
        pass


def _evaluate(req: dict, ctx: dict) -> dict:
    """Gate the candidate, pin the device, run the backend's evaluation."""
    cand_file = candidate_file(str(req.get("source_name") or "candidate.py"))
    ctx.update(cand_file=cand_file, memory_limit_mb=req.get("memory_limit_mb", 8192))
    baseline = req.get("baseline_source") or req["harness_source"]
    module = (
        module_of(req["kernel_path"])[0] if req.get("files") and req.get("kernel_path") else None
    )
    allow = tuple(req.get("allow_modules") or ())  # issue 53: the setting gate.allowModules
    pre = precheck(
        req["candidate_source"], req["entry"], baseline, cand_file, module, allow_modules=allow
    )
    if pre is not None:
        return pre
    ctx["cand_tree"] = tree = ast.parse(req["candidate_source"])
    ctx["kernels"] = candidate_kernels(tree)
    pin_device(req.get("device"))
    if entry_backend(tree, req["entry"], ctx["kernels"]) == "nki":
        casestore.forget()  # the NKI candidate runs in this process: no kept segment for it
        return nki_eval.evaluate(req, ctx)
    align(req)  # a warm parent's triton, imported in the other interpreter mode: re-import
    return triton_eval.evaluate(req, ctx)


def _sandbox_report(request: dict, result: dict) -> None:
    """A probe's answer says how candidates are confined here (``sandbox``); an evaluation's
    result carries the warning when a part of the sandbox is missing."""
    if request.get("probe"):
        result["sandbox"] = sandbox.describe()
        return
    note = sandbox.note()
    if note is not None and isinstance(result, dict):
        result.setdefault("warnings", []).append(note)


def child_main(
    request: dict, result_fd: int, supervisor_pid: int, dirs: dict | None = None
) -> None:
    """Run ``request`` in this (forked) process and emit its result to ``result_fd``; never
    returns (``os._exit``).

    The evaluations share ``ctx``: ``emitter`` (:class:`Emitter`), ``supervisor`` (its pid),
    ``start`` (monotonic s), ``deadline`` (monotonic s: when a hang's stack is dumped, just
    before the supervisor's timeout), ``dirs`` (the candidate's working, temporary and exchange
    directories made by the supervisor, or None), then ``cand_file``, ``memory_limit_mb``,
    ``cand_tree``, ``kernels`` and ``interpreter`` (see :func:`.runtime.failures.classify`). Any
    exception becomes a ``runtime_error``.
    """
    try:
        os.setsid()
    except OSError:
        pass
    set_pdeathsig()
    set_nondumpable()
    if os.getppid() != supervisor_pid:
        os._exit(1)
    if dirs is not None:  # one thread yet: Landlock binds this thread and what it forks
        sandbox.confine_judge(dirs)
    import faulthandler

    faulthandler.enable(file=sys.stderr)  # a crash dumps the Python stack (with the line)
    start = time.monotonic()
    timeout_s = float(request.get("timeout_s") or 120.0)
    deadline = start + max(timeout_s - 0.5, timeout_s * 0.9)
    # Just before the supervisor's deadline, dump where the candidate hangs (the Triton judge
    # cancels it before forking the candidate process, which arms its own).
    cancel_dump = arm_hang_dump(deadline - start)
    emitter = Emitter(result_fd)
    ctx = {
        "emitter": emitter,
        "cancel_hang_dump": cancel_dump,
        "supervisor": supervisor_pid,
        "start": start,
        "deadline": deadline,
        "dirs": dirs,
    }
    try:
        result = probe(request) if request.get("probe") else _evaluate(request, ctx)
    except BaseException as exc:  # noqa: BLE001 - classified, never propagated
        result = result_dict("runtime_error", f"worker error: {type(exc).__name__}: {exc}")
    _sandbox_report(request, result)
    sys.stdout.flush()
    sys.stderr.flush()
    emitter.emit(result)
    os._exit(0)
