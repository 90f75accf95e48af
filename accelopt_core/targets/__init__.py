"""Targets: where candidates are evaluated (local subprocesses, ssh, ray).

:func:`make_target` picks the implementation from ``settings.target``; the ssh and ray modules
are imported only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelopt_core.targets.base import Target, TargetError

if TYPE_CHECKING:
    from accelopt_core.settings import Settings

__all__ = ["Target", "TargetError", "make_target"]


def make_target(settings: Settings) -> Target:
    """The target named by ``settings.target``.

    ``local`` -> :class:`~accelopt_core.targets.local.LocalTarget`;
    ``ssh://[user@]host[:port]`` -> ``accelopt_core.targets.ssh.SSHTarget``;
    ``ray://host:port`` or ``ray:auto`` -> ``accelopt_core.targets.ray.RayTarget``.

    Raises:
        TargetError: an unknown target spec.
    """
    spec = settings.target
    if spec == "local":
        from accelopt_core.targets.local import LocalTarget

        return LocalTarget(settings)
    if spec.startswith("ssh://"):
        from accelopt_core.targets.ssh import SSHTarget

        return SSHTarget(settings)
    if spec.startswith("ray"):
        from accelopt_core.targets.ray import RayTarget

        return RayTarget(settings)
    raise TargetError(
        f"unknown target {spec!r}: use 'local', 'ssh://[user@]host[:port]', "
        "'ray://host:port' or 'ray:auto'"
    )
