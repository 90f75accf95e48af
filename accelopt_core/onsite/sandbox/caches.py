"""Compile caches an evaluation cannot share (issue 53, item 4; DESIGN.md, "Evaluating a
candidate", item 8). Standard library only: shipped to bare targets.

The worker's compile caches (:func:`.environment.compile_caches`: ``~/.cache/accelopt/compile``)
outlive evaluations; a file a candidate planted there (a launcher library, a cubin, Triton's
``triton_key`` memo) would be loaded by every later evaluation, and by the compile stage, as
if Triton had compiled it. So:

- each evaluation compiles into caches of its own (:func:`use_private`, called by the judge
  before it confines itself: :func:`private_caches` under the evaluation's scratch directory,
  removed with it); the judge, the candidate, reference and compile-stage processes inherit
  them;
- the shared caches stay readable and are no longer writable from the judge's process tree
  (the judge's Landlock rules grant them read access only, :func:`.policy.setup_worker`;
  bubblewrap binds them read-only, :func:`.bwrap.command`);
- Triton reads through both: :class:`LayeredCacheManager` (``TRITON_CACHE_MANAGER``) looks in
  the evaluation's cache first, then in the shared one, and writes only to the evaluation's.

Only the worker's own process, which runs no candidate or harness code, adds to the shared
caches, and only what it computed itself (its warm parent's ``triton_key()`` memo,
:func:`..triton.twin.install_key`). What an evaluation compiled is not promoted: its cache is
written by processes that ran the candidate's code, so nothing in it can be trusted.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping

from .environment import CACHE_VARS

#: The shared Triton cache an evaluation reads (read-only), set by :func:`use_private`.
SHARED_VAR = "ACCELOPT_SHARED_TRITON_CACHE"
#: Triton's variable naming its cache manager class (``MODULE:CLASS``).
MANAGER_VAR = "TRITON_CACHE_MANAGER"
#: Name of the evaluation's cache directory in its scratch root.
PRIVATE_NAME = "caches"


def private_root(dirs: Mapping[str, str]) -> str:
    """The evaluation's cache root: ``<dirs["root"]>/caches`` (``dirs``:
    :func:`..judge.peers.new_dirs`)."""
    return os.path.join(dirs["root"], PRIVATE_NAME)


def private_caches(root: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``{variable: directory}`` of the evaluation's caches under ``root``, one per
    :data:`.environment.CACHE_VARS`; a variable whose value is a URL (``s3://...``, Neuron's
    remote cache) is left as the user set it."""
    out = {}
    for var, sub in CACHE_VARS.items():
        value = environ.get(var) or ""
        out[var] = value if "://" in value else os.path.join(root, sub)
    return out


def use_private(dirs: Mapping[str, str]) -> dict[str, str]:
    """Point this process's compile caches at the evaluation's own (:func:`private_caches`
    beneath :func:`private_root`, made mode 0700) and Triton at :class:`LayeredCacheManager`
    over the shared Triton cache (the worker's ``TRITON_CACHE_DIR``, kept in
    :data:`SHARED_VAR`). Returns the variables set. A user's own ``TRITON_CACHE_MANAGER`` is
    replaced: it could write where every evaluation reads.

    Raises:
        OSError: a directory could not be made.
    """
    root = private_root(dirs)
    caches = private_caches(root, os.environ)
    for value in caches.values():
        if "://" not in value:
            os.makedirs(value, mode=0o700, exist_ok=True)
    shared = os.environ.get(SHARED_VAR) or os.environ.get("TRITON_CACHE_DIR") or ""
    updates = dict(caches, **{MANAGER_VAR: f"{__name__}:LayeredCacheManager"})
    if shared and os.path.abspath(shared) != os.path.abspath(caches["TRITON_CACHE_DIR"]):
        updates[SHARED_VAR] = shared
    os.environ.update(updates)
    return updates


class CacheManager:
    """Stands for ``triton.runtime.cache.CacheManager``: Triton accepts a manager class whose
    bases include a class of that name (``knobs.env_class``), and this module imports no
    triton."""


class LayeredCacheManager(CacheManager):
    """Triton's file cache manager over two directories: the evaluation's (``TRITON_CACHE_DIR``,
    read and written) and the shared one (:data:`SHARED_VAR`, read only). Same layout and
    behaviour as ``triton.runtime.cache.FileCacheManager`` (a directory per key, a file per
    name, groups as ``__grp__<name>`` JSON files listing absolute paths, writes through a
    temporary directory and ``os.replace``); a name found in the evaluation's directory wins.
    ``override``/``dump`` managers (``TRITON_KERNEL_OVERRIDE``, ``TRITON_KERNEL_DUMP``) are
    Triton's own.

    Raises:
        RuntimeError: no ``TRITON_CACHE_DIR`` (as Triton's).
    """

    def __new__(cls, key: str, override: bool = False, dump: bool = False):
        if override or dump:
            from triton.runtime.cache import FileCacheManager

            return FileCacheManager(key, override=override, dump=dump)
        return super().__new__(cls)

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        own = os.environ.get("TRITON_CACHE_DIR")
        if not own:
            raise RuntimeError("Could not create or locate cache dir")
        self.key = key
        self.cache_dir = os.path.join(own, key)
        self.lock_path = os.path.join(self.cache_dir, "lock")
        os.makedirs(self.cache_dir, exist_ok=True)
        shared = os.environ.get(SHARED_VAR)
        self.shared_dir = os.path.join(shared, key) if shared else None

    def _find(self, filename: str) -> str | None:
        for base in (self.cache_dir, self.shared_dir):
            if base is not None:
                path = os.path.join(base, filename)
                if os.path.exists(path):
                    return path
        return None

    def has_file(self, filename: str) -> bool:
        """True when either directory holds ``filename``."""
        return self._find(filename) is not None

    def get_file(self, filename: str) -> str | None:
        """The path of ``filename`` (the evaluation's first), or None."""
        return self._find(filename)

    def get_group(self, filename: str) -> dict[str, str] | None:
        """``{name: path}`` of the group ``filename``, or None when it is missing, corrupt or
        names a file that is gone."""
        path = self._find(f"__grp__{filename}")
        if path is None:
            return None
        try:
            with open(path) as f:
                children = json.load(f).get("child_paths")
        except (OSError, ValueError, AttributeError):
            return None
        if not isinstance(children, dict):
            return None
        if not all(isinstance(p, str) and os.path.exists(p) for p in children.values()):
            return None
        return dict(children)

    def put_group(self, filename: str, group: dict[str, str]) -> str:
        """Record ``group`` (``{name: path}``) as the group ``filename``; its path."""
        return self.put(json.dumps({"child_paths": group}), f"__grp__{filename}", binary=False)

    def put(self, data, filename: str, binary: bool = True) -> str:
        """Write ``data`` (bytes, else its ``str``) as ``filename`` in the evaluation's
        directory; its path."""
        binary = isinstance(data, bytes)
        if not binary:
            data = str(data)
        path = os.path.join(self.cache_dir, filename)
        temp_dir = os.path.join(self.cache_dir, f"tmp.pid_{os.getpid()}_{uuid.uuid4()}")
        os.makedirs(temp_dir, exist_ok=True)
        temp_path = os.path.join(temp_dir, filename)
        with open(temp_path, "wb" if binary else "w") as f:
            f.write(data)
        os.replace(temp_path, path)
        os.removedirs(temp_dir)
        return path
