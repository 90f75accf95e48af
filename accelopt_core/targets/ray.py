"""The Ray target: evaluations as Ray tasks spread over the machines of a Ray cluster.

``ray://HOST:PORT`` connects with the Ray client (``ray.init("ray://HOST:PORT")``, the head's
client server port, 10001 by default); ``ray:auto`` joins a cluster already running on this
machine (``ray.init(address="auto")``). Ray is an optional extra: ``pip install
'accelopt[ray]'``; it is imported only when the target is used.

Each evaluation is one Ray task that asks for one GPU (``num_gpus=1``) when the cluster has
GPUs, else one Neuron core (``resources={"neuron_cores": 1}``) when it has those, else one CPU.
Ray pins the task to its accelerator (it sets ``CUDA_VISIBLE_DEVICES`` /
``NEURON_RT_VISIBLE_CORES``). The task function,
:func:`accelopt_core.onsite.process.agent.run_ray_task`, is shipped by value (cloudpickle's
``register_pickle_by_value``: nothing of this project is needed on the nodes): it runs the
worker ``[python, "-c", BOOTSTRAP]`` with the node's python (``sys.executable`` there) on the
shipped payload (:func:`~accelopt_core.targets.shipping.encode_stdin`) and returns its stdout,
stderr and exit status. The worker is started with ``PR_SET_PDEATHSIG`` = SIGKILL and does the
same for its candidate, so when Ray kills the task (cancellation with ``force=True``) the
worker and the candidate die with it.

The task cannot itself be a ``python -c BOOTSTRAP`` program like the ssh agent: Ray runs
functions inside its own worker processes, so the function is what travels (pickled), and the
onsite code it runs (the worker) travels as the bundle.

Warm workers (``accelopt.evaluation.warmWorkers``, the default): instead of a task per
evaluation, :class:`WarmActors` keeps one actor per unit of the resource
(:class:`accelopt_core.onsite.process.warmhost.WarmActor`, shipped by value too), each hosting a warm
worker (torch and triton imported once, a forked child per candidate). An actor holds its
resource for its lifetime; cancellation, a timeout or a lost actor kills it (``ray.kill``: its
warm worker and candidate die with it) and the slot starts a new one at the next evaluation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from accelopt_core.onsite.process import agent as onsite_agent
from accelopt_core.onsite.process import warmhost
from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.settings import Settings
from accelopt_core.targets import sandbox
from accelopt_core.targets.base import TargetError, nki_tag
from accelopt_core.targets.shipping import (
    BOOTSTRAP,
    decode_probe,
    decode_result,
    encode_stdin,
    encode_warm,
    ship_by_value,
)

#: Seconds added to ``request.timeout_s`` before the task is cancelled from here.
TIMEOUT_MARGIN_S = 30.0

#: Seconds between refreshes of the cluster's resources (capacity).
RESOURCE_REFRESH_S = 10.0
#: Tries of the first connection to a Ray client server (see RayCluster._init_with_retry).
CONNECT_ATTEMPTS = 3

_lock = threading.Lock()
_ray_users = 0  # RayClusters of this process that share the connection this module opened
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


def task_function(ray: Any) -> Callable[..., tuple[int, bytes, bytes]]:
    """:func:`accelopt_core.onsite.process.agent.run_ray_task`, with its module (and the
    sandbox modules it uses) registered with Ray's cloudpickle to be pickled by value: the
    nodes get the function's code, not a reference to a module they do not have."""
    ship_by_value(ray)
    return onsite_agent.run_ray_task


