"""The Ray target: evaluations as Ray tasks spread over the machines of a Ray cluster.

``ray://HOST:PORT`` connects with the Ray client (``ray.init("ray://HOST:PORT")``, the head's
client server port, 10001 by default); ``ray:auto`` joins a cluster already running on this
machine (``ray.init(address="auto")``). Ray is an optional extra: ``pip install
'accelopt[ray]'``; it is imported only when the target is used.

Each evaluation is one Ray task that asks for one GPU (``num_gpus=1``) when the cluster has
GPUs, else one Neuron core (``resources={"neuron_cores": 1}``) when it has those, else one CPU.
Ray pins the task to its accelerator (it sets ``CUDA_VISIBLE_DEVICES`` /
``NEURON_RT_VISIBLE_CORES``). The task function is shipped by value (nothing of this project is
needed on the nodes): it runs the worker ``[python, "-c", BOOTSTRAP]`` with the node's
python (``sys.executable`` there) on the shipped payload
(:func:`~accelopt_core.targets.shipping.encode_stdin`) and returns its stdout, stderr and exit
status. The worker is started with ``PR_SET_PDEATHSIG`` = SIGKILL and does the same for its
candidate, so when Ray kills the task (cancellation with ``force=True``) the worker and the
candidate die with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.settings import Settings
from accelopt_core.targets.base import TargetError

#: Seconds added to ``request.timeout_s`` before the task is cancelled from here.
TIMEOUT_MARGIN_S = 30.0

#: Seconds between refreshes of the cluster's resources (capacity).
RESOURCE_REFRESH_S = 10.0
#: Tries of the first connection to a Ray client server (see RayTarget._init_with_retry).
CONNECT_ATTEMPTS = 3

# The Ray task, defined from source in a module that is not importable so that cloudpickle
# ships it by value: the nodes need only Ray and the kernel's stack, not this project.
_TASK_SOURCE = r'''
def accelopt_evaluate(bootstrap, payload, timeout_s):
    """Run the shipped worker on this node; returns (returncode, stdout, stderr)."""
    import ctypes, signal, subprocess, sys

    def die_with_parent():  # Linux: the worker gets SIGKILL when this Ray worker dies
        try:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except Exception:
            pass

    proc = subprocess.Popen(
        [sys.executable, "-c", bootstrap, "accelopt-ray-task"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=die_with_parent)
    try:
        out, err = proc.communicate(payload, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    except BaseException:  # cancelled (KeyboardInterrupt) or anything else: take it down
        proc.kill()
        proc.wait()
        raise
    return proc.returncode, out, err
'''

_lock = threading.Lock()
_ray_users = 0  # RayTargets of this process that share the connection this module opened
_ray_owned = False  # True when ray.init was called by this module (then close may shut it down)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise TargetError(
            "the Ray target needs Ray: pip install 'accelopt[ray]' (the same Ray version as "
            "the cluster)"
        ) from exc
    return ray


def _task_function() -> Any:
    namespace: dict[str, Any] = {"__name__": "accelopt_ray_task"}
    exec(compile(_TASK_SOURCE, "<accelopt_ray_task>", "exec"), namespace)
    return namespace["accelopt_evaluate"]


class RayTarget:
    """Evaluate candidates as tasks on a Ray cluster (``ray://HOST:PORT`` or ``ray:auto``).

    Capacity is the cluster's count of the resource each task asks for (GPUs, Neuron cores or
    CPUs), refreshed every :data:`RESOURCE_REFRESH_S`. Ray is connected on first use (in a
    thread: ``ray.init`` blocks); one connection per process is shared by all RayTargets, and
    :meth:`close` disconnects (``ray.shutdown``) only a connection this module opened, when its
    last target closes.

    Raises:
        TargetError: from the constructor when Ray is not installed or the spec is malformed;
            from :meth:`evaluate` / :meth:`probe` when the cluster cannot be reached.
    """

    def __init__(self, settings: Settings) -> None:
        self.name = settings.target
        spec = settings.target.strip()
        if spec == "ray:auto":
            self._address = "auto"
        elif spec.startswith("ray://") and len(spec) > len("ray://"):
            self._address = spec
        else:
            raise TargetError(f"invalid ray target {spec!r}: use ray://HOST:PORT or ray:auto")
        self._ray = _import_ray()
        self._connected = False
        self._connect_lock = asyncio.Lock()
        self._remote: Any = None
        self._resource: str = "CPU"
        self._capacity = 1
        self._refreshed = 0.0
        self._hello: dict[str, Any] | None = None
        self._pending: set[Any] = set()
        self._closed = False

    # -- protocol -------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Cluster count of the requested resource (1 before the first connection)."""
        return self._capacity

    @property
    def fingerprint(self) -> str:
        """``<spec>:<resource>:<device name>:torch-X:triton-Y`` once a task has reported
        (:meth:`probe` or the first evaluation); before that ``<spec>:unprobed``."""
        if self._hello is None:
            return f"{self.name}:unprobed"
        h = self._hello
        stack = f"torch-{h.get('torch')}:triton-{h.get('triton')}"
        if h.get("neuronxcc"):
            stack += f":neuronxcc-{h['neuronxcc']}"
        return f"{self.name}:{self._resource}:{h.get('device', '?')}:{stack}"

    @property
    def resource(self) -> str:
        """The resource each task asks for: ``GPU``, ``neuron_cores`` or ``CPU``."""
        return self._resource

    async def probe(self) -> dict[str, Any]:
        """Connect and run one probe task with the same resource request as an evaluation.

        Returns the node's ``python``, ``torch``, ``triton``, ``neuronxcc`` versions (None when
        missing), ``device`` (name from the worker's probe), ``resource``, ``capacity`` and
        ``cluster`` (``ray.cluster_resources()``).

        Raises:
            TargetError: the cluster cannot be reached.
        """
        await self._ensure_connected()
        from accelopt_core.targets.shipping import decode_probe, encode_stdin

        rc, out, err = await self._submit(encode_stdin({"probe": True}), 120.0)
        probe = decode_probe(out) or {}
        info: dict[str, Any] = {
            k: (probe.get("versions") or {}).get(k)
            for k in ("python", "torch", "triton", "neuronxcc")
        }
        devices = probe.get("devices") or []
        info["device"] = str(devices[0]) if devices else "cpu"
        if isinstance(devices, list) and devices and isinstance(devices[0], dict):
            info["device"] = devices[0].get("name", "?")
        info["device_names"] = [info["device"]]
        info["worker_probe"] = probe
        if rc != 0 and not probe:
            info["error"] = err.decode(errors="replace")[-1500:]
        info["resource"] = self._resource
        info["capacity"] = self._capacity
        info["cluster"] = await asyncio.to_thread(self._ray.cluster_resources)
        self._hello = info
        return info

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        """Evaluate one candidate as a Ray task; never raises for a bad candidate.

        ``request.device`` is cleared: Ray assigns the accelerator. A task that gives no
        result within ``request.timeout_s`` + :data:`TIMEOUT_MARGIN_S` (queueing included) is
        cancelled (status ``timeout``); a task lost with its node is ``runtime_error``.
        Cancelling the awaiting task cancels the Ray task (``ray.cancel(force=True)``), so
        pending tasks leave the queue and a running one is killed.

        Raises:
            TargetError: the cluster cannot be reached at all.
        """
        import dataclasses

        from accelopt_core.targets.shipping import decode_result, encode_stdin

        if self._closed:
            raise TargetError(f"target {self.name} is closed")
        started = time.perf_counter()
        await self._ensure_connected()
        await self._maybe_refresh()
        payload = encode_stdin(dataclasses.replace(request, device=None))
        try:
            rc, out, err = await self._submit(payload, request.timeout_s + TIMEOUT_MARGIN_S)
        except asyncio.TimeoutError:
            return EvalResult.failure(
                "timeout",
                f"no result from the Ray cluster within "
                f"{request.timeout_s + TIMEOUT_MARGIN_S:.0f} s (queueing included); the task "
                "was cancelled",
                eval_s=time.perf_counter() - started,
            )
        except _TaskLost as exc:
            return EvalResult.failure(
                "runtime_error", str(exc), eval_s=time.perf_counter() - started
            )
        result = decode_result(out, err, rc)
        if self._hello is None and result.versions and result.device:
            self._hello = {**result.versions, "device": result.device}
        result.eval_s = time.perf_counter() - started
        return result

    async def close(self) -> None:
        """Cancel this target's pending tasks and release the Ray connection (``ray.shutdown``
        only when this module opened it and no other RayTarget uses it). Idempotent."""
        global _ray_users, _ray_owned
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        for ref in list(self._pending):
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        if not self._connected:
            return
        with _lock:
            _ray_users -= 1
            shutdown = _ray_owned and _ray_users == 0
            if shutdown:
                _ray_owned = False
        if shutdown:
            await asyncio.to_thread(ray.shutdown)

    # -- internals ------------------------------------------------------------------------
    async def _ensure_connected(self) -> None:
        if self._connected:
            return
        async with self._connect_lock:
            if self._connected:
                return
            await asyncio.to_thread(self._connect_blocking)
            self._connected = True

    def _connect_blocking(self) -> None:
        global _ray_users, _ray_owned
        ray = self._ray
        with _lock:
            if not ray.is_initialized():
                try:
                    self._init_with_retry(ray)
                except Exception as exc:
                    raise TargetError(
                        f"cannot connect to the Ray cluster {self.name}: "
                        f"{type(exc).__name__}: {exc}. Start it with `ray start --head "
                        "--ray-client-server-port=10001` on the head node (and `ray start "
                        "--address=HEAD:6379` on each worker node), or check the address."
                    ) from exc
                _ray_owned = True
            _ray_users += 1
        self._remote = ray.remote(max_retries=0)(_task_function())
        self._refresh_blocking()

    def _init_with_retry(self, ray: Any) -> None:
        """``ray.init`` with up to :data:`CONNECT_ATTEMPTS` tries, 2 s apart, for the refusal a
        just-started head gives: its client proxier accepts the connection before it can start
        the per-client server ("Initialization failure from server"). Other errors (a wrong
        address, a version mismatch) fail at once."""
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            try:
                if self._address == "auto":
                    ray.init(address="auto", log_to_driver=False, logging_level="warning")
                else:
                    ray.init(self._address, log_to_driver=False, logging_level="warning")
                return
            except ConnectionAbortedError:
                if attempt == CONNECT_ATTEMPTS:
                    raise
                with contextlib.suppress(Exception):
                    ray.shutdown()
                time.sleep(2.0)

    def _refresh_blocking(self) -> None:
        resources = self._ray.cluster_resources()
        if resources.get("GPU", 0) >= 1:
            self._resource, count = "GPU", resources["GPU"]
        elif resources.get("neuron_cores", 0) >= 1:
            self._resource, count = "neuron_cores", resources["neuron_cores"]
        else:
            self._resource, count = "CPU", resources.get("CPU", 1)
        self._capacity = max(1, int(count))
        self._refreshed = time.monotonic()

    async def _maybe_refresh(self) -> None:
        if time.monotonic() - self._refreshed > RESOURCE_REFRESH_S:
            self._refreshed = time.monotonic()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._refresh_blocking)

    def _options(self) -> dict[str, Any]:
        if self._resource == "GPU":
            return {"num_gpus": 1, "num_cpus": 1}
        if self._resource == "neuron_cores":
            return {"resources": {"neuron_cores": 1}, "num_cpus": 1}
        return {"num_cpus": 1}

    async def _submit(self, payload: bytes, timeout_s: float) -> tuple[int, bytes, bytes]:
        from accelopt_core.targets.shipping import BOOTSTRAP

        ray = self._ray
        ref = await asyncio.to_thread(
            lambda: self._remote.options(**self._options()).remote(BOOTSTRAP, payload, timeout_s)
        )
        self._pending.add(ref)
        try:
            return await asyncio.wait_for(self._get(ref), timeout_s)
        except (asyncio.CancelledError, asyncio.TimeoutError):
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.to_thread(ray.cancel, ref, force=True))
            raise
        finally:
            self._pending.discard(ref)

    async def _get(self, ref: Any) -> tuple[int, bytes, bytes]:
        ray = self._ray
        try:
            return await _settled(ref)
        except ray.exceptions.TaskCancelledError as exc:
            raise _TaskLost(f"the Ray task was cancelled: {exc}") from exc
        except ray.exceptions.RayError as exc:
            text = str(exc).strip().splitlines()
            raise _TaskLost(
                f"the Ray task failed ({type(exc).__name__}): {text[-1] if text else ''}"
            ) from exc


def _settled(ref: Any) -> asyncio.Future:
    """An asyncio future for a Ray object ref. Unlike ``asyncio.wrap_future``, cancelling it
    does not cancel Ray's own future (Ray's client thread would then fail to settle it)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future = loop.create_future()

    def settle(done: Any) -> None:
        if fut.done():
            return
        exc = done.exception()
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(done.result())

    def on_done(done: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, done)

    ref.future().add_done_callback(on_done)
    return fut


class _TaskLost(Exception):
    """The Ray task died without a result (node lost, worker killed, cancelled by Ray)."""


__all__ = ["RayTarget", "TIMEOUT_MARGIN_S"]
