"""The judge's handle on the candidate process (issue 10: the judge never imports candidate code).

The judge is the evaluation child that :mod:`.process.supervisor` forks; it is the only process that
writes the result. :func:`spawn` forks the candidate process (:mod:`.contestant.process`) right after
the stack is imported, before the judge loads the harness, makes any input or initialises CUDA;
:class:`Candidate` then asks it for raw material over :mod:`.runtime.channel` and reads the files it
writes through :mod:`.runtime.exchange`. Everything that comes back is untrusted: an answer that is not
what was asked is a ``rejected`` result with rule ``protocol violation``; a classified error of
the candidate's own code (``{"error": ...}``) keeps only a ``compile_error`` / ``runtime_error``
status, a message and a line; a candidate that dies becomes a result carrying its wait status
in ``candidate_status``, which the supervisor turns into the usual ``runtime_error`` naming the
signal or exit code with its stderr (:func:`.process.supervisor._death`).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time

from ..contestant import process as contestant
from ..protocol import result_dict
from ..runtime.channel import Channel, ChannelError, segment_socketpair
from ..runtime.failures import Failure
from ..runtime.loading import project_of
from ..sandbox.scratch import PREFIX as _PREFIX
from ..sandbox.scratch import scratch_roots, sweep
from ..sandbox.writes import DENIED, WRITE_RULE, Watch, denied_message, peer_dirs
from . import referee
from .rules import protocol_violation, rejected, segment_value, segments

#: Extra seconds the judge waits for an answer past the supervisor's deadline (the supervisor
#: kills both processes first and reports the timeout with the candidate's hang line).
_GRACE_S = 5.0
_CTX_KEYS = ("cand_file", "memory_limit_mb", "cand_tree", "kernels", "interpreter")


def set_nondumpable() -> None:
    """``PR_SET_DUMPABLE`` 0 (Linux): a process of the same uid without ``CAP_SYS_PTRACE``
    cannot ptrace this one or open its ``/proc/<pid>/mem`` or ``/proc/<pid>/fd``; inherited by
    children. Elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def _sanitized(error) -> dict:
    """The candidate's classified error, reduced to what it may claim (status, message, line)."""
    if not isinstance(error, dict) or error.get("status") not in ("compile_error", "runtime_error"):
        raise protocol_violation(f"an error report that is no error: {str(error)[:120]}")
    line = error.get("line")
    return result_dict(
        error["status"],
        str(error.get("message"))[:2000],
        line=line if type(line) is int else None,
    )


def new_dirs() -> dict:
    """Fresh private directories for one evaluation (mode 0700): ``root``, and beneath it
    ``cwd`` and ``tmp`` (the candidate's working and temporary directories), made inside this
    process's scratch root (:func:`..sandbox.scratch.scratch_roots`: the only place the
    sandbox lets a candidate write), named ``accelopt-eval-<this pid>-...``. Tensors do not
    go through files (:mod:`..runtime.exchange`). Remove them with :func:`remove_dirs`; those
    of dead workers are swept first (:func:`sweep`)."""
    roots = scratch_roots()
    sweep([os.path.dirname(r) for r in roots])
    root = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=roots[0])
    dirs = {"root": root, "cwd": os.path.join(root, "cwd"), "tmp": os.path.join(root, "tmp")}
    for name in ("cwd", "tmp"):
        os.mkdir(dirs[name], 0o700)
    return dirs


def remove_dirs(dirs: dict | None) -> None:
    """Remove what :func:`new_dirs` made (errors ignored)."""
    if dirs and dirs.get("root"):
        shutil.rmtree(dirs["root"], ignore_errors=True)


