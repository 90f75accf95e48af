"""The candidate process (issue 10): forked by the judge (:mod:`.judge.peers`), it is the only process
that imports the candidate's code, and it only returns raw material: output segments, timing
samples, launch counts.

Set-up right after the fork (:func:`isolate`): every fd but 0, 1, 2 and its two channel pipes
closed (the judge's result pipe is out of reach), death with the judge (``PR_SET_PDEATHSIG``),
root's capabilities dropped (so the same uid cannot ptrace the non-dumpable judge or
supervisor, or open their fds through ``/proc``), an empty private working directory and
temporary directory (``TMPDIR``/``TEMP``/``TMP``), the memory limit (``RLIMIT_AS`` on CPU), a
traceback dump just before the supervisor's deadline.

Then it serves the judge's requests over :mod:`.runtime.channel` (:func:`serve`), one JSON line each:

- first, unasked: ``{"loaded": true}`` or ``{"error": result}`` (the candidate failed to load);
- ``{"op": "check", "inputs": segment[, "config": i]}``: call the entry on the inputs (a
  sealed segment mapped privately, :mod:`.runtime.exchange`; with every ``@triton.autotune``
  kernel pinned to config ``i``, interpreter only); answer ``{"launches": n, "call_ms": t,
  "configs": c, "kernels": {...}, "outputs": segment, "after": segment}`` (the outputs, exact
  types recorded, and the inputs after the call, each in a new sealed segment; ``c``: the
  most autotune configs of a kernel of the candidate, 1 without autotune; ``kernels``: launches
  and interpreter ms per kernel of the candidate, :meth:`.contestant.launches.LaunchCounter.take_kernels`);
- ``{"op": "time", "buffers": segment, "pool": [segment, ...], "warmup_ms", "rep_ms",
  "min_reps", "clock"}``: map the timing buffers and the pool, :func:`.contestant.timing.run_timed` (warm-up on the buffers, then
  one timed call per pool entry, on CPU timed by ``clock``: ``"cpu"``, this process's CPU time,
  or ``"wall"``); answer ``{"samples_ms", "launches", "pool_index", "chosen"}`` (``chosen``:
  the config each autotuned kernel used, :func:`.contestant.autotune.chosen`);
- ``{"op": "send", "reps": [i, ...]}``: the outputs of those timed repetitions; answer
  ``{"sent": [segment, ...]}``;
- ``{"op": "exit"}``.

A call that raises answers ``{"error": result}`` (:func:`.runtime.failures.classify`).
"""

from __future__ import annotations

import os
import sys
import time

from ..runtime import clocks, exchange
from ..runtime.channel import Channel, serve_requests
from ..runtime.device import arm_hang_dump, limit_address_space
from ..runtime.failures import classify
from ..runtime.loading import CANDIDATE_MODULE, load_candidate
from ..sandbox.policy import close_unix_sockets

__all__ = ["CANDIDATE_MODULE", "isolate", "main", "serve"]

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522


def _drop_capabilities(libc) -> None:
    """Drop every capability (bounding, ambient, effective, permitted, inheritable) and set
    no-new-privileges: a root candidate keeps uid 0 but loses ``CAP_SYS_PTRACE``,
    ``CAP_DAC_OVERRIDE`` ..., also across ``execve``. Errors are ignored (non-root: nothing
    to drop)."""
    import ctypes

    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if hasattr(libc, "capset"):
        libc.capset(ctypes.byref(header), ctypes.byref(data))