class RayCluster:
    """One target's use of the process-wide Ray connection, and the resource its tasks ask for.

    Ray is connected on first :meth:`connect` (in a thread: ``ray.init`` blocks); one
    connection per process is shared by all targets, and :meth:`release` disconnects
    (``ray.shutdown``) only a connection this module opened, when its last user releases it.

    Attributes:
        resource: what each task asks for: ``GPU``, ``neuron_cores`` or ``CPU``.
        capacity: the cluster's count of ``resource`` (1 before the first connection).
        connected: :meth:`connect` succeeded.
    """

    def __init__(self, ray: Any, address: str, name: str) -> None:
        self._ray = ray
        self._address = address
        self._name = name
        self._lock = asyncio.Lock()
        self.connected = False
        self.resource = "CPU"
        self.capacity = 1
        self._refreshed = 0.0
        self._released = False

    async def connect(self) -> None:
        """Connect (once) and read the cluster's resources.

        Raises:
            TargetError: the cluster cannot be reached.
        """
        if self.connected:
            return
        async with self._lock:
            if self.connected:
                return
            await asyncio.to_thread(self._connect_blocking)
            self.connected = True

    async def refresh_if_stale(self) -> None:
        """Re-read the resources when the last read is older than :data:`RESOURCE_REFRESH_S`
        (errors keep the old values)."""
        if time.monotonic() - self._refreshed > RESOURCE_REFRESH_S:
            self._refreshed = time.monotonic()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._refresh_blocking)

    def options(self) -> dict[str, Any]:
        """Ray task options asking for one unit of :attr:`resource` (and one CPU)."""
        if self.resource == "GPU":
            return {"num_gpus": 1, "num_cpus": 1}
        if self.resource == "neuron_cores":
            return {"resources": {"neuron_cores": 1}, "num_cpus": 1}
        return {"num_cpus": 1}

    async def release(self) -> None:
        """Stop using the connection; ``ray.shutdown`` when this module opened it and this
        was its last user. Idempotent."""
        global _ray_users, _ray_owned
        if not self.connected or self._released:
            return
        self._released = True
        with _lock:
            _ray_users -= 1
            shutdown = _ray_owned and _ray_users == 0
            if shutdown:
                _ray_owned = False
        if shutdown:
            await asyncio.to_thread(self._ray.shutdown)

    def _connect_blocking(self) -> None:
        global _ray_users, _ray_owned
        ray = self._ray
        with _lock:
            if not ray.is_initialized():
                try:
                    self._init_with_retry()
                except Exception as exc:
                    raise TargetError(
                        f"cannot connect to the Ray cluster {self._name}: "
                        f"{type(exc).__name__}: {exc}. Start it with `ray start --head "
                        "--ray-client-server-port=10001` on the head node (and `ray start "
                        "--address=HEAD:6379` on each worker node), or check the address."
                    ) from exc
                _ray_owned = True
            _ray_users += 1
        self._refresh_blocking()

    def _init_with_retry(self) -> None:
        """``ray.init`` with up to :data:`CONNECT_ATTEMPTS` tries, 2 s apart, for the refusal a
        just-started head gives: its client proxier accepts the connection before it can start
        the per-client server ("Initialization failure from server"). Other errors (a wrong
        address, a version mismatch) fail at once."""
        ray = self._ray
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
            self.resource, count = "GPU", resources["GPU"]
        elif resources.get("neuron_cores", 0) >= 1:
            self.resource, count = "neuron_cores", resources["neuron_cores"]
        else:
            self.resource, count = "CPU", resources.get("CPU", 1)
        self.capacity = max(1, int(count))
        self._refreshed = time.monotonic()


