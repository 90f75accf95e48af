"""The ssh target's one SSH connection: asyncssh, host-key verification, reconnection.

Host keys are verified against ``accelopt.ssh.knownHosts`` (default ``~/.ssh/known_hosts``);
an unknown or changed host key is refused (no trust on first use). Keys come from
``accelopt.ssh.identityFile`` or the SSH agent and default key files; password and
keyboard-interactive authentication are never attempted. asyncssh is imported on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from accelopt_core.settings import SSHSettings
from accelopt_core.targets.base import TargetError
from accelopt_core.targets.ssh.address import SSHAddress

#: Seconds between SSH keepalive messages, and how many may go unanswered before the
#: connection counts as lost.
KEEPALIVE_INTERVAL_S = 15
KEEPALIVE_COUNT_MAX = 3


class Unreachable(Exception):
    """The host cannot be reached right now (transient: the evaluation fails, the next retries)."""


def describe(exc: BaseException) -> str:
    """``"<ExceptionType>: <message or reason>"`` (just the type when there is no text)."""
    text = str(exc) or getattr(exc, "reason", "") or ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class SSHConnection:
    """One SSH connection to ``address``, opened on first use, reused while it is open, and
    re-opened by the next :meth:`get` once it has closed (dropped, sshd gone, ...).

    Args:
        address: the remote machine.
        opts: ``settings.ssh`` (``known_hosts``, ``identity_file``, ``connect_timeout_s``).
    """

    def __init__(self, address: SSHAddress, opts: SSHSettings) -> None:
        self.address = address
        self._opts = opts
        self._conn: Any = None
        self._lock = asyncio.Lock()

    async def get(self) -> Any:
        """The open ``asyncssh.SSHClientConnection``, connecting first when there is none.

        Raises:
            TargetError: unknown or changed host key, missing known_hosts or identity file,
                failed authentication.
            Unreachable: the host cannot be reached (refused, timed out, ...).
        """
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            self._conn = None
            self._conn = await self._connect()
            return self._conn

    async def close(self) -> None:
        """Close the connection (waiting up to 5 s for it to close). Idempotent."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 5)

    def _options(self) -> dict[str, Any]:
        """``asyncssh.connect`` keyword arguments (public keys only, verified host key)."""
        addr, opts = self.address, self._opts
        shown = opts.known_hosts or "~/.ssh/known_hosts"
        known_hosts = Path(shown).expanduser()
        if not known_hosts.is_file():
            raise TargetError(
                f"cannot verify the host key of {addr.host}: {known_hosts} does not exist. "
                f"Add the host with `{addr.keyscan_into(shown)}` (then compare "
                f"`ssh-keygen -lf {shown}` with the fingerprint the machine's owner reports) "
                "or set accelopt.ssh.knownHosts."
            )
        kwargs: dict[str, Any] = {
            "port": addr.port,
            "known_hosts": str(known_hosts),
            "preferred_auth": "publickey",
            "password": None,
            "kbdint_auth": False,
            "connect_timeout": opts.connect_timeout_s,
            "keepalive_interval": KEEPALIVE_INTERVAL_S,
            "keepalive_count_max": KEEPALIVE_COUNT_MAX,
        }
        if addr.user:
            kwargs["username"] = addr.user
        if opts.identity_file:
            key = Path(opts.identity_file).expanduser()
            if not key.is_file():
                raise TargetError(f"accelopt.ssh.identityFile {key} does not exist")
            kwargs["client_keys"] = [str(key)]
        return kwargs

    async def _connect(self) -> Any:
        import asyncssh

        addr, opts = self.address, self._opts
        kwargs = self._options()
        shown = opts.known_hosts or "~/.ssh/known_hosts"
        try:
            return await asyncio.wait_for(
                asyncssh.connect(addr.host, **kwargs), opts.connect_timeout_s + 5
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise TargetError(
                f"the host key of {addr.host} (port {addr.port}) is not in "
                f"{kwargs['known_hosts']} or does not match it ({exc.reason}). AccelOpt does "
                "not trust unknown hosts. If this is the right machine, add its key with "
                f"`{addr.keyscan_into(shown)}` and compare `ssh-keygen -lf {shown}` with the "
                "fingerprint the machine's owner reports. A changed key can mean the machine "
                "was reinstalled, or an attack: ask first."
            ) from exc
        except asyncssh.PermissionDenied as exc:
            raise TargetError(
                f"SSH authentication to {addr} failed ({exc.reason}): AccelOpt uses public keys "
                "only (the SSH agent or accelopt.ssh.identityFile); check that your key is in "
                "the remote ~/.ssh/authorized_keys and that `ssh -o BatchMode=yes "
                f"{'-p ' + str(addr.port) + ' ' if addr.port != 22 else ''}"
                f"{addr.user + '@' if addr.user else ''}{addr.host} true` works."
            ) from exc
        except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
            raise Unreachable(f"cannot reach {addr}: {describe(exc)}") from exc