class Candidate:
    """The judge's end of the candidate process: its pid and the channel.

    ``deadline``: monotonic time (s) after which no answer is awaited (past the supervisor's
    own deadline); ``call_ms``: the call times the candidate reported for correctness checks.
    """

    def __init__(self, pid: int, chan: Channel, deadline: float) -> None:
        self.pid = pid
        self.chan = chan
        self.deadline = deadline
        self.status: int | None = None
        self.call_ms: list[float] = []
        self.wall_call_ms: list[float] = []  # check round trips on the judge's clock
        #: per kernel of the candidate: launches and interpreter ms over the checks (its report)
        self.kernels: dict[str, dict] = {}
        #: the candidate's directories as the judge made them (issue 53; :func:`spawn` sets it)
        self.watch: Watch | None = None
        self._op: str | None = None

    def recv(self) -> dict:
        """The next answer. Raises Failure: the candidate died (``candidate_status``), broke
        the protocol, reported its own error, or the deadline passed."""
        try:
            answer = self.chan.recv(max(self.deadline - time.monotonic(), 0.01))
        except ChannelError as exc:
            if exc.kind == "closed":
                raise Failure(self.death()) from None
            if exc.kind == "timeout":
                raise Failure(
                    result_dict("timeout", "no answer from the candidate process")
                ) from None
            raise protocol_violation(str(exc)) from None
        self._writes_seen(answer)
        if "error" in answer:
            raise Failure(self.sanitized(answer["error"]))
        return answer

    def _writes_seen(self, answer: dict) -> None:
        """Issue 53, item 5: raise the ``file written`` rejection when the candidate tried to
        write where the sandbox refuses it (``answer`` is the report of
        :func:`..sandbox.writes.guard`) or created, changed or removed a file in its
        directories since the last answer (:meth:`..sandbox.writes.Watch.seen`; the reference
        and compile-stage processes have no watch). An error answer keeps its own verdict (a
        failed GPU compile may leave its temporary files behind)."""
        if self.watch is None:
            return
        when = _WHEN.get(self._op, "during the call")
        if DENIED in answer:
            raise rejected(WRITE_RULE, denied_message(answer, when))
        if "error" in answer:
            return
        found = self.watch.seen(when)
        if found is not None:
            raise rejected(WRITE_RULE, found)

    def sanitized(self, error) -> dict:
        """What an error report of this process may claim (:func:`_sanitized`)."""
        return _sanitized(error)

    def ask(self, message: dict, expect: str) -> dict:
        """Send ``message``; the answer, which must hold the key ``expect``."""
        self._op = message.get("op")
        try:
            self.chan.send(message)
        except ChannelError:
            raise Failure(self.death()) from None
        answer = self.recv()
        if expect not in answer:
            raise protocol_violation(f"expected '{expect}', got {sorted(answer)[:5]}")
        return answer

    def received(self, answer: dict, key: str, torch, device: str = "cpu"):
        """The value of the segment the process sent as ``answer[key]`` (on ``device``); its
        descriptor is closed. Raises Failure (protocol violation) when there is no segment
        there or it is malformed."""
        (segment,) = segments(answer, key, 1)
        return segment_value(segment, torch, device)

    def _wait(self, timeout_s: float) -> int | None:
        end = time.monotonic() + timeout_s
        while self.status is None:
            done, st = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = st
            elif time.monotonic() >= end:
                return None
            else:
                time.sleep(0.005)
        return self.status

    def death(self) -> dict:
        """The result for a candidate whose channel closed: its wait status (killed after 2 s
        if it still runs) in ``candidate_status``, for the supervisor to classify."""
        status = self._wait(2.0)
        if status is None:
            self.kill()
            status = self._wait(2.0) or 0
        return result_dict("runtime_error", "the candidate process died", candidate_status=status)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def stop(self) -> None:
        """Ask the candidate to exit, kill it after 1 s, reap it, close the channel."""
        if self.status is None:
            try:
                self.chan.send({"op": "exit"})
            except ChannelError:
                pass
            if self._wait(1.0) is None:
                self.kill()
                self._wait(5.0)
        self.chan.close()


def fork_peer(req: dict, ctx: dict, body, peer_class):
    """Fork a peer process running ``body(chan_fds)`` with a channel to this judge (two pipes
    and a socket for segments, :class:`.runtime.channel.Channel`); return ``peer_class(pid,
    channel, hard deadline)``. In the child, before ``body``:
    the judge's emitter is disarmed and the request's harness fields are dropped (the peer is
    given what it needs in its setup); the pipe ends it does not use are closed."""
    j2p_r, j2p_w = os.pipe()
    p2j_r, p2j_w = os.pipe()
    mine, theirs = segment_socketpair()
    cancel = ctx.get("cancel_hang_dump")
    if cancel is not None:
        cancel()  # its timer thread must not cross the fork
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the peer
        try:
            emitter = ctx.get("emitter")
            if emitter is not None:
                emitter.done, emitter.fd = True, -1
            for key in ("harness_source", "baseline_source", "seeds", "timing_seed"):
                req.pop(key, None)
            os.close(j2p_w)
            os.close(p2j_r)
            os.close(mine)
            body((j2p_r, p2j_w, theirs))
        finally:
            os._exit(1)
    os.close(j2p_r)
    os.close(p2j_w)
    os.close(theirs)
    hard = ctx["start"] + float(req.get("timeout_s") or 120.0) + _GRACE_S
    return peer_class(pid, Channel(p2j_r, j2p_w, mine), hard)


