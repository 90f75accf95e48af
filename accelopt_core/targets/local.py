"""The ``local`` target: evaluations in worker processes on this machine.

Warm (``accelopt.evaluation.warmWorkers``, the default): one warm worker serves every slot
(:mod:`.warm`: torch and triton imported once, one forked supervisor per candidate). Cold: each
evaluation is a fresh worker, ``[sys.executable, "-c", BOOTSTRAP]`` with the worker source and
the request on stdin (:mod:`accelopt_core.targets.shipping`), exactly as on remote targets.
Processes are started with :func:`asyncio.create_subprocess_exec` in their own session, so the
event loop never blocks and a cancelled evaluation takes its whole process group down, in the
sandbox's allowlisted environment (no API keys; :mod:`accelopt_core.targets.sandbox`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib import metadata

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.onsite.sandbox.scratch import sweep
from accelopt_core.settings import Settings
from accelopt_core.targets.base import nki_tag
from accelopt_core.targets.pool import DevicePool, pinned
from accelopt_core.targets.sandbox import local_worker
from accelopt_core.targets.shipping import decode_result, encode_stdin, worker_argv
from accelopt_core.targets.warm import WarmSlots, WarmWorkerError

#: Seconds a cancelled or timed-out worker gets between SIGTERM and SIGKILL.
_TERM_GRACE_S = 0.3


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


#: ``python -c`` tail run after the source of :mod:`accelopt_core.onsite.runtime.stacks` (standard
#: library only): print the NKI stack as the workers will see it.
_NKI_STACK_MAIN = "\nimport json as _json\nprint(_json.dumps(stack()))\n"


def _sdk_findable(path: list[str]) -> bool:
    """True when ``nki`` or ``neuronxcc`` is importable from ``path`` (no import)."""
    from importlib.machinery import PathFinder

    return any(PathFinder.find_spec(name, path) is not None for name in ("nki", "neuronxcc"))


def discover_nki_stack(python: str) -> dict:
    """The NKI stack the workers started with ``python`` and this environment will find
    (:func:`accelopt_core.onsite.runtime.stacks.stack`: SDK version, ``nki_mode`` device or
    simulated, platform, LNC), for the fingerprint; ``{}`` without an SDK.

    For this interpreter, an SDK on neither ``PYTHONPATH`` nor ``sys.path`` costs no process;
    otherwise the stack is read by ``python -c`` (0.1-0.6 s, once per target). A probe that
    fails gives ``{"nki_api": "unknown"}`` (a fingerprint no probed target has)."""
    if python == sys.executable:
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if not _sdk_findable(extra + sys.path):
            return {}
    from importlib import resources

    source = (
        resources.files("accelopt_core.onsite.runtime").joinpath("stacks.py").read_text("utf-8")
    )
    try:
        done = subprocess.run(
            [python, "-c", source + _NKI_STACK_MAIN], capture_output=True, text=True, timeout=60
        )
        stack = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {"nki_api": "unknown"}
    return stack if isinstance(stack, dict) else {"nki_api": "unknown"}


def discover_gpus() -> list[str]:
    """Names of the CUDA GPUs this process may use, without initialising CUDA here.

    ``CUDA_VISIBLE_DEVICES`` restricts the list (empty or ``-1``: none); the names come from
    ``nvidia-smi -L`` (no nvidia-smi: no GPUs). Blocking, ~0.1 s; called once per target.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return []
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    names = []
    for line in out.splitlines():
        if line.startswith("GPU ") and ":" in line:
            names.append(line.split(":", 1)[1].split("(UUID")[0].strip())
    if visible is not None:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if all(i.isdigit() for i in ids):
            names = [names[int(i)] for i in ids if int(i) < len(names)]
        else:  # UUIDs / MIG ids: count only
            names = names[: len(ids)]
    return names