class WarmActors:
    """The Ray target's warm slots: up to ``capacity`` actors
    (:class:`~accelopt_core.onsite.process.warmhost.WarmActor`), each running one evaluation at a time.

    Args:
        ray: the ray module (connected).
        cluster: the target's :class:`RayCluster` (the resource each actor asks for).
        keep: extra environment names for the warm workers (``accelopt.evaluation.environment``).
    """

    def __init__(self, ray: Any, cluster: RayCluster, keep: str = "") -> None:
        self._ray = ray
        self._cluster = cluster
        self._keep = keep
        ship_by_value(ray)
        self._class = ray.remote(max_restarts=0)(warmhost.WarmActor)
        self._idle: list[Any] = []
        self._slots = asyncio.Semaphore(cluster.capacity)
        self.actors: set[Any] = set()  # every live actor (diagnostics, tests)

    async def evaluate(self, payload: bytes, timeout_s: float) -> tuple[int, bytes, bytes]:
        """Run a warm payload (``encode_warm``) on an idle actor (a new one when none is idle).

        Raises:
            asyncio.TimeoutError: no answer within ``timeout_s`` (the actor was killed).
            _TaskLost: the actor died (its warm worker's death is an answer, not this).
        """
        async with self._slots:
            actor = self._idle.pop() if self._idle else await self._start()
            try:
                ref = await asyncio.to_thread(actor.evaluate.remote, payload)
                answer = await asyncio.wait_for(_settled(ref), timeout_s)
            except self._ray.exceptions.RayError as exc:
                await asyncio.shield(self.kill(actor))
                raise _TaskLost(f"the Ray actor was lost ({type(exc).__name__})") from exc
            except BaseException:  # cancelled or timed out: kill the actor and its candidate
                await asyncio.shield(self.kill(actor))
                raise
            self._idle.append(actor)
            return answer

    async def _start(self) -> Any:
        options = self._cluster.options()
        actor = await asyncio.to_thread(
            lambda: self._class.options(**options).remote(
                BOOTSTRAP, onsite_agent.RAY_TASK_MARK, self._keep
            )
        )
        self.actors.add(actor)
        return actor

    async def kill(self, actor: Any) -> None:
        """``ray.kill`` the actor (its warm worker and candidate die with it)."""
        self.actors.discard(actor)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._ray.kill, actor, no_restart=True)

    async def close(self) -> None:
        """Kill every actor. Idempotent."""
        self._idle = []
        for actor in list(self.actors):
            await self.kill(actor)


