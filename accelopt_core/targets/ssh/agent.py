"""The client side of the remote agent (:mod:`accelopt_core.onsite.process.agent`): start it in an SSH
session channel, read its hello, exchange one evaluation frame.

The agent runs as ``[env ...] python -c BOOTSTRAP BOOTSTRAP``; its source arrives as the first
thing on its stdin (``bundle("process.agent")``, imported from memory on the remote: nothing is
written there), followed by the framed evaluation payloads (wire format in
:mod:`accelopt_core.onsite.process.agent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import struct
from dataclasses import dataclass
from typing import Any

from accelopt_core.targets.base import TargetError
from accelopt_core.targets.shipping import BOOTSTRAP, bundle
from accelopt_core.targets.ssh.connection import Unreachable, describe

#: Seconds the agent may take to start (remote python start + device probe) beyond the
#: connection timeout.
AGENT_START_S = 30.0


def remote_command(python: str, workdir: str | None, device: str, env: dict[str, str]) -> str:
    """The shell command that starts the agent for ``device`` (``CUDA_VISIBLE_DEVICES`` and
    ``NEURON_RT_VISIBLE_CORES`` set to it, plus ``env``) in ``workdir``."""
    assigns = {"CUDA_VISIBLE_DEVICES": device, "NEURON_RT_VISIBLE_CORES": device, **env}
    parts = []
    if workdir:
        parts.append(f"cd {shlex.quote(workdir)} &&")
    parts.append("exec env")
    parts.extend(shlex.quote(f"{k}={v}") for k, v in assigns.items())
    parts.extend([shlex.quote(python), "-c", shlex.quote(BOOTSTRAP), shlex.quote(BOOTSTRAP)])
    return " ".join(parts)


def looks_like_disk_full(text: str | None) -> bool:
    """True when ``text`` carries the OS's "disk full" error (ENOSPC)."""
    return bool(text) and ("No space left on device" in text or "[Errno 28]" in text)


@dataclass
class RemoteAgent:
    """One running remote agent (one device, one SSH channel).

    Attributes:
        device: the device it is pinned to.
        conn: the ``asyncssh`` connection its channel belongs to.
        proc: its ``asyncssh.SSHClientProcess`` (binary stdin/stdout/stderr).
        hello: what it reported at start (versions, devices, cwd, free disk bytes).
    """

    device: str
    conn: Any
    proc: Any
    hello: dict[str, Any]

    @property
    def alive(self) -> bool:
        """The connection and the channel are open and the agent has not exited."""
        return (
            not self.conn.is_closed()
            and self.proc.exit_status is None
            and not (self.proc.stdout.at_eof())
        )

    def close(self) -> None:
        """Close the channel: the agent kills its running evaluation and exits."""
        with contextlib.suppress(Exception):
            self.proc.close()

    async def roundtrip(self, payload: bytes, kind: bytes = b"E") -> tuple[int, bytes, bytes]:
        """Send one ``E`` frame (a cold worker's payload) or ``W`` frame (a warm worker's:
        :func:`~accelopt_core.targets.shipping.encode_warm`) and wait for its ``R`` frame.

        Returns:
            ``(returncode, stdout, stderr)`` of the worker.

        Raises:
            ConnectionError: the reply is not an ``R`` frame; asyncssh or
                ``asyncio.IncompleteReadError`` when the channel breaks.
        """
        self.proc.stdin.write(kind + struct.pack("<Q", len(payload)) + payload)
        head = await self.proc.stdout.readexactly(21)
        if head[:1] != b"R":
            raise ConnectionError(f"unexpected reply from the remote agent: {head[:16]!r}")
        rc, n_out, n_err = struct.unpack("<iQQ", head[1:])
        body = await self.proc.stdout.readexactly(n_out + n_err) if n_out + n_err else b""
        return rc, body[:n_out], body[n_out:]


async def start_agent(
    conn: Any, device: str, command: str, *, host: str, python: str, timeout_s: float
) -> RemoteAgent:
    """Run ``command`` (:func:`remote_command`) on ``conn``, ship the agent, read its hello.

    Raises:
        Unreachable: the connection was lost, or the remote disk is full.
        TargetError: the remote ``python`` cannot be started, or the agent did not start.
    """
    try:
        proc = await conn.create_process(command, encoding=None)
    except Exception as exc:
        raise Unreachable(f"connection to {host} lost: {describe(exc)}") from exc
    try:
        with contextlib.suppress(BrokenPipeError):  # exited at once: the hello read says why
            proc.stdin.write(bundle("process.agent"))
        hello = await asyncio.wait_for(read_hello(proc), timeout_s)
    except asyncio.CancelledError:
        proc.close()
        raise
    except Exception as exc:  # EOF, timeout, asyncssh.ConnectionLost, bad hello
        proc.close()
        raise await _start_failure(exc, conn, proc, host, python) from exc
    return RemoteAgent(device=device, conn=conn, proc=proc, hello=hello)


async def read_hello(proc: Any) -> dict[str, Any]:
    """The JSON of the agent's ``H`` frame on ``proc.stdout``
    (:func:`accelopt_core.onsite.process.agent.hello`).

    Raises:
        ConnectionError: the output is not an ``H`` frame; ``asyncio.IncompleteReadError`` at
            end-of-file.
    """
    head = await proc.stdout.readexactly(5)
    if head[:1] != b"H":
        raise ConnectionError(f"unexpected output from the remote agent: {head!r}")
    (n,) = struct.unpack("<I", head[1:])
    return json.loads(await proc.stdout.readexactly(n))


async def _start_failure(exc: Exception, conn: Any, proc: Any, host: str, python: str) -> Exception:
    """The error to raise for an agent that did not start (``proc`` closed), from its exit
    status and the tail of its stderr."""
    import asyncssh

    stderr = b""
    with contextlib.suppress(Exception):
        stderr = await asyncio.wait_for(proc.stderr.read(), 2)
    status = proc.exit_status
    tail = stderr.decode(errors="replace").strip()[-1500:]
    lost = (asyncssh.ConnectionLost, asyncssh.DisconnectError, ConnectionError)
    if conn.is_closed() or isinstance(exc, lost):
        return Unreachable(f"connection to {host} lost: {describe(exc)}")
    if status == 127 or "not found" in tail or "No such file" in tail:
        return TargetError(
            f"the remote python {python!r} could not be started on {host} (exit {status}): "
            f"{tail or 'no output'}. Set accelopt.ssh.python to the interpreter that has torch "
            "and triton (or the Neuron SDK)."
        )
    if looks_like_disk_full(tail):
        return Unreachable(f"remote disk full on {host}: {tail}")
    return TargetError(
        f"the remote agent did not start on {host} with {python!r} (exit {status}): "
        f"{tail or describe(exc)}"
    )
