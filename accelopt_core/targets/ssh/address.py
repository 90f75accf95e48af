"""The ``ssh://[user@]host[:port]`` target spec."""

from __future__ import annotations

import re
from dataclasses import dataclass

from accelopt_core.targets.base import TargetError


@dataclass(frozen=True)
class SSHAddress:
    """A parsed ``ssh://[user@]host[:port]`` spec (port 22 and the current user by default)."""

    host: str
    port: int = 22
    user: str | None = None

    @classmethod
    def parse(cls, spec: str) -> SSHAddress:
        """Parse the target spec. Raises TargetError for a malformed spec (bad port, no host)."""
        m = re.fullmatch(r"ssh://(?:([^@/]+)@)?(\[[^\]]+\]|[^:/@]+)(?::(\d+))?/?", spec.strip())
        if not m:
            raise TargetError(
                f"invalid ssh target {spec!r}: expected ssh://[user@]host[:port], "
                "e.g. ssh://ubuntu@gpu-box:22"
            )
        user, host, port = m.groups()
        host = host.strip("[]")
        port_n = int(port) if port else 22
        if not 0 < port_n < 65536:
            raise TargetError(f"invalid ssh target {spec!r}: port {port_n} out of range")
        return cls(host=host, port=port_n, user=user)

    @property
    def keyscan(self) -> str:
        """The command that adds this host's key to ~/.ssh/known_hosts."""
        return self.keyscan_into("~/.ssh/known_hosts")

    def keyscan_into(self, known_hosts: str) -> str:
        """The command that adds this host's key to the file ``known_hosts``."""
        port = f"-p {self.port} " if self.port != 22 else ""
        return f"ssh-keyscan {port}{self.host} >> {known_hosts}"

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        return f"{user}{self.host}{port}"
