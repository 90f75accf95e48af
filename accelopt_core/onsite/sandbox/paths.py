"""What a sandboxed process may read and write (issue 34).

- Read (and execute): everything outside the home directories (``/home``, ``/root``,
  ``/Users``, ``$HOME`` and the account's home in the password database) and ``/dev`` (of
  which only :data:`DEV_READABLE` and the device nodes below; its names may be listed),
  plus, inside the homes,
  the Python environment (``sys.prefix`` and its base, every ``sys.path`` entry, the sources of
  editable installs) and the directories named by ``PATH``, ``LD_LIBRARY_PATH``,
  ``PYTHONPATH``, ``CUDA_HOME`` and the ``TRITON_*``/``NEURON_*``/``CUDA_*`` path variables:
  a candidate cannot read ``~/.ssh``, ``~/.aws``, ``~/.config`` or a project's ``.env``.
- Read only: the worker's shared compiler caches (:mod:`.caches`, issue 53).
- Write: the evaluation's scratch directories (its own compiler caches inside), ``/dev/null``
  and the accelerators' device nodes (:func:`device_nodes`: ``/dev/nvidia*`` and
  ``/dev/nvidia-caps`` for CUDA, ``/dev/neuron*`` for the Neuron runtime, ``/dev/kfd`` and
  ``/dev/dri`` for ROCm).
- Write existing files, create nothing: beneath ``/proc`` (:data:`FILES_WRITABLE`).
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable, Mapping

HOME_ROOTS = ("/home", "/root", "/Users")

#: Variables whose values are directories (``os.pathsep`` lists) the stack reads.
PATH_VARS = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX")
PATH_PREFIXES = ("TRITON_", "NEURON_", "CUDA_")

#: The device nodes anyone may read; the rest of ``/dev`` (raw disks, the kernel log, ...) is
#: not readable, only listable (:data:`LISTABLE`: the stack looks for ``/dev/nvidia0`` and
#: ``/dev/neuron*`` there).
DEV_READABLE = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
LISTABLE = ("/dev",)

#: Where existing files may be opened for writing and truncated, and nothing created or
#: removed (:data:`.landlock.FILES_WRITE`). The CUDA driver's initialisation (``cuInit``, under
#: ``cudaGetDeviceCount``) names its helper threads with ``fopen("/proc/self/task/<tid>/comm",
#: "wb")`` and fails with error 304 ("OS call failed") when Landlock refuses it (found with
#: .device/sandbox-probe on an H100, driver 580.159, 2026-11-26). ``/proc/self`` names another
#: directory in every process and the candidates are forked after the judge is confined, so
#: the rule is on ``/proc``. The kernel's own checks keep an ordinary user to its own
#: processes' settings; for root, :mod:`.procfs` makes the rest of ``/proc`` read-only.
FILES_WRITABLE = ("/proc",)

#: Device nodes a candidate may open for writing (those present), by glob.
DEVICE_GLOBS = (
    "/dev/null",
    "/dev/nvidia*",
    "/dev/nvidia-caps",
    "/dev/neuron*",
    "/dev/kfd",
    "/dev/dri",
)


def _real(path: str) -> str:
    return os.path.realpath(path)


def under(path: str, roots: Iterable[str]) -> bool:
    """True when ``path`` is one of ``roots`` or beneath one."""
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def homes(environ: Mapping[str, str]) -> list[str]:
    """The home directories (real paths, existing ones): :data:`HOME_ROOTS`, ``$HOME`` and
    the account's home; never ``/``."""
    found = [*HOME_ROOTS, environ.get("HOME") or ""]
    try:
        import pwd

        found.append(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        pass
    out = {_real(p) for p in found if p and os.path.isdir(p)}
    out.discard("/")
    return sorted(out)


def everything_but(excluded: list[str], root: str = "/") -> list[str]:
    """Paths whose subtrees cover all of ``root`` except the ``excluded`` subtrees (the
    directories on the way to them are not listed themselves: they can be walked through, not
    listed). An entry that is a link into an excluded subtree is left out."""
    out: list[str] = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return out
    for name in names:
        path = os.path.join(root, name)
        real = _real(path)
        if path in excluded or under(real, excluded):
            continue
        if any(e.startswith(path.rstrip("/") + "/") for e in excluded):
            out.extend(everything_but(excluded, path))
        else:
            out.append(path)
    return out


def _editable_sources() -> list[str]:
    """Where setuptools' editable installs keep their packages (the ``MAPPING`` of each
    ``__editable__...finder`` on ``sys.meta_path``)."""
    out = []
    for finder in sys.meta_path:
        module = sys.modules.get(getattr(finder, "__module__", "") or "")
        mapping = getattr(module, "MAPPING", None)
        if isinstance(mapping, dict):
            out.extend(str(v) for v in mapping.values())
    return out


def python_paths(environ: Mapping[str, str]) -> list[str]:
    """The Python environment and the library directories (absolute, existing paths)."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    found += [p for p in sys.path if p]
    found += _editable_sources()
    for name, value in environ.items():
        if name in PATH_VARS or name.startswith(PATH_PREFIXES):
            found.extend(value.split(os.pathsep))
    return [p for p in dict.fromkeys(found) if os.path.isabs(p) and os.path.exists(p)]


def inside_homes(environ: Mapping[str, str], excluded: list[str]) -> list[str]:
    """The paths of :func:`python_paths` inside the ``excluded`` home directories."""
    return [p for p in python_paths(environ) if under(_real(p), excluded)]


def readable(environ: Mapping[str, str], writable: Iterable[str] = ()) -> list[str]:
    """The read-only part of the sandbox's rules: everything outside :func:`homes`, and the
    Python environment inside them (a path in ``writable``, such as a compiler cache, is
    granted by its own rule)."""
    excluded = homes(environ)
    skip = set(writable)
    everything = everything_but([*excluded, "/dev"]) + inside_homes(environ, excluded)
    return [p for p in everything + list(DEV_READABLE) if p not in skip]


def device_nodes() -> list[str]:
    """``/dev/null`` and the accelerators' device nodes present here."""
    return sorted({p for pattern in DEVICE_GLOBS for p in glob.glob(pattern)})
