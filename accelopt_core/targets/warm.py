"""Warm workers on this machine: one long-lived fork server per target (issues 14 and 33).

A :class:`WarmWorker` is the process :mod:`accelopt_core.onsite.process.zygote` (``python -c BOOTSTRAP``
with ``bundle("process.zygote")`` on its stdin): it has imported torch and triton once, without
initialising CUDA, and forks one supervisor per request, which runs the cold path's own
supervision (timeout, memory limit, crash classification, static gate). One worker serves all
of a target's evaluation slots at once (its requests carry ids); cancelling one evaluation
stops only its supervisor. :class:`WarmSlots` keeps that worker and replaces one that died, was
killed or runs a stale stack (another python, other torch/triton/numpy/neuronxcc versions,
another event loop).

No worker outlives its owner: the zygote gets ``PR_SET_PDEATHSIG`` = SIGKILL (Linux) and exits
at end-of-file on its stdin, which this process's death closes (``kill -9`` included); its
supervisors and their children have the same rule towards their parents.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import struct
from importlib import metadata

from accelopt_core.onsite.process.warmhost import exited
from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.onsite.sandbox.scratch import sweep
from accelopt_core.settings import Settings
from accelopt_core.targets.sandbox import local_worker
from accelopt_core.targets.shipping import bundle, worker_argv

#: Seconds a warm worker may take to import the stack and say hello.
START_TIMEOUT_S = 120.0
#: Bytes of a warm worker's own stderr kept for messages (the candidates' stderr is per child).
_STDERR_TAIL = 4000
#: Seconds a killed warm worker gets between SIGTERM and SIGKILL.
_TERM_GRACE_S = 0.3
#: Seconds a cancelled evaluation's supervisor may take to stop (the zygote gives it 0.3 s
#: between SIGTERM and SIGKILL) before the whole worker is killed.
CANCEL_WAIT_S = 5.0


def stack_stamp(python: str) -> tuple[str, ...]:
    """What a warm worker's imports depend on: the python and the installed versions of
    torch, triton, numpy and neuronxcc (a change restarts the slot's worker)."""
    stamp = [python]
    for dist in ("torch", "triton", "numpy", "neuronxcc"):
        try:
            stamp.append(metadata.version(dist))
        except metadata.PackageNotFoundError:
            stamp.append("-")
    return tuple(stamp)


class WarmWorkerError(Exception):
    """The warm worker could not start, or died without answering."""


class WarmWorker:
    """One running zygote and its pipes; several requests may be in flight at once.

    Attributes:
        proc: the ``asyncio.subprocess.Process``.
        hello: what it said at start (``pid``, ``versions``, ``preloaded`` modules).
        stamp: :func:`stack_stamp` when it started.
        loop: the event loop its pipes belong to.
        busy: evaluations that hold it (:meth:`WarmSlots.take` / :meth:`WarmSlots.give`).
    """

    def __init__(self, proc: asyncio.subprocess.Process, stamp: tuple[str, ...]) -> None:
        self.proc = proc
        self.stamp = stamp
        self.loop = asyncio.get_running_loop()
        self.hello: dict = {}
        self.busy = 0
        self._stderr = bytearray()
        self._drain = asyncio.ensure_future(self._read_stderr())
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._watch: dict[int, tuple[set[int] | None, list[int]]] = {}
        self._ended: WarmWorkerError | None = None
        self._replies: asyncio.Future | None = None

    @classmethod
    async def start(cls, python: str, settings: Settings | None = None) -> WarmWorker:
        """Start a zygote with ``python`` (in the sandbox's allowlisted environment, with the
        extra names of ``settings``: :func:`accelopt_core.targets.sandbox.local_worker`) and
        wait for its hello.

        Raises:
            WarmWorkerError: it could not be started or did not say hello.
        """
        stamp = await asyncio.to_thread(stack_stamp, python)
        argv, env = local_worker(worker_argv(python), settings or Settings())
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise WarmWorkerError(f"cannot start the warm worker ({python}): {exc}") from exc
        worker = cls(proc, stamp)
        try:
            proc.stdin.write(bundle("process.zygote"))
            worker.hello = json.loads(await asyncio.wait_for(worker._frame(b"H"), START_TIMEOUT_S))
        except BaseException as exc:
            await asyncio.shield(worker.kill())
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise WarmWorkerError(f"the warm worker did not start: {worker.death()}") from exc
        worker._replies = asyncio.ensure_future(worker._read_replies())
        return worker

    @property
    def alive(self) -> bool:
        """The process runs, its output has not ended and its pipes belong to the running
        event loop.

        The kernel is asked too (:func:`~accelopt_core.onsite.process.warmhost.exited`):
        ``proc.returncode`` is set by asyncio's child watcher a loop iteration or more after
        the death, later still on a loaded machine, and a request sent to a worker that died
        while idle would fail its candidate."""
        return (
            self._ended is None
            and self.proc.returncode is None
            and self.loop is asyncio.get_running_loop()
            and not exited(self.proc.pid)
        )

    async def _read_stderr(self) -> None:
        while chunk := await self.proc.stderr.read(65536):
            self._stderr += chunk
            del self._stderr[: max(0, len(self._stderr) - _STDERR_TAIL)]

    async def _next_frame(self) -> tuple[bytes, bytes] | None:
        """The next frame's kind and body; None at end-of-file."""
        try:
            head = await self.proc.stdout.readexactly(9)
            return head[:1], await self.proc.stdout.readexactly(struct.unpack("<Q", head[1:])[0])
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    async def _frame(self, kind: bytes) -> bytes:
        """The body of the next frame, which must be a ``kind`` frame. Raises WarmWorkerError
        at end-of-file or for another kind."""
        frame = await self._next_frame()
        if frame is None:
            raise WarmWorkerError(self.death())
        if frame[0] != kind:
            raise WarmWorkerError(f"unexpected frame from the warm worker: {frame[0]!r}")
        return frame[1]

    async def _read_replies(self) -> None:
        """Hand the zygote's ``P`` (supervisor pid) and ``A`` (result) frames to the requests
        in flight; at end-of-file (or a frame it cannot read) fail them all."""
        reason = None  # end-of-file: how the process ended, once asyncio knows
        while (frame := await self._next_frame()) is not None:
            kind, body = frame
            if kind == b"P" and len(body) == 8:
                rid, pid = struct.unpack("<II", body)
                if rid in self._watch:
                    pids, mine = self._watch[rid]
                    mine.append(pid)
                    if pids is not None:
                        pids.add(pid)
            elif kind == b"A" and len(body) >= 4:
                future = self._pending.pop(struct.unpack("<I", body[:4])[0], None)
                if future is not None and not future.done():
                    future.set_result(body[4:])
            else:
                reason = f"unexpected frame from the warm worker: {kind!r}"
                break
        if reason is None:
            with contextlib.suppress(asyncio.TimeoutError):  # its exit status, for the message
                await asyncio.wait_for(self.proc.wait(), 1.0)
            reason = self.death()
        self._ended = WarmWorkerError(reason)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._ended)
        self._pending.clear()

    def death(self) -> str:
        """How the worker ended (``was killed by SIGKILL``), with its stderr tail."""
        from accelopt_core.onsite.protocol import signal_name, tail

        rc = self.proc.returncode
        if rc is None:
            how = "closed its output"
        elif rc < 0:
            how = f"was killed by {signal_name(-rc)}"
        else:
            how = f"exited with code {rc}"
        err = tail(bytes(self._stderr), 1500)
        return f"the warm worker {how}" + (f"; stderr: {err}" if err else "")

    def _send(self, kind: bytes, body: bytes) -> None:
        self.proc.stdin.write(kind + struct.pack("<Q", len(body)) + body)

    async def evaluate(
        self, request: EvalRequest | dict, pids: set[int] | None = None
    ) -> EvalResult:
        """Send one request, return its result. Other requests may be in flight.

        ``pids``: a set that holds the request's supervisor pid while it runs.
        Cancelling the awaiting task asks the zygote to stop this evaluation (its supervisor
        and candidate), waits up to :data:`CANCEL_WAIT_S` for it, and kills the whole worker
        when the zygote does not answer.

        Raises:
            WarmWorkerError: the worker died (or was killed) before answering.
        """
        if self._ended is not None:
            raise self._ended
        body = json.dumps(request.to_dict() if isinstance(request, EvalRequest) else request)
        rid = next(self._ids)
        future = self.loop.create_future()
        self._pending[rid] = future
        self._watch[rid] = (pids, mine := [])
        try:
            try:
                self._send(b"N", struct.pack("<I", rid) + body.encode())
                await self.proc.stdin.drain()
            except (ConnectionError, RuntimeError) as exc:
                raise WarmWorkerError(self.death()) from exc
            try:
                reply = await asyncio.shield(future)
            except asyncio.CancelledError:
                await asyncio.shield(self._cancel(rid, future))
                raise
        finally:
            self._pending.pop(rid, None)
            self._watch.pop(rid, None)
            if pids is not None:
                pids.difference_update(mine)
        try:
            return EvalResult.from_dict(json.loads(reply))
        except (TypeError, ValueError) as exc:
            return EvalResult.failure("runtime_error", f"malformed worker result: {exc}")

    async def _cancel(self, rid: int, future: asyncio.Future) -> None:
        """Stop request ``rid`` in the zygote and wait for its answer (its supervisor reaped);
        kill the worker when none comes within :data:`CANCEL_WAIT_S`."""
        if self._ended is None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                self._send(b"K", struct.pack("<I", rid))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(future), CANCEL_WAIT_S)
        if not future.done():
            await self.kill()

    async def kill(self) -> None:
        """SIGTERM the zygote's process group (it and its supervisors kill their candidates),
        then SIGKILL; wait for it; remove the scratch directories it could not
        (:func:`accelopt_core.onsite.sandbox.scratch.sweep`). Idempotent."""
        for sig, wait in ((signal.SIGTERM, _TERM_GRACE_S), (signal.SIGKILL, 5.0)):
            if self.proc.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), timeout=wait)
        for task in (self._drain, self._replies):
            if task is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, 1.0)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        await asyncio.to_thread(sweep)  # the scratch directories a killed zygote left