def isolate(chan_fds: tuple[int, ...], dirs: dict, signum: int, judge: int) -> tuple[int, ...]:
    """Right after the fork: keep fds 0, 1, 2 and the channel's (its read and write pipes and
    its segment socket, :class:`.runtime.channel.Channel`: moved to 3, 4 and 5, returned),
    close every other fd, die with the judge (pid ``judge``, signal ``signum``), drop
    capabilities, move into ``dirs["cwd"]`` with ``dirs["tmp"]`` as the temporary directory.
    Linux calls are skipped where unavailable."""
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in chan_fds]  # above 5
    for i, fd in enumerate(high):
        os.dup2(fd, 3 + i, inheritable=False)
    os.closerange(3 + len(high), _max_fd())
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        _drop_capabilities(libc)
    except (OSError, AttributeError):
        pass
    if os.getppid() != judge:  # the judge died before the death signal was armed
        os._exit(1)
    os.chdir(dirs["cwd"])
    os.environ["HOME"] = dirs["cwd"]  # issue 53: each process's own (the judge set its own)
    for var in ("TMPDIR", "TEMP", "TMP"):
        os.environ[var] = dirs["tmp"]
    import tempfile

    tempfile.tempdir = dirs["tmp"]
    return tuple(range(3, 3 + len(high)))


def _max_fd() -> int:
    """One more than the highest fd this process may have."""
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 4096


class _Contestant:
    """The candidate's entry, its launch counter and the state between requests."""

    def __init__(self, chan: Channel, setup: dict, ctx: dict) -> None:
        import torch

        self.chan = chan
        self.torch = torch
        self.use_cuda = bool(setup["use_cuda"])
        self.device = "cuda" if self.use_cuda else "cpu"
        self.ctx = ctx
        self.entry = None
        self.module = None
        self.counter = None
        self.timed = None
        try:
            import numpy
        except ImportError:
            numpy = None
        self.numpy = numpy

    def sync(self) -> None:
        if self.use_cuda:
            self.torch.cuda.synchronize()

    def load(self, source: str, entry: str, project: dict | None) -> dict:
        """Load the candidate (as its real module inside its project when the request has
        one) and install the launch counter: the first message."""
        from .launches import LaunchCounter

        try:
            name, self.entry = load_candidate(source, self.ctx["cand_file"], entry, project)
        except BaseException as exc:  # noqa: BLE001 - classified for the judge
            return {"error": classify(exc, "load", self.ctx)}
        self.module = sys.modules.get(name)
        self.counter = LaunchCounter(name)
        self.counter.install()
        return {"loaded": True}

    def _read(self, segment) -> object:
        """The value of a segment the judge sent (mapped privately: this process's writes stay
        in its own pages), on this process's device; the descriptor is closed."""
        if not isinstance(segment, exchange.Segment):
            raise TypeError("the judge sent no segment")
        try:
            return segment.value(self.torch, self.device)
        finally:
            segment.close()

    def _share(self, obj) -> exchange.Segment:
        """``obj`` in a sealed segment for the judge (sent, then closed, by the request
        loop)."""
        return exchange.share(_compact(self.torch, obj), torch=self.torch, numpy=self.numpy)

    def check(self, msg: dict) -> dict:
        """One correctness call; with ``config``: with every ``@triton.autotune`` kernel of
        the candidate pinned to that config (interpreter only, :mod:`.contestant.autotune`). The answer
        gives the number of autotune configs the judge may ask for."""
        from . import autotune

        inputs = tuple(self._read(msg["inputs"]))
        config = msg.get("config")
        if config is not None:
            autotune.pin(self.module, int(config))
        call = self._call(msg)
        self.counter.take()
        self.counter.take_kernels()
        t0 = time.perf_counter()
        out = call(*inputs)
        self.sync()
        call_ms = (time.perf_counter() - t0) * 1000.0
        launches = self.counter.take()
        if config is not None:
            autotune.pin(self.module, 0)  # back to the deterministic pick that is timed
        configs = autotune.config_count(self.module) if self.module is not None else 1
        kernels = self.counter.take_kernels()
        return {
            "launches": launches,
            "call_ms": call_ms,
            "configs": configs,
            "kernels": kernels,
            "outputs": self._share(out),
            "after": self._share(inputs),
        }

    def _call(self, msg: dict, timed: bool = False):
        """The entry, or with ``grad_inputs`` in ``msg`` (``BENCH["backward"]``) forward +
        backward of it (:func:`.contestant.backward.forward_backward`: the inputs at those positions get
        ``requires_grad``; upstream gradient seeded by ``grad_seed``, all ones when timed)."""
        if "grad_inputs" not in msg:
            return self.entry
        from .backward import forward_backward, with_grad

        indices = [int(i) for i in msg["grad_inputs"]]
        seed = None if timed else int(msg["grad_seed"])
        torch, entry = self.torch, self.entry
        return lambda *a: forward_backward(entry, with_grad(a, indices), seed, torch)

    def time(self, msg: dict) -> dict:
        """Warm-up on the timing buffers, then the timed repetitions over the pool
        (:func:`.contestant.timing.run_timed`)."""
        from .timing import run_timed

        buffers = tuple(self._read(msg["buffers"]))
        pool = [tuple(self._read(entry)) for entry in msg["pool"]]
        self.timed = run_timed(
            self._call(msg, timed=True),
            buffers,
            pool,
            torch=self.torch,
            use_cuda=self.use_cuda,
            counter=self.counter,
            rep_ms=float(msg["rep_ms"]),
            warmup_ms=float(msg["warmup_ms"]),
            min_reps=int(msg["min_reps"]),
            max_warmup_calls=int(msg.get("max_warmup_calls") or 1),
            clock=clocks.CPU if msg.get("clock") == clocks.CPU else clocks.WALL,
        )
        from .autotune import chosen

        return {
            "chosen": chosen(self.module) if self.module is not None else {},
            "samples_ms": [float(s) for s in self.timed.samples_ms],
            "launches": [int(n) for n in self.timed.launches],
            "pool_index": [int(i) for i in self.timed.pool_index],
        }

    def send(self, msg: dict) -> dict:
        """The outputs of the timed repetitions the judge picked, one segment each."""
        return {"sent": [self._share(self.timed.outputs[int(rep)]) for rep in msg["reps"]]}


