"""The warm worker (fork server): one long-lived process that has imported the kernel's stack
once and forks one fresh supervisor per request (issues 14 and 33).

Targets start it exactly like the cold worker, ``python -c BOOTSTRAP`` with ``bundle("zygote")``
first on its stdin (:mod:`accelopt_core.targets.shipping`); the local target runs one for all its
slots, the ssh agent (:mod:`.process.agent`) one on the remote for the connection's lifetime,
the Ray target one in a Ray actor per device. Nothing is written to disk.

Start-up (:func:`main`): death with the owner (``PR_SET_PDEATHSIG`` = SIGKILL, and end-of-file
on stdin: the owner's end of the pipe closes when it dies, even by ``kill -9``), fd 1 moved to a
private descriptor for the frames (a stray print goes to stderr), then
:func:`.process.warmstack.preload`: torch, triton (and numpy; the Neuron SDK when present) are imported
WITHOUT initialising CUDA or the Neuron runtime. CUDA must never be initialised here: a CUDA
context (even ``cuInit``) does not survive ``fork``. Each child initialises it itself, after
pinning its device (``CUDA_VISIBLE_DEVICES``); triton's interpreter mode is fixed when
``triton.language`` is imported, so :mod:`.process.warmstack` imports it in the likely mode and the
child re-imports it when its request runs in the other. Triton's on-disk compile cache stays
shared.
Thread pools (OpenMP / intra-op) start at the first parallel operation, never at import, so
the fork happens while the process has no worker threads that could hold a lock.

Per request the zygote forks a supervisor (a copy of itself, stack imported), which runs
:func:`.process.supervisor.supervise`, the same code as the cold path: own process and session
for the candidate, hard timeout, memory limit, crash and hang classification, the static gate.
So one zygote serves every evaluation slot of its owner at once (issue 33: one torch import per
target, not one per slot), and cancelling one evaluation stops only its supervisor. A candidate
that monkey-patches torch patches only its own child's copy.

Wire format (integers little-endian; every frame is a kind byte + u64 length + body), after
the bundle:

- zygote -> owner, once: ``b"H"`` + JSON ``{"pid", "versions", "preloaded",
  "cuda_initialized"}``. The owner sends nothing before it.
- owner -> zygote, one request at a time: ``b"E"`` + the request JSON
  (:meth:`~.protocol.EvalRequest.to_dict`, or ``{"probe": true}``); answered by ``b"R"`` + the
  result JSON (:class:`~.protocol.EvalResult` fields). The ssh agent and the Ray actors use it.
- owner -> zygote, several at once: ``b"N"`` + u32 request id + the request JSON; answered by
  ``b"P"`` + u32 id + u32 supervisor pid when it is forked, then ``b"A"`` + u32 id + the
  result JSON. ``b"K"`` + u32 id cancels that request: its supervisor gets SIGTERM (it kills
  its candidate's process group and removes its directories), SIGKILL 0.3 s later; its
  ``A`` frame still comes (a ``runtime_error``).

The zygote also keeps the reference process's answers between evaluations (issue 50, item
4: :mod:`.runtime.casestore`): its supervisors and their judges inherit the kept segments, and
the judges offer new ones on a socket that this loop reads beside the requests.

End-of-file on stdin, SIGTERM or SIGHUP: the running supervisors are stopped (they kill their
candidates) and the zygote exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import struct
import sys
import time
from dataclasses import dataclass, field

from ..judge.peers import set_nondumpable
from ..protocol import result_dict, signal_name
from ..runtime import casestore
from ..runtime.device import versions
from ..sandbox.policy import setup_worker
from ..sandbox.scratch import remove_scratch, scratch_roots, sweep
from .child import set_pdeathsig
from .supervisor import supervise
from .warmstack import preload


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a pipe takes a large write in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_frame(fd: int, kind: bytes, data: bytes) -> None:
    """Write ``kind`` + u64 length + ``data`` to ``fd``."""
    _write_all(fd, kind + struct.pack("<Q", len(data)) + data)


#: Seconds a cancelled supervisor gets between SIGTERM and SIGKILL.
CANCEL_GRACE_S = 0.3
#: Seconds between checks for supervisors that exited while their pipe stays open.
POLL_S = 0.5

#: The running supervisors' pids, for the signal handler.
_RUNNING: set[int] = set()
#: The signals that end the zygote (and a supervisor).
_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _request(body: bytes) -> dict | str:
    """The request object of a frame body, or why it is none."""
    try:
        request = json.loads(body.decode("utf-8"))
    except ValueError as exc:
        return f"bad request to the warm worker: {exc}"
    if not isinstance(request, dict):
        return "bad request to the warm worker: not a JSON object"
    return request


def _answer(request: dict) -> dict:
    """The result of one request (never raises)."""
    try:
        return supervise(request)
    except Exception as exc:  # the supervisor itself failed (e.g. fork impossible)
        return result_dict("runtime_error", f"worker supervisor failed: {exc!r}")


def _exit_on_signals() -> None:
    """SIGTERM / SIGHUP / SIGINT: stop the running supervisors (each kills its candidate's
    process group), remove the scratch roots and exit."""

    def leave(signum, frame):
        for pid in list(_RUNNING):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        remove_scratch()
        os._exit(128 + signum)

    for sig in _SIGNALS:
        signal.signal(sig, leave)


@dataclass
class _Supervisor:
    """One forked supervisor: its pid, the read end of its result pipe, what came through it,
    the request id (None for an ``E`` request) and when it is to be SIGKILLed."""

    pid: int
    fd: int
    rid: int | None
    data: bytearray = field(default_factory=bytearray)
    kill_at: float | None = None
    kill_pending: bool = False  # SIGTERM sent, SIGKILL due at kill_at


def _fork(request: dict, rid: int | None, keep: list[int]) -> _Supervisor:
    """Fork a supervisor for ``request``: it dies with this process, closes the zygote's pipes
    (``keep``: the fds it must not hold), evaluates and writes the result JSON to its pipe.

    Raises:
        OSError: no pipe or no fork.
    """
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    zygote = os.getpid()
    # the zygote's handler (stop every supervisor) must never run in a supervisor: the signals
    # are blocked across the fork, and the child sets the default action before unblocking
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        os.close(r)
        os.close(w)
        raise
    if pid == 0:
        try:
            for sig in _SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            _RUNNING.clear()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
            set_pdeathsig()
            if os.getppid() != zygote:  # the zygote died before the signal was armed
                os._exit(1)
            os.close(r)
            casestore.leave_receiving()  # the zygote alone takes what judges offer
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)  # stdin (the owner's pipe) becomes /dev/null: never left closed
            os.close(devnull)
            for fd in keep:
                if fd != 0:
                    os.close(fd)
            _write_all(w, json.dumps(_answer(request), default=str).encode())
        finally:
            os._exit(0)
    _RUNNING.add(pid)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    os.close(w)
    os.set_blocking(r, False)
    return _Supervisor(pid, r, rid)


def _finish(sup: _Supervisor, status: int) -> dict:
    """A reaped supervisor's result (``status``: its wait status), or why there is none; its
    pipe is closed and its directories, if it left any (killed), removed."""
    os.close(sup.fd)
    _RUNNING.discard(sup.pid)
    if os.WIFSIGNALED(status):  # no chance to remove its directories in the scratch roots
        sweep(scratch_roots())
    try:
        result = json.loads(bytes(sup.data).decode("utf-8", "replace"))
        if isinstance(result, dict):
            return result
    except ValueError:
        pass
    if sup.kill_at is not None:
        return result_dict("runtime_error", "the evaluation was cancelled")
    if os.WIFSIGNALED(status):
        how = f"was killed by {signal_name(os.WTERMSIG(status))}"
    else:
        how = f"exited with code {os.WEXITSTATUS(status)}"
    return result_dict("runtime_error", f"the evaluation's supervisor {how} without a result")


def _stop(sup: _Supervisor) -> None:
    """SIGTERM a supervisor (it kills its candidate); SIGKILL follows at ``kill_at``."""
    if sup.kill_at is None:
        sup.kill_at, sup.kill_pending = time.monotonic() + CANCEL_GRACE_S, True
        with contextlib.suppress(OSError):
            os.kill(sup.pid, signal.SIGTERM)


def _stop_all(running: dict[int, _Supervisor]) -> None:
    """End-of-file: stop every supervisor, wait out the grace, SIGKILL and reap the rest."""
    for sup in running.values():
        _stop(sup)
    deadline = time.monotonic() + CANCEL_GRACE_S
    while running and time.monotonic() < deadline:
        for fd, sup in list(running.items()):
            done, _ = os.waitpid(sup.pid, os.WNOHANG)
            if done:
                os.close(fd)
                del running[fd]
        time.sleep(0.01)
    for sup in running.values():
        with contextlib.suppress(OSError):
            os.kill(sup.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(sup.pid, 0)
        os.close(sup.fd)
    running.clear()


def _frames(buf: bytearray):
    """Take the complete frames off the front of ``buf``: ``(kind, body)`` pairs."""
    while len(buf) >= 9:
        (n,) = struct.unpack("<Q", buf[1:9])
        if len(buf) < 9 + n:
            return
        kind, body = bytes(buf[:1]), bytes(buf[9 : 9 + n])
        del buf[: 9 + n]
        yield kind, body


def _reply(out: int, rid: int | None, result: dict) -> None:
    body = json.dumps(result, default=str).encode()
    if rid is None:
        write_frame(out, b"R", body)
    else:
        write_frame(out, b"A", struct.pack("<I", rid) + body)


def serve(inp: int, out: int) -> None:
    """Answer the request frames read from the fd ``inp`` (see the module) with frames on the
    fd ``out``, one forked supervisor per request, until end-of-file; then stop the running
    supervisors. A malformed frame gets a ``runtime_error`` result (an ``E`` frame) or is
    dropped (``N`` without an id, an unknown kind). A supervisor is answered for when its
    pipe ends or, checked every :data:`POLL_S`, when it has exited (a process it left behind
    could hold the pipe open)."""
    running: dict[int, _Supervisor] = {}  # by the fd of its result pipe
    buf = bytearray()
    store = casestore.current()
    kept = [store.recv_fd] if store is not None and store.recv_fd is not None else []
    while True:
        now = time.monotonic()
        waits = [POLL_S] if running else []
        waits += [max(0.0, s.kill_at - now) for s in running.values() if s.kill_pending]
        due = store.expire(now) if store is not None else None  # answers unused for 10 min
        waits += [max(0.0, due)] if due is not None else []
        ready, _, _ = select.select([inp, *kept, *running], [], [], min(waits) if waits else None)
        for fd in ready:
            if fd in kept:
                store.take()  # answers a judge offered (issue 50, item 4)
            elif fd == inp:
                chunk = os.read(inp, 1 << 16)
                if not chunk:
                    _stop_all(running)
                    return
                buf += chunk
                for kind, body in _frames(buf):
                    _take(kind, body, running, out, inp)
            elif fd in running and _read(running[fd]) is False:  # its end: it exited
                sup = running.pop(fd)
                _reply(out, sup.rid, _finish(sup, os.waitpid(sup.pid, 0)[1]))
        now = time.monotonic()
        for fd, sup in list(running.items()):
            if sup.kill_pending and now >= sup.kill_at:
                sup.kill_pending = False
                with contextlib.suppress(OSError):
                    os.kill(sup.pid, signal.SIGKILL)
            done, status = os.waitpid(sup.pid, os.WNOHANG)
            if done:  # what it wrote is in its pipe: read it without waiting for the end
                while _read(sup):
                    pass
                del running[fd]
                _reply(out, sup.rid, _finish(sup, status))


def _read(sup: _Supervisor) -> bool | None:
    """Read what the supervisor's pipe holds (non-blocking): True when something came,
    False at its end, None when it holds nothing now."""
    try:
        chunk = os.read(sup.fd, 1 << 16)
    except BlockingIOError:
        return None
    sup.data += chunk
    return bool(chunk)


def _take(kind: bytes, body: bytes, running: dict[int, _Supervisor], out: int, inp: int) -> None:
    """Act on one frame from the owner."""
    if kind == b"K":
        if len(body) == 4:
            (rid,) = struct.unpack("<I", body)
            for sup in running.values():
                if sup.rid == rid:
                    _stop(sup)
        return
    if kind == b"E":
        rid = None
    elif kind == b"N" and len(body) >= 4:
        (rid,) = struct.unpack("<I", body[:4])
        body = body[4:]
    else:
        return
    request = _request(body)
    if isinstance(request, str):
        _reply(out, rid, result_dict("runtime_error", request))
        return
    try:
        sup = _fork(request, rid, [inp, out, *running])
    except OSError as exc:
        _reply(out, rid, result_dict("runtime_error", f"worker supervisor failed: {exc!r}"))
        return
    running[sup.fd] = sup
    if rid is not None:
        write_frame(out, b"P", struct.pack("<II", rid, sup.pid))


def main() -> None:
    """The warm worker's entry: die with the owner, set up the sandbox (one thread yet:
    :func:`..sandbox.policy.setup_worker`), preload the stack, become non-dumpable (a
    candidate cannot trace the zygote that forks its peers), say hello, serve; ``os._exit(0)``
    at end-of-file."""
    set_pdeathsig()
    setup_worker()
    _exit_on_signals()
    out = os.dup(1)
    os.dup2(2, 1)  # anything printed to stdout from now on goes to stderr
    loaded = preload()
    set_nondumpable()
    casestore.install()  # inputs and references kept between evaluations (issue 50, item 4)
    torch = sys.modules.get("torch")
    hello = {
        "pid": os.getpid(),
        "versions": versions(torch, sys.modules.get("triton")),
        "preloaded": loaded,
        # must stay False: a CUDA context does not survive fork (checked by the tests)
        "cuda_initialized": bool(torch is not None and torch.cuda.is_initialized()),
    }
    write_frame(out, b"H", json.dumps(hello).encode())
    serve(sys.stdin.fileno(), out)
    remove_scratch()
    os._exit(0)
