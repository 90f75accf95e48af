"""Warm workers on this machine: one long-lived fork server per evaluation slot (issue 14).

A :class:`WarmWorker` is the process :mod:`accelopt_core.onsite.process.zygote` (``python -c BOOTSTRAP``
with ``bundle("process.zygote")`` on its stdin): it has imported torch and triton once, without
initialising CUDA, and forks one child per request through the cold path's own supervisor
(timeout, memory limit, crash classification, static gate). :class:`WarmSlots` keeps the idle
workers of a target by slot (device, or CPU slot) and replaces one that died, was killed or
runs a stale stack (another python, other torch/triton/numpy/neuronxcc versions, another
event loop).

No worker outlives its owner: the zygote gets ``PR_SET_PDEATHSIG`` = SIGKILL (Linux) and exits
at end-of-file on its stdin, which this process's death closes (``kill -9`` included); its
children have the same rule towards it.
"""

from __future__ import annotations

import asyncio
import contextlib
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
#: Seconds a cancelled or timed-out warm worker gets between SIGTERM and SIGKILL.
_TERM_GRACE_S = 0.3


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
    """One running zygote and its pipes.

    Attributes:
        proc: the ``asyncio.subprocess.Process``.
        hello: what it said at start (``pid``, ``versions``, ``preloaded`` modules).
        stamp: :func:`stack_stamp` when it started.
        loop: the event loop its pipes belong to.
    """

    def __init__(self, proc: asyncio.subprocess.Process, stamp: tuple[str, ...]) -> None:
        self.proc = proc
        self.stamp = stamp
        self.loop = asyncio.get_running_loop()
        self.hello: dict = {}
        self._stderr = bytearray()
        self._drain = asyncio.ensure_future(self._read_stderr())

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
        return worker

    @property
    def alive(self) -> bool:
        """The process runs and its pipes belong to the running event loop.

        The kernel is asked too (:func:`~accelopt_core.onsite.process.warmhost.exited`):
        ``proc.returncode`` is set by asyncio's child watcher a loop iteration or more after
        the death, later still on a loaded machine, and a request sent to a worker that died
        while idle would fail its candidate."""
        return (
            self.proc.returncode is None
            and self.loop is asyncio.get_running_loop()
            and not exited(self.proc.pid)
        )

    async def _read_stderr(self) -> None:
        while chunk := await self.proc.stderr.read(65536):
            self._stderr += chunk
            del self._stderr[: max(0, len(self._stderr) - _STDERR_TAIL)]

    async def _frame(self, kind: bytes) -> bytes:
        """The body of the next ``kind`` frame. Raises WarmWorkerError at end-of-file."""
        try:
            head = await self.proc.stdout.readexactly(9)
            if head[:1] != kind:
                raise WarmWorkerError(f"unexpected frame from the warm worker: {head!r}")
            return await self.proc.stdout.readexactly(struct.unpack("<Q", head[1:])[0])
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise WarmWorkerError(self.death()) from exc

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

    async def evaluate(self, request: EvalRequest | dict) -> EvalResult:
        """Send one request, return its result.

        Raises:
            WarmWorkerError: the worker died (or was killed) before answering.
        """
        body = json.dumps(request.to_dict() if isinstance(request, EvalRequest) else request)
        data = body.encode()
        try:
            self.proc.stdin.write(b"E" + struct.pack("<Q", len(data)) + data)
            await self.proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise WarmWorkerError(self.death()) from exc
        reply = await self._frame(b"R")
        try:
            return EvalResult.from_dict(json.loads(reply))
        except (TypeError, ValueError) as exc:
            return EvalResult.failure("runtime_error", f"malformed worker result: {exc}")

    async def kill(self) -> None:
        """SIGTERM the zygote (it kills its running child's process group), then SIGKILL;
        wait for it; remove the scratch directories it could not
        (:func:`accelopt_core.onsite.sandbox.scratch.sweep`). Idempotent."""
        for sig, wait in ((signal.SIGTERM, _TERM_GRACE_S), (signal.SIGKILL, 5.0)):
            if self.proc.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), timeout=wait)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._drain, 1.0)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        await asyncio.to_thread(sweep)  # the scratch directories a killed zygote left


class WarmSlots:
    """The idle warm workers of one target, by slot key (a device, or ``None`` for a CPU slot:
    CPU workers are interchangeable). A worker is taken for one evaluation and given back
    after it; at most one per held slot exists at a time.

    Args:
        python: the interpreter the workers run.
        settings: their extra environment names (``accelopt.evaluation.environment``).
    """

    def __init__(self, python: str, settings: Settings | None = None) -> None:
        self._python = python
        self._settings = settings
        self._idle: dict[str | None, list[WarmWorker]] = {}
        self.pids: set[int] = set()  # every running warm worker (diagnostics, tests)

    async def take(self, key: str | None) -> WarmWorker:
        """An idle live worker of ``key`` with the current stack, else a new one.

        Raises:
            WarmWorkerError: a new worker could not start.
        """
        stamp = await asyncio.to_thread(stack_stamp, self._python)
        idle = self._idle.get(key, [])
        while idle:
            worker = idle.pop()
            if worker.alive and worker.stamp == stamp:
                return worker
            await self.discard(worker)
        worker = await WarmWorker.start(self._python, self._settings)
        self.pids.add(worker.proc.pid)
        return worker

    def give(self, key: str | None, worker: WarmWorker) -> None:
        """Return ``worker`` to the idle list of ``key``."""
        self._idle.setdefault(key, []).append(worker)

    async def discard(self, worker: WarmWorker) -> None:
        """Kill ``worker`` (the slot gets a new one next time)."""
        self.pids.discard(worker.proc.pid)
        if worker.loop is asyncio.get_running_loop():
            await worker.kill()
        else:  # its loop is gone or another: its pipes cannot be awaited here
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.proc.pid, signal.SIGKILL)

    async def close(self) -> None:
        """Kill every idle worker. Idempotent."""
        idle, self._idle = self._idle, {}
        for workers in idle.values():
            for worker in workers:
                await self.discard(worker)
