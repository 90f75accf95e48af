"""The supervisor: reads one request, forks the evaluation child (the judge, :mod:`.process.child`),
enforces the timeout and classifies a child that died without a result; :func:`main` is the
worker's entry point.

It imports nothing heavy. The child's fd 1 and 2 go to pipes (its stdout becomes a warning, its
stderr a tail for crash messages); its result comes through a third pipe. A phase per function:
:func:`_fork` (pipes and the child), :func:`_forward_signals` (a cancelled worker takes its
child down), :func:`_drain` (read the pipes until the child is done or the time is up),
:func:`_reap` (wait for or kill the child and its process group), :func:`_verdict` (the result).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field

from ..judge.peers import new_dirs, remove_dirs, set_nondumpable
from ..protocol import (
    HARNESS_VERSION,
    JUDGE_VERSION,
    SENTINEL,
    result_dict,
    signal_name,
    tail,
)
from ..runtime.failures import line_from_text
from ..sandbox.policy import setup_worker
from ..sandbox.scratch import remove_scratch
from .child import child_main, set_pdeathsig

_TAIL_BYTES = 4000


@dataclass
class _Child:
    """A forked child and the read ends of its result, stdout and stderr pipes."""

    pid: int
    res: int
    out: int
    err: int
    bufs: dict[int, bytearray] = field(default_factory=dict)
    out_total: int = 0  # bytes the child wrote to stdout (its buffer keeps only a tail)
    status: int | None = None  # os.waitpid status once reaped
    timed_out: bool = False

    def __post_init__(self) -> None:
        self.bufs = {self.res: bytearray(), self.out: bytearray(), self.err: bytearray()}


def _fork(request: dict, dirs: dict | None = None) -> _Child:
    """Fork the child with stdin on /dev/null and fd 1 / 2 / a result fd on pipes; ``dirs``:
    the candidate's directories (:func:`.judge.peers.new_dirs`)."""
    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # child
        try:
            for fd in (res_r, out_r, err_r):
                os.close(fd)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (devnull, out_w, err_w):
                os.close(fd)
            child_main(request, res_w, parent, dirs)
        finally:
            os._exit(1)
    for fd in (res_w, out_w, err_w):
        os.close(fd)
    return _Child(pid, res_r, out_r, err_r)


def _kill(pid: int) -> None:
    """SIGKILL the child's process group (the candidate's leftovers), then the child."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _forward_signals(pid: int, dirs: dict | None = None) -> None:
    """On SIGTERM / SIGHUP / SIGINT (the target cancelled us): kill the child, remove the
    candidate's directories and this worker's scratch roots, then exit."""

    def on_signal(signum, frame):
        _kill(pid)
        remove_dirs(dirs)
        remove_scratch()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            signal.signal(sig, on_signal)
        except (ValueError, OSError):  # not the main thread
            pass


def _read(child: _Child, fd: int) -> bool:
    """Read what ``fd`` has; keep only a tail of stdout and stderr. False at end of file."""
    chunk = os.read(fd, 65536)
    if not chunk:
        return False
    buf = child.bufs[fd]
    buf += chunk
    if fd == child.out:
        child.out_total += len(chunk)
    if fd != child.res and len(buf) > 4 * _TAIL_BYTES:
        del buf[: len(buf) - _TAIL_BYTES]
    return True


def _drain(child: _Child, start: float, timeout_s: float) -> None:
    """Read the pipes until all are closed, the child has been gone for 1 s (a grandchild
    holds them open) or ``timeout_s`` has passed since ``start`` (sets ``timed_out``)."""
    import selectors

    sel = selectors.DefaultSelector()
    for fd in child.bufs:
        sel.register(fd, selectors.EVENT_READ)
    exited_at = None
    while sel.get_map():
        now = time.monotonic()
        if now - start > timeout_s:
            child.timed_out = True
            break
        if child.status is None:
            done, st = os.waitpid(child.pid, os.WNOHANG)
            if done:
                child.status, exited_at = st, now
        if exited_at is not None and now - exited_at > 1.0:
            break
        for key, _ in sel.select(timeout=0.05):
            if not _read(child, key.fd):
                sel.unregister(key.fd)
    sel.close()


def _reap(child: _Child, start: float, timeout_s: float) -> None:
    """Wait for the child until the deadline, then kill its process group and, if it still
    runs, the child itself; close the pipes. Sets ``status`` (and ``timed_out``)."""
    if not child.timed_out and child.status is None:
        while time.monotonic() - start <= timeout_s:
            done, st = os.waitpid(child.pid, os.WNOHANG)
            if done:
                child.status = st
                break
            time.sleep(0.01)
        else:
            child.timed_out = True
    try:
        os.killpg(child.pid, signal.SIGKILL)  # leftovers of the candidate's process group
    except OSError:
        pass
    if child.status is None:
        try:
            os.kill(child.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            _, child.status = os.waitpid(child.pid, 0)
        except ChildProcessError:
            child.status = 0
    for fd in child.bufs:
        os.close(fd)


def _death(status: int, stderr: bytes, source_name: str) -> dict:
    """runtime_error for a child that died without a result: the signal (``SIGSEGV
    (segmentation fault)``) or exit code, and the ``Fatal Python error`` line or stderr tail."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            what = signal.strsignal(sig)
        except (ValueError, AttributeError):
            what = None
        how = f"was killed by {signal_name(sig)}" + (f" ({what.lower()})" if what else "")
    else:
        how = f"exited with code {os.WEXITSTATUS(status)}"
    text = stderr.decode("utf-8", "replace")
    fatal = re.search(r"^Fatal Python error: .*$", text, re.M)
    excerpt = fatal.group(0) if fatal else tail(stderr, 400)
    return result_dict(
        "runtime_error",
        f"the candidate process {how} without a result"
        + (f"; stderr: {excerpt}" if excerpt else ""),
        line=line_from_text(text, source_name),
    )