class LocalTarget:
    """Evaluates candidates in worker subprocesses on this machine.

    Capacity: one evaluation per visible CUDA GPU (each pinned to its own device), else
    ``settings.evaluation.cpu_slots`` concurrent Triton-interpreter evaluations. With
    ``settings.evaluation.warm_workers`` one warm worker serves the slots (:class:`.warm.WarmSlots`).

    Attributes:
        name: ``"local"``.
        devices: device indices handed out (``["0", "1"]``), or empty on CPU.
        nki_stack: the NKI stack the workers find (:func:`discover_nki_stack`), ``{}`` without
            a Neuron SDK.
        warm: the warm workers, or None on the cold path.
        active_pids: pids of the supervisors evaluating right now (the cold workers, or the
            warm worker's forks; for diagnostics and tests).
    """

    name = "local"

    def __init__(self, settings: Settings, python: str | None = None) -> None:
        self._python = python or sys.executable
        gpus = discover_gpus()
        self.devices: list[str] = [str(i) for i in range(len(gpus))]
        self._pool = DevicePool(self.devices, cpu_slots=settings.evaluation.cpu_slots)
        names = ",".join(sorted(set(gpus))) or "cpu"
        self.nki_stack = discover_nki_stack(self._python)
        self._fingerprint = (
            f"local:{names}:torch-{_version('torch')}:triton-{_version('triton')}"
            + nki_tag(self.nki_stack)
        )
        self.active_pids: set[int] = set()
        self._settings = settings
        self.warm = WarmSlots(self._python, settings) if settings.evaluation.warm_workers else None

    @property
    def fingerprint(self) -> str:
        """``local:<device names>:torch-X:triton-Y`` (package versions from metadata), then
        :func:`~accelopt_core.targets.base.nki_tag` of :attr:`nki_stack` where there is a
        Neuron SDK (``:nki-0.7.0:nki-simulated``)."""
        return self._fingerprint

    @property
    def capacity(self) -> int:
        """Visible CUDA GPUs, else ``settings.evaluation.cpu_slots``."""
        return self._pool.capacity

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        """Run one request in the slot's warm worker (or a fresh cold one); never raises for
        a bad candidate.

        ``eval_s`` of the result is the wall time including process start. An outer timeout
        (``timeout_s + 10 s + 10 %``) kills the worker as a last resort (status ``timeout``).
        Cancelling the awaiting task kills the worker's process group and frees the slot.
        """
        async with self._pool.slot() as device:
            if self.warm is not None:
                return await self._run_warm(pinned(request, device), device)
            return await self._run(pinned(request, device))

    async def _run_warm(self, request: EvalRequest, device: str | None) -> EvalResult:
        """One request on the target's warm worker (shared by the slots). An evaluation past
        the outer timeout, or cancelled, is stopped in the worker (its supervisor and
        candidate); a worker that died, or did not stop it, is killed (the next evaluation
        starts a new one)."""
        start = time.monotonic()
        try:
            worker = await self.warm.take(device)
        except WarmWorkerError as exc:
            return EvalResult.failure("runtime_error", str(exc), eval_s=0.0)
        outer = request.timeout_s * 1.1 + 10.0
        try:
            result = await asyncio.wait_for(
                worker.evaluate(request, self.active_pids), timeout=outer
            )
        except asyncio.TimeoutError:
            return EvalResult.failure(
                "timeout",
                f"the worker gave no result within {outer:.0f} s; the evaluation was killed",
                eval_s=time.monotonic() - start,
            )
        except WarmWorkerError as exc:
            await self.warm.discard(worker)
            result = EvalResult.failure("runtime_error", f"{exc} without a result")
        finally:
            self.warm.give(device, worker)
        result.eval_s = time.monotonic() - start
        return result

    async def _run(self, request: EvalRequest) -> EvalResult:
        start = time.monotonic()
        argv, env = local_worker(worker_argv(self._python), self._settings)
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
            return EvalResult.failure(
                "runtime_error", f"cannot start the worker ({self._python}): {exc}", eval_s=0.0
            )
        self.active_pids.add(proc.pid)
        outer = request.timeout_s * 1.1 + 10.0
        try:
            stdout, stderr = await asyncio.wait_for(
                proc.communicate(encode_stdin(request)), timeout=outer
            )
        except asyncio.TimeoutError:
            await self._kill(proc)
            return EvalResult.failure(
                "timeout",
                f"the worker gave no result within {outer:.0f} s and was killed",
                eval_s=time.monotonic() - start,
            )
        except BaseException:  # cancelled: take the worker's process group down, then re-raise
            await asyncio.shield(self._kill(proc))
            raise
        finally:
            self.active_pids.discard(proc.pid)
        result = decode_result(stdout, stderr, proc.returncode)
        result.eval_s = time.monotonic() - start
        return result

    @staticmethod
    async def _kill(proc: asyncio.subprocess.Process) -> None:
        """SIGTERM the worker's group (the supervisor kills its child's group), then SIGKILL;
        then remove the scratch directories it could not
        (:func:`accelopt_core.onsite.sandbox.scratch.sweep`)."""
        if proc.returncode is not None:
            return
        for sig, wait in ((signal.SIGTERM, _TERM_GRACE_S), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                await asyncio.wait_for(proc.wait(), timeout=wait)
                break
            except asyncio.TimeoutError:
                continue
        await asyncio.to_thread(sweep)  # the scratch directories the killed worker left

    async def close(self) -> None:
        """Kill the warm worker once no evaluation holds it (cold workers belong to their
        evaluations). Idempotent."""
        if self.warm is not None:
            await self.warm.close()