def _compact(torch, obj):
    """``obj`` with every tensor that views a larger storage cloned (a segment holds a view's
    whole storage)."""
    if type(obj) is torch.Tensor:
        obj = obj.detach()
        if obj.untyped_storage().nbytes() > obj.numel() * obj.element_size():
            return obj.clone()
        return obj
    if type(obj) in (tuple, list):
        return type(obj)(_compact(torch, o) for o in obj)
    return obj


def serve(chan: Channel, setup: dict, ctx: dict) -> None:
    """Load the candidate, then answer the judge's requests until ``exit`` or the end of the
    channel; never returns."""
    me = _Contestant(chan, setup, ctx)
    _guard_writes(chan, setup["dirs"])
    first = me.load(setup["candidate_source"], setup["entry"], setup.get("project"))
    chan.send(first)
    if "error" in first:
        os._exit(0)
    handlers = {"check": me.check, "time": me.time, "send": me.send}
    serve_requests(chan, handlers, lambda exc, _msg: classify(exc, "run", ctx))


def _guard_writes(chan: Channel, dirs: dict) -> None:
    """Issue 53, item 5: before the candidate loads, refuse each attempt to write outside the
    evaluation's directories and report it to the judge (:func:`..sandbox.writes.guard_process`)."""
    from ..sandbox.writes import guard_process

    guard_process(dirs, chan.send)


def main(chan_fds: tuple[int, ...], setup: dict, ctx: dict) -> None:
    """The candidate process's body after the fork (``setup``: ``candidate_source``,
    ``entry``, ``use_cuda``, ``dirs``, ``deadline`` (monotonic s), ``memory_limit_mb``,
    ``judge`` (its pid));
    never returns."""
    import faulthandler
    import signal

    try:
        fds = isolate(chan_fds, setup["dirs"], signal.SIGKILL, setup["judge"])
        close_unix_sockets(bool(setup["use_cuda"]))
        faulthandler.enable(file=sys.stderr)
        left = setup["deadline"] - time.monotonic()
        arm_hang_dump(max(left, 0.1))
        if not setup["use_cuda"]:
            limit_address_space(int(setup["memory_limit_mb"]) * 1024 * 1024)
        from .autotune import prepare

        prepare(not setup["use_cuda"])  # autotuned kernels under the interpreter
        serve(Channel(*fds), setup, ctx)
    finally:
        os._exit(1)