def _verdict(child: _Child, timeout_s: float, source_name: str) -> dict:
    """The child's result, else ``timeout`` or the classified death; stdout noise becomes a
    warning."""
    stderr = bytes(child.bufs[child.err])
    result = None
    if not child.timed_out and child.bufs[child.res]:
        try:
            result = json.loads(bytes(child.bufs[child.res]).decode("utf-8", "replace"))
        except ValueError:
            result = None
    if child.timed_out:
        result = result_dict(
            "timeout",
            f"no result within {timeout_s:g} s; the candidate's processes were killed",
            line=line_from_text(stderr.decode("utf-8", "replace"), source_name),
        )
    elif not isinstance(result, dict) or result.get("status") is None:
        result = _death(child.status, stderr, source_name)
    elif isinstance(result.get("candidate_status"), int):  # the judge saw its candidate die
        result.update(_death(result.pop("candidate_status"), stderr, source_name))
        if isinstance(result.get("derived_input"), str):  # issue 22: where it died
            result["message"] += f" (on {result['derived_input']})"
    if child.out_total:
        result.setdefault("warnings", [])
        result["warnings"].append(
            f"the candidate wrote {child.out_total} bytes to stdout (ignored): "
            f"{tail(bytes(child.bufs[child.out]), 200)!r}"
        )
    result.setdefault("harness_version", HARNESS_VERSION)
    result.setdefault("judge_version", JUDGE_VERSION)
    return result


def supervise(request: dict) -> dict:
    """Run one request in a forked child and return its result dict (never raises).

    Enforces ``request["timeout_s"]`` (kills the child's process group, the candidate process
    included: status ``timeout``), and classifies a child, or the candidate process the judge
    saw die, that died without a result (``runtime_error`` naming the signal or exit code,
    with the stderr tail). This process is made non-dumpable (the candidate cannot open its
    result pipe through ``/proc``); the candidate's directories are made here and removed
    after the child, whatever became of it.
    """
    timeout_s = float(request.get("timeout_s") or 120.0)
    source_name = str(request.get("source_name") or "candidate.py")
    start = time.monotonic()
    set_nondumpable()
    dirs = None if request.get("probe") else new_dirs()
    try:
        child = _fork(request, dirs)
        _forward_signals(child.pid, dirs)
        _drain(child, start, timeout_s)
        _reap(child, start, timeout_s)
    finally:
        remove_dirs(dirs)
    return _verdict(child, timeout_s, source_name)


def main() -> None:
    """Read one request (JSON) from stdin, evaluate it, print one sentinel result line.

    The worker dies with the process that started it (``PR_SET_PDEATHSIG`` on Linux), so a
    ``kill -9`` of the CLI or server does not leave it running until its timeout. Its sandbox
    is set up first, while it has one thread (:func:`..sandbox.policy.setup_worker`)."""
    set_pdeathsig()
    setup_worker()
    raw = sys.stdin.buffer.read()
    try:
        request = json.loads(raw.decode("utf-8"))
        if not isinstance(request, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        result = result_dict("runtime_error", f"bad request on the worker's stdin: {exc}")
    else:
        try:
            result = supervise(request)
        except Exception as exc:  # the supervisor itself failed (e.g. fork impossible)
            result = result_dict("runtime_error", f"worker supervisor failed: {exc!r}")
    remove_scratch()
    sys.stdout.write("\n" + SENTINEL + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()