class WarmSlots:
    """The warm worker of one target: one zygote serves every slot (a device, or ``None`` for
    a CPU slot) at once, so a target imports torch once, not once per slot (issue 33). A
    worker is taken for one evaluation and given back after it. A stale worker (dead, another
    event loop, another stack) is replaced at the next :meth:`take`; one that is stale only by
    its stack finishes the evaluations it holds first.

    Args:
        python: the interpreter the worker runs.
        settings: its extra environment names (``accelopt.evaluation.environment``).
    """

    def __init__(self, python: str, settings: Settings | None = None) -> None:
        self._python = python
        self._settings = settings
        self._worker: WarmWorker | None = None
        self._retired: list[WarmWorker] = []
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._killing: set[asyncio.Future] = set()  # retired workers being killed
        self.pids: set[int] = set()  # every running warm worker (diagnostics, tests)

    def _starting(self) -> asyncio.Lock:
        """The lock that lets one :meth:`take` start the worker while the others wait (one
        per event loop)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]

    async def take(self, key: str | None = None) -> WarmWorker:
        """The live worker with the current stack, else a new one; held until :meth:`give`.
        ``key`` (the slot) does not choose the worker: every slot shares it.

        Raises:
            WarmWorkerError: a new worker could not start.
        """
        stamp = await asyncio.to_thread(stack_stamp, self._python)
        async with self._starting():
            worker = self._worker
            if worker is None or not (worker.alive and worker.stamp == stamp):
                if worker is not None:
                    self._worker = None
                    if worker.alive and worker.busy:  # another stack: let it finish its work
                        self._retired.append(worker)
                    else:
                        await self.discard(worker)
                worker = await WarmWorker.start(self._python, self._settings)
                self.pids.add(worker.proc.pid)
                self._worker = worker
            worker.busy += 1
            return worker

    def give(self, key: str | None, worker: WarmWorker) -> None:
        """An evaluation is done with ``worker``; a retired worker that nothing holds is
        killed."""
        worker.busy = max(0, worker.busy - 1)
        if worker in self._retired and not worker.busy:
            self._retired.remove(worker)
            task = asyncio.ensure_future(self.discard(worker))
            self._killing.add(task)
            task.add_done_callback(self._killing.discard)

    async def discard(self, worker: WarmWorker) -> None:
        """Kill ``worker`` (the next :meth:`take` starts a new one)."""
        self.pids.discard(worker.proc.pid)
        if self._worker is worker:
            self._worker = None
        if worker in self._retired:
            self._retired.remove(worker)
        if worker.loop is asyncio.get_running_loop():
            await worker.kill()
        else:  # its loop is gone or another: its pipes cannot be awaited here
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.proc.pid, signal.SIGKILL)

    async def close(self) -> None:
        """Kill the workers that no evaluation holds; one that is held is killed when its last
        evaluation gives it back (as a cold worker belongs to its evaluation). Idempotent."""
        worker, self._worker = self._worker, None
        if worker is not None and worker.busy and worker.alive:
            self._retired.append(worker)
        elif worker is not None:
            await self.discard(worker)
        for worker in [w for w in self._retired if not w.busy]:
            await self.discard(worker)