def spawn(req: dict, ctx: dict, use_cuda: bool, dirs: dict) -> Candidate:
    """Fork the candidate process (:func:`.contestant.process.main`) and return the judge's handle.
    Call before the harness is loaded, any input is made or CUDA is initialised. The child
    gets no reference to the judge's result pipe (its emitter is disarmed, its fds closed)."""
    setup = {
        "candidate_source": req["candidate_source"],
        "entry": req["entry"],
        "project": project_of(req),
        "use_cuda": use_cuda,
        "dirs": dirs,
        "deadline": ctx["deadline"],
        "memory_limit_mb": int(req.get("memory_limit_mb") or 8192),
        "judge": os.getpid(),
    }
    cctx = {k: ctx[k] for k in _CTX_KEYS if k in ctx}
    body = lambda fds: contestant.main(fds, setup, cctx)  # noqa: E731
    watch = Watch(dirs)  # issue 53: before the candidate can write
    cand = fork_peer(req, ctx, body, Candidate)
    cand.watch = watch
    return cand


#: How a write is placed in time, by the request that was being answered (issue 53).
_WHEN = {
    None: "while loading",
    "check": "during the call",
    "time": "during the timed calls",
    "send": "while sending its outputs",
}


#: Longest wait for one answer of the reference process, s: ``min(30, timeout / 2)``, so a
#: harness that hangs is reported as the harness's hang before the evaluation's own timeout
#: blames the candidate (issue 13, "harness mistakes").
HARNESS_WAIT_CAP_S = 30.0


class ReferencePeer(Candidate):
    """The judge's end of the reference process (:mod:`.judge.referee`): as :class:`Candidate`, but
    its death or silence is the harness's, not the candidate's. ``doing`` names the harness
    part being waited for (set by :class:`.judge.reference.Reference`), ``wait_s`` bounds each wait."""

    doing = "loading the original file (its module-level code and harness)"
    wait_s = HARNESS_WAIT_CAP_S

    def recv(self) -> dict:
        """As :meth:`Candidate.recv`, within :attr:`wait_s`. Raises Failure (``timeout``
        naming the harness part) when the harness gives no answer in time."""
        hard = self.deadline
        self.deadline = min(hard, time.monotonic() + self.wait_s)
        try:
            return super().recv()
        except Failure as failure:
            if failure.result.get("status") != "timeout":
                raise
            self.kill()
            raise Failure(
                result_dict(
                    "timeout",
                    f"the original file's harness gave no answer within {self.wait_s:g} s while "
                    f"{self.doing}; the candidate was not blamed",
                )
            ) from None
        finally:
            self.deadline = hard

    def sanitized(self, error) -> dict:
        """The harness's errors, plus the one rejection it reports: reference poisoning."""
        from .integrity import POISON_RULE

        if isinstance(error, dict) and error.get("rule") == POISON_RULE:
            return result_dict("rejected", str(error.get("message"))[:2000], rule=POISON_RULE)
        return _sanitized(error)

    def death(self) -> dict:
        status = self._wait(2.0)
        if status is None:
            self.kill()
            self._wait(2.0)
        return result_dict(
            "runtime_error",
            "the reference process (the original file's get_inputs / reference) died"
            + (f" ({_how(status)})" if status is not None else ""),
        )


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit code {os.WEXITSTATUS(status)}"


def spawn_reference(req: dict, ctx: dict, use_cuda: bool, dirs: dict) -> ReferencePeer:
    """Fork the reference process (:func:`.judge.referee.main`), which loads the ORIGINAL file's
    harness in isolation, and return the judge's handle. Call after :func:`spawn` and before
    CUDA is initialised in the judge."""
    setup = {
        "harness_source": req["harness_source"],
        "source_name": str(req.get("source_name") or "candidate.py"),
        "project": project_of(req),
        "use_cuda": use_cuda,
        "dirs": peer_dirs(dirs, "reference"),  # issue 53: outside the candidate's
        "memory_limit_mb": int(req.get("memory_limit_mb") or 8192),
        "judge": os.getpid(),
    }
    body = lambda fds: referee.main(fds, setup)  # noqa: E731
    peer = fork_peer(req, ctx, body, ReferencePeer)
    peer.wait_s = min(HARNESS_WAIT_CAP_S, 0.5 * float(req.get("timeout_s") or 120.0))
    return peer
