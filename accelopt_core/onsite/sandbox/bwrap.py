"""bubblewrap around a worker where the kernel has no usable Landlock (issue 34).

Landlock confines a process from inside (the judge restricts itself per candidate); bubblewrap
must start the process, so the starters (the local target, the ssh agent, the Ray task and
actor) wrap the worker's command with :func:`command` instead. The worker then sees:

- ``/`` read-only, with a private ``/tmp`` (its evaluations' scratch directories: ``TMPDIR``
  is ``/tmp``), a minimal ``/dev`` (``null``, ``zero``, ``urandom``, ... and a private
  ``/dev/shm``) plus the accelerators' device nodes, a ``/proc`` of its own PID namespace (no
  other process of the machine is visible);
- the home directories replaced by empty read-only ones, except the Python environment inside
  them and the shared compiler caches (both read-only: evaluations compile into caches of
  their own, :mod:`.caches`);
- its own network namespace (only a loopback interface), and death with its starter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable

#: Set in the wrapped worker's environment: the worker reports ``bubblewrap``.
FLAG_VAR = "ACCELOPT_SANDBOX_BWRAP"


_USABLE: dict = {}


def usable() -> tuple[str | None, str | None]:
    """``(path of bwrap, None)`` when ``bwrap`` is on PATH and can make the namespaces here,
    else ``(None, why not)``. Tried once per process (~10 ms)."""
    here = (os.uname().nodename, os.getpid())  # the Ray target ships this module's globals
    if here not in _USABLE:
        _USABLE.clear()
        _USABLE[here] = _try()
    return _USABLE[here]


def _try() -> tuple[str | None, str | None]:
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap is not installed"
    try:
        done = subprocess.run(
            [path, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "true"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"bubblewrap could not run: {exc}"
    if done.returncode != 0:
        return None, f"bubblewrap could not run: {done.stderr.strip()[-200:]}"
    return path, None


def command(
    bwrap: str,
    argv: list[str],
    homes: Iterable[str],
    inside_homes: Iterable[str],
    caches: Iterable[str],
    devices: Iterable[str],
) -> list[str]:
    """``argv`` run by ``bwrap`` as the module describes: ``homes`` hidden, the paths of
    ``inside_homes`` bound back read-only, ``caches`` bound read-only (:mod:`.caches`),
    ``devices`` bound."""
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for home in homes:
        args += ["--tmpfs", home]
    for path in inside_homes:
        args += ["--ro-bind", path, path]
    for path in caches:  # read-only: evaluations compile into caches of their own (issue 53)
        args += ["--ro-bind", path, path]
    for home in homes:  # the mount points are made: nothing else may be written there
        args += ["--remount-ro", home]
    for path in devices:
        if os.path.basename(path) != "null":
            args += ["--dev-bind", path, path]
    args += ["--unshare-net", "--unshare-pid", "--die-with-parent"]
    args += ["--setenv", "TMPDIR", "/tmp", "--setenv", FLAG_VAR, "1", "--", *argv]
    return args
