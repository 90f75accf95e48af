"""The ``ssh://`` target: evaluations on a remote GPU or Trainium machine over asyncssh.

- :mod:`.address`: the ``ssh://[user@]host[:port]`` spec (:class:`SSHAddress`).
- :mod:`.connection`: the one asyncssh connection, host-key verification, reconnection.
- :mod:`.agent`: the client side of the remote agent (:mod:`accelopt_core.onsite.process.agent`).
- :mod:`.target`: :class:`SSHTarget`, the Target protocol over those.
"""

from accelopt_core.targets.ssh.address import SSHAddress
from accelopt_core.targets.ssh.target import TIMEOUT_MARGIN_S, SSHTarget

__all__ = ["SSHAddress", "SSHTarget", "TIMEOUT_MARGIN_S"]
