"""The starters' part of the sandbox (issue 34): the command and environment a worker is started
with (:func:`worker_command`). Used by the local target, the ssh agent and the Ray task and
actor; the Ray target ships this module by value (no class here), with :mod:`.environment`,
:mod:`.paths`, :mod:`.bwrap` and :mod:`.landlock`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping

from . import bwrap, environment, landlock, paths


def disabled(environ: Mapping[str, str] | None = None) -> set[str]:
    """The parts :data:`.environment.OFF_VAR` turns off (``all``: every one)."""
    env = os.environ if environ is None else environ
    names = {n.strip().lower() for n in env.get(environment.OFF_VAR, "").split(",") if n.strip()}
    return {"landlock", "bwrap", "netns", "seccomp"} if "all" in names else names


def landlock_abi(off: set[str]) -> int:
    """The usable Landlock ABI here, 0 when off or below :data:`.landlock.MIN_ABI`."""
    if "landlock" in off:
        return 0
    version = landlock.abi()
    return version if version >= landlock.MIN_ABI else 0


def worker_command(
    argv: list[str], environ: Mapping[str, str], keep: Iterable[str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """``(command, environment)`` to start a worker with: ``environ`` allowlisted
    (:func:`.environment.confined_environ` with the user's ``keep`` names), and ``argv``
    wrapped in bubblewrap (:mod:`.bwrap`) where Landlock is missing and bubblewrap works."""
    env = environment.confined_environ(environ, keep)
    off = disabled(environ)
    if landlock_abi(off) or "bwrap" in off or environ.get(bwrap.FLAG_VAR):
        return list(argv), env
    path, _ = bwrap.usable()
    if path is None:
        return list(argv), env
    caches = environment.cache_dirs(environment.compile_caches(env))
    homes = paths.homes(env)
    exe = shutil.which(argv[0]) or argv[0]
    python = os.path.dirname(os.path.dirname(os.path.realpath(exe)))  # <prefix>/bin/python
    inside = paths.inside_homes(env, homes) + [python] * paths.under(python, homes)
    command = bwrap.command(path, list(argv), homes, inside, caches, paths.device_nodes())
    return command, env