def nki_stack(versions: dict[str, Any], reported: Any, mode: str | None = None) -> dict[str, Any]:
    """The node's NKI stack for the fingerprint: what its worker ``reported``
    (``nki_sdk.stack()``), else rebuilt from its ``versions`` (an older worker) with ``mode``
    (None: unknown, which matches no probed stack); ``{}`` without an SDK."""
    if isinstance(reported, dict):
        return reported
    stack = {k: versions[k] for k in ("nki", "neuronxcc", "nki_api", "lnc") if versions.get(k)}
    if stack.get("nki_api") and mode:
        stack["nki_mode"] = mode
    return stack if stack.get("nki_api") else {}


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
            address = "auto"
        elif spec.startswith("ray://") and len(spec) > len("ray://"):
            address = spec
        else:
            raise TargetError(f"invalid ray target {spec!r}: use ray://HOST:PORT or ray:auto")
        self._ray = _import_ray()
        self._cluster = RayCluster(self._ray, address, self.name)
        self._remote: Any = None
        self._hello: dict[str, Any] | None = None
        self._pending: set[Any] = set()
        self._closed = False
        self._warm_enabled = settings.evaluation.warm_workers
        self._keep = sandbox.keep(settings)  # extra environment names for the workers
        self.warm: WarmActors | None = None  # the warm actors, once connected

    # -- protocol -------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Cluster count of the requested resource (1 before the first connection)."""
        return self._cluster.capacity

    @property
    def fingerprint(self) -> str:
        """``<spec>:<resource>:<device name>:torch-X:triton-Y`` once a task has reported
        (:meth:`probe` or the first evaluation), then
        :func:`~accelopt_core.targets.base.nki_tag` of the node's NKI stack where it has a
        Neuron SDK (``nki-device`` on Trainium, ``nki-simulated``); before that
        ``<spec>:unprobed``."""
        if self._hello is None:
            return f"{self.name}:unprobed"
        h = self._hello
        stack = f"torch-{h.get('torch')}:triton-{h.get('triton')}" + nki_tag(h.get("nki_stack"))
        return f"{self.name}:{self.resource}:{h.get('device', '?')}:{stack}"

    @property
    def resource(self) -> str:
        """The resource each task asks for: ``GPU``, ``neuron_cores`` or ``CPU``."""
        return self._cluster.resource

    async def probe(self) -> dict[str, Any]:
        """Connect and run one probe task with the same resource request as an evaluation.

        Returns the node's ``python``, ``torch``, ``triton``, ``neuronxcc`` versions (None when
        missing), ``device`` (name from the worker's probe), ``resource``, ``capacity`` and
        ``cluster`` (``ray.cluster_resources()``).

        Raises:
            TargetError: the cluster cannot be reached.
        """
        await self._ensure_connected()
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
        info["nki_stack"] = nki_stack(probe.get("versions") or {}, probe.get("nki_stack"))
        if rc != 0 and not probe:
            info["error"] = err.decode(errors="replace")[-1500:]
        info["resource"] = self.resource
        info["capacity"] = self.capacity
        info["cluster"] = await asyncio.to_thread(self._ray.cluster_resources)
        self._hello = info
        return info

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        """Evaluate one candidate as a Ray task; never raises for a bad candidate.

        ``request.device`` is cleared: Ray assigns the accelerator. A task that gives no
        result within ``request.timeout_s`` + :data:`TIMEOUT_MARGIN_S` (queueing included) is
        cancelled (status ``timeout``); a task lost with its node is ``runtime_error``.
        Cancelling the awaiting task cancels the Ray task (``ray.cancel(force=True)``), so
        pending tasks leave the queue and a running one is killed. With warm workers the
        evaluation runs on a :class:`WarmActors` actor instead; cancelling or timing out kills
        that actor, and a warm worker that died mid-request is a classified ``runtime_error``.

        Raises:
            TargetError: the cluster cannot be reached at all.
        """
        if self._closed:
            raise TargetError(f"target {self.name} is closed")
        started = time.perf_counter()
        await self._ensure_connected()
        await self._cluster.refresh_if_stale()
        unpinned = dataclasses.replace(request, device=None)
        limit = request.timeout_s + TIMEOUT_MARGIN_S
        try:
            if self.warm is not None:
                rc, out, err = await self.warm.evaluate(encode_warm(unpinned), limit)
            else:
                rc, out, err = await self._submit(encode_stdin(unpinned), limit)
        except asyncio.TimeoutError:
            result = EvalResult.failure(
                "timeout",
                f"no result from the Ray cluster within {limit:.0f} s (queueing included); "
                "the task was cancelled",
            )
        except _TaskLost as exc:
            result = EvalResult.failure("runtime_error", str(exc))
        else:
            result = decode_result(out, err, rc)
            if self._hello is None and result.versions and result.device:
                mode = {"neuron": "device", "simulated": "simulated"}.get(result.timing)
                stack = nki_stack(result.versions, None, mode)
                self._hello = {**result.versions, "device": result.device, "nki_stack": stack}
        result.eval_s = time.perf_counter() - started
        return result

    async def close(self) -> None:
        """Cancel this target's pending tasks and release the Ray connection (``ray.shutdown``
        only when this module opened it and no other RayTarget uses it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for ref in list(self._pending):
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)
        if self.warm is not None:
            await self.warm.close()
        await self._cluster.release()

    # -- internals ------------------------------------------------------------------------
    async def _ensure_connected(self) -> None:
        await self._cluster.connect()
        if self._remote is None:
            self._remote = self._ray.remote(max_retries=0)(task_function(self._ray))
        if self._warm_enabled and self.warm is None:
            self.warm = WarmActors(self._ray, self._cluster, self._keep)

    async def _submit(self, payload: bytes, timeout_s: float) -> tuple[int, bytes, bytes]:
        ray = self._ray
        ref = await asyncio.to_thread(
            lambda: self._remote.options(**self._cluster.options()).remote(
                BOOTSTRAP, payload, timeout_s, self._keep
            )
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


__all__ = ["RayCluster", "RayTarget", "TIMEOUT_MARGIN_S", "WarmActors"]
