"""The ``ssh://`` target: evaluations on a remote GPU or Trainium machine over asyncssh.

Nothing of this project is installed on the remote, and nothing is written there. Per
configured device the target keeps one long-lived agent on the remote
(:mod:`accelopt_core.onsite.process.agent`, started by :mod:`.agent` inside an SSH session channel of
the target's one connection, :mod:`.connection`). Each evaluation goes to the agent of a free
device as a framed payload (:func:`accelopt_core.targets.shipping.encode_warm` /
``encode_stdin``: the onsite bundle plus the request). With ``accelopt.evaluation.warmWorkers``
(the default) the agent keeps a warm worker for the connection's lifetime (torch and triton
imported once, one forked child per candidate: :mod:`accelopt_core.onsite.process.warmhost`); else it
runs a fresh worker process ``[python, "-c", BOOTSTRAP]`` (exactly what the local target runs)
per evaluation. Either way it sends back stdout, stderr and exit status, which
:func:`~accelopt_core.targets.shipping.decode_result` turns into an
:class:`~accelopt_core.onsite.protocol.EvalResult`. Keeping the agent alive saves the SSH
session start-up and the remote login shell (``~/.bashrc`` with conda or pyenv init often
costs 100-300 ms) on every evaluation.

Closing the channel (cancellation, timeout, a dropped connection) makes the agent kill the
running worker and its candidate; the worker's own timeout and memory limit still bound every
candidate.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.onsite.sandbox.environment import KEEP_VAR
from accelopt_core.settings import Settings
from accelopt_core.targets import sandbox
from accelopt_core.targets.base import TargetError, nki_tag
from accelopt_core.targets.pool import DevicePool, pinned
from accelopt_core.targets.shipping import decode_result, encode_stdin, encode_warm
from accelopt_core.targets.ssh.address import SSHAddress
from accelopt_core.targets.ssh.agent import (
    AGENT_START_S,
    RemoteAgent,
    looks_like_disk_full,
    remote_command,
    start_agent,
)
from accelopt_core.targets.ssh.connection import SSHConnection, Unreachable, describe

#: Seconds added to ``request.timeout_s`` before the client gives up on a result and closes
#: the channel (the worker's own timeout normally answers first).
TIMEOUT_MARGIN_S = 15.0


class SSHTarget:
    """Evaluate candidates on a remote machine reached with ``ssh://[user@]host[:port]``.

    Settings used: ``settings.target`` (the spec), ``settings.ssh`` (python, workdir, devices,
    identity_file, known_hosts, connect_timeout_s). One SSH connection per target, opened on
    first use, reused, and re-opened after a failure. Host keys are verified against
    ``settings.ssh.known_hosts`` (default ``~/.ssh/known_hosts``); an unknown host is refused
    (no trust on first use). Keys come from ``identity_file`` or the SSH agent and default key
    files; password and keyboard-interactive authentication are never attempted.

    Capacity is the number of configured devices; each evaluation runs pinned to one free
    device (``CUDA_VISIBLE_DEVICES`` and ``NEURON_RT_VISIBLE_CORES`` set to it, and
    ``request.device`` set to it).

    Args:
        settings: the whole settings model.
        env: extra environment variables for the remote agent and worker (e.g. ``TMPDIR``);
            the agent starts each worker in the sandbox's allowlisted environment
            (:mod:`accelopt_core.onsite.sandbox.environment`), so only allowed names and the
            names of ``accelopt.evaluation.environment`` reach it.

    Raises:
        TargetError: from the constructor for a malformed spec or empty device list; from
            :meth:`evaluate` / :meth:`probe` when the host key is unknown or changed, when
            authentication fails, or when the remote python cannot be started.
    """

    def __init__(self, settings: Settings, *, env: dict[str, str] | None = None) -> None:
        self.name = settings.target
        self.address = SSHAddress.parse(settings.target)
        self._opts = settings.ssh
        self._warm = settings.evaluation.warm_workers
        self._env = dict(env or {})
        if sandbox.keep(settings):  # the agent starts its workers with these names too
            self._env.setdefault(KEEP_VAR, sandbox.keep(settings))
        self.devices = [d.strip() for d in settings.ssh.devices.split(",") if d.strip()]
        if not self.devices:
            raise TargetError("accelopt.ssh.devices is empty: name at least one device, e.g. 0")
        self._pool = DevicePool(self.devices)
        self._connection = SSHConnection(self.address, settings.ssh)
        self._agents: dict[str, RemoteAgent] = {}
        self._hello: dict[str, Any] | None = None
        self._closed = False

    # -- protocol -------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Number of configured devices (one evaluation per device at a time)."""
        return self._pool.capacity

    @property
    def fingerprint(self) -> str:
        """``ssh://host:port:<device names>:torch-X:triton-Y`` once the remote was probed
        (:meth:`probe` or the first evaluation), then
        :func:`~accelopt_core.targets.base.nki_tag` of the agent's ``nki_stack`` where the
        remote has a Neuron SDK (the SDK version, and ``nki-device`` on Trainium or
        ``nki-simulated``); before that ``ssh://host:port:devices=...``."""
        host = f"ssh://{self.address.host}:{self.address.port}"
        if self._hello is None:
            return f"{host}:devices={','.join(self.devices)}"
        h = self._hello
        names = ",".join(sorted(set(self._device_names(h))))
        stack = f"torch-{h.get('torch')}:triton-{h.get('triton')}"
        if h.get("nki_stack") is not None:  # the agent reports how NKI candidates run
            stack += nki_tag(h["nki_stack"])
        elif h.get("neuronxcc"):  # an agent from before the NKI stack was reported
            stack += f":neuronxcc-{h['neuronxcc']}:nki-mode-unknown"
        return f"{host}:{names}:{stack}"

    async def probe(self) -> dict[str, Any]:
        """Connect (if needed), start the agent of the first free device and return what it
        reported: ``python``, ``executable``, ``torch``, ``triton``, ``neuronxcc`` versions
        (None when missing), ``devices`` (list of {index, name} on the remote),
        ``device_names`` (names of the configured devices), ``free_cwd`` / ``free_tmp``
        (bytes), ``cwd``, ``tmpdir``.

        Raises:
            TargetError: unknown host key, failed authentication, unreachable host, remote
                python missing.
        """
        async with self._pool.slot() as device:
            try:
                agent = await self._agent(device)
            except Unreachable as exc:
                raise TargetError(str(exc)) from exc
        info = dict(agent.hello)
        info["device_names"] = self._device_names(info)
        return info

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        """Evaluate one candidate on a free remote device.

        Returns a failure result (never raises) for a bad candidate and for transient
        infrastructure failures: ``runtime_error`` "connection to HOST lost: ..." when the
        connection drops (the next evaluation reconnects), "cannot reach HOST: ..." when it
        cannot connect, "remote disk full ..." when the remote disk is full, ``timeout`` when
        no result arrives within ``request.timeout_s`` + :data:`TIMEOUT_MARGIN_S`.
        Cancelling the awaiting task closes the channel; the remote agent then kills the
        worker and its candidate.

        Raises:
            TargetError: the target is unusable (host key, authentication, remote python).
        """
        if self._closed:
            raise TargetError(f"target {self.name} is closed")
        started = time.perf_counter()
        async with self._pool.slot() as device:
            try:
                agent = await self._agent(device)
            except Unreachable as exc:
                result = EvalResult.failure("runtime_error", str(exc))
            else:
                result = await self._exchange(agent, pinned(request, device))
        result.eval_s = time.perf_counter() - started
        return result

    async def close(self) -> None:
        """Close every agent channel (the agents kill their evaluations and exit) and the
        connection. Idempotent."""
        self._closed = True
        for device in list(self._agents):
            self._drop_agent(device)
        await self._connection.close()

    # -- internals ------------------------------------------------------------------------
    def _device_names(self, hello: dict[str, Any]) -> list[str]:
        by_index = {d.get("index"): d.get("name") for d in hello.get("devices", [])}
        only = [d.get("name") for d in hello.get("devices", [])]
        names = []
        for device in self.devices:
            name = by_index.get(device)
            if name is None:
                name = only[0] if len(set(only)) == 1 else f"device{device}"
            names.append(str(name))
        return names

    def _drop_agent(self, device: str) -> None:
        agent = self._agents.pop(device, None)
        if agent is not None:
            agent.close()

    async def _agent(self, device: str) -> RemoteAgent:
        """The running agent of ``device``, started (and connected) first when needed.

        Raises:
            Unreachable, TargetError: see :func:`~.agent.start_agent`.
        """
        agent = self._agents.get(device)
        if agent is not None and agent.alive:
            return agent
        self._drop_agent(device)
        conn = await self._connection.get()
        opts = self._opts
        agent = await start_agent(
            conn,
            device,
            remote_command(opts.python, opts.workdir, device, self._env),
            host=self.address.host,
            python=opts.python,
            timeout_s=opts.connect_timeout_s + AGENT_START_S,
        )
        self._agents[device] = agent
        self._hello = agent.hello
        return agent

    async def _exchange(self, agent: RemoteAgent, request: EvalRequest) -> EvalResult:
        """Run ``request`` on ``agent``; a timeout, cancellation or broken channel closes the
        channel (the agent then kills the evaluation)."""
        limit = request.timeout_s + TIMEOUT_MARGIN_S
        try:
            if self._warm:
                exchange = agent.roundtrip(encode_warm(request), b"W")
            else:
                exchange = agent.roundtrip(encode_stdin(request))
            rc, out, err = await asyncio.wait_for(exchange, limit)
        except asyncio.TimeoutError:
            self._drop_agent(agent.device)
            return EvalResult.failure(
                "timeout",
                f"no result from {self.address.host} within {limit:.0f} s; the evaluation was "
                "stopped",
            )
        except asyncio.CancelledError:
            self._drop_agent(agent.device)
            raise
        except Exception as exc:  # asyncssh.Error, ConnectionLost, IncompleteReadError
            self._drop_agent(agent.device)
            return EvalResult.failure(
                "runtime_error", f"connection to {self.address.host} lost: {describe(exc)}"
            )
        return self._classify_infrastructure(decode_result(out, err, rc), agent.hello, err)

    def _classify_infrastructure(
        self, result: EvalResult, hello: dict[str, Any], stderr: bytes
    ) -> EvalResult:
        """Re-label failures that come from the remote machine, not the candidate."""
        if result.ok:
            return result
        text = f"{result.message or ''}\n{stderr[-4000:].decode(errors='replace')}"
        if looks_like_disk_full(text):
            free = min(
                (v for v in (hello.get("free_cwd"), hello.get("free_tmp")) if v is not None),
                default=None,
            )
            where = f" ({free // (1024 * 1024)} MiB free)" if free is not None else ""
            return EvalResult.failure(
                "runtime_error",
                f"remote disk full on {self.address.host}{where}: {result.message}",
                device=result.device,
                versions=result.versions,
            )
        return result
