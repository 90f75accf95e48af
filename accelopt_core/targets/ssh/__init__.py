"""The ``ssh://`` target: evaluations on a remote GPU or Trainium machine over asyncssh."""

from accelopt_core.targets.ssh.target import AGENT, TIMEOUT_MARGIN_S, SSHAddress, SSHTarget

__all__ = ["AGENT", "SSHAddress", "SSHTarget", "TIMEOUT_MARGIN_S"]
