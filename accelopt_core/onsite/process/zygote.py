"""The warm worker (fork server): one long-lived process per evaluation slot that has imported
the kernel's stack once and forks one fresh child per request (issue 14).

Targets start it exactly like the cold worker, ``python -c BOOTSTRAP`` with ``bundle("zygote")``
first on its stdin (:mod:`accelopt_core.targets.shipping`); the local target runs it directly,
the ssh agent (:mod:`.process.agent`) on the remote for the connection's lifetime, the Ray target in a
Ray actor per device. Nothing is written to disk.

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

Per request the child is forked by :func:`.process.supervisor.supervise`, the same code as the cold
path: own process and session, hard timeout, memory limit, crash and hang classification, the
static gate. A candidate that monkey-patches torch patches only its own child's copy.

Wire format (integers little-endian), after the bundle:

- zygote -> owner, once: ``b"H"`` + u64 length + JSON ``{"pid", "versions", "preloaded",
  "cuda_initialized"}``.
- owner -> zygote, per evaluation: ``b"E"`` + u64 length + the request JSON
  (:meth:`~.protocol.EvalRequest.to_dict`, or ``{"probe": true}``).
- zygote -> owner: ``b"R"`` + u64 length + the result JSON (:class:`~.protocol.EvalResult`
  fields).

End-of-file on stdin, SIGTERM or SIGHUP: the running child's process group is killed and the
zygote exits.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import sys

from ..protocol import result_dict
from ..runtime.device import versions
from ..sandbox.policy import setup_worker
from ..sandbox.scratch import remove_scratch
from .child import set_pdeathsig
from .supervisor import supervise
from .warmstack import preload


def read_exact(stream, n: int) -> bytes | None:
    """Exactly ``n`` bytes from the binary ``stream``, or None at end-of-file."""
    data = stream.read(n) if n else b""
    return data if len(data) == n else None


def write_frame(fd: int, kind: bytes, data: bytes) -> None:
    """Write ``kind`` + u64 length + ``data`` to ``fd``."""
    view = memoryview(kind + struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def read_frame(stream, kind: bytes) -> bytes | None:
    """The body of the next ``kind`` frame on the binary ``stream``; None at end-of-file or
    for another kind."""
    head = read_exact(stream, 9)
    if head is None or head[:1] != kind:
        return None
    return read_exact(stream, struct.unpack("<Q", head[1:])[0])


def _answer(body: bytes) -> dict:
    """The result of one request frame (never raises)."""
    try:
        request = json.loads(body.decode("utf-8"))
        if not isinstance(request, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return result_dict("runtime_error", f"bad request to the warm worker: {exc}")
    try:
        return supervise(request)
    except Exception as exc:  # the supervisor itself failed (e.g. fork impossible)
        return result_dict("runtime_error", f"worker supervisor failed: {exc!r}")


def _exit_on_signals() -> None:
    """SIGTERM / SIGHUP / SIGINT between requests: remove the scratch roots and exit (during
    one, :func:`.process.supervisor.supervise` kills the child's process group first)."""

    def leave(signum, frame):
        remove_scratch()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, leave)


def serve(inp, out: int) -> None:
    """Answer request frames on the binary stream ``inp`` with result frames on the fd
    ``out`` until end-of-file."""
    while True:
        body = read_frame(inp, b"E")
        if body is None:
            return
        result = _answer(body)
        _exit_on_signals()  # the handlers of supervise() name a child that is gone
        write_frame(out, b"R", json.dumps(result, default=str).encode())


def main() -> None:
    """The warm worker's entry: die with the owner, set up the sandbox (one thread yet:
    :func:`..sandbox.policy.setup_worker`), preload the stack, say hello, serve;
    ``os._exit(0)`` at end-of-file."""
    set_pdeathsig()
    setup_worker()
    _exit_on_signals()
    out = os.dup(1)
    os.dup2(2, 1)  # anything printed to stdout from now on goes to stderr
    loaded = preload()
    torch = sys.modules.get("torch")
    hello = {
        "pid": os.getpid(),
        "versions": versions(torch, sys.modules.get("triton")),
        "preloaded": loaded,
        # must stay False: a CUDA context does not survive fork (checked by the tests)
        "cuda_initialized": bool(torch is not None and torch.cuda.is_initialized()),
    }
    write_frame(out, b"H", json.dumps(hello).encode())
    serve(sys.stdin.buffer, out)
    remove_scratch()
    os._exit(0)
