"""The scratch directories of a worker's evaluations, and the sweep of those left by dead workers
(issue 34). Standard library only; the Ray target ships this module by value.

A worker makes its scratch roots once (:func:`scratch_roots`, named ``accelopt-eval-<pid>-...``,
in the temporary directory and in ``/dev/shm``); every evaluation's directories are made inside
them (:func:`..judge.peers.new_dirs`), so the Landlock ruleset built once per worker grants
exactly them. A worker removes its roots when it ends (:func:`remove_scratch`); a worker
killed with SIGKILL cannot, so its starter sweeps after a kill and every new evaluation sweeps
first (:func:`sweep`: the roots and directories whose pid is gone).
"""

from __future__ import annotations

import os
import shutil
import tempfile

#: Name prefix of the scratch directories, followed by the pid of the process that made them.
PREFIX = "accelopt-eval-"
SHM = "/dev/shm"

_ROOTS: list[str] = []


def _shm_usable() -> bool:
    return os.path.isdir(SHM) and os.access(SHM, os.W_OK | os.X_OK)


def scratch_roots() -> list[str]:
    """This process's scratch roots (mode 0700, made at the first call): one, in the temporary
    directory. (Until issue 50 a second one in ``/dev/shm`` held the exchange files; tensors
    now cross in anonymous shared memory, :mod:`..runtime.exchange`, and :func:`sweep` still
    removes what dead workers of older versions left there.)"""
    if not _ROOTS:
        _ROOTS.append(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    return list(_ROOTS)


def remove_scratch() -> None:
    """Remove :func:`scratch_roots` (a worker that ends; errors ignored), only where this
    process made them: a warm worker's supervisors are its forks and share its roots, which
    outlive them."""
    mine = f"{PREFIX}{os.getpid()}-"
    while _ROOTS:
        root = _ROOTS.pop()
        if os.path.basename(root).startswith(mine):
            shutil.rmtree(root, ignore_errors=True)


def sweep(parents: list[str] | None = None) -> None:
    """Remove the scratch directories in ``parents`` (default: the temporary directory and
    ``/dev/shm``) whose process (the pid in their name) is gone: a worker or supervisor killed
    with SIGKILL (its owner died, a target cancelled it) cannot remove its own. Errors are
    ignored."""
    if parents is None:
        parents = [tempfile.gettempdir()] + ([SHM] if _shm_usable() else [])
    for parent in parents:
        try:
            names = [n for n in os.listdir(parent) if n.startswith(PREFIX)]
        except OSError:
            continue
        for name in names:
            pid = name[len(PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True
