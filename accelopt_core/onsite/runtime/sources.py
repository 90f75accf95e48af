"""The user's modules served from memory on the target (issue 13, "The candidate runs as the
real module, everywhere").

The request carries the local import closure of the kernel module and the harness
(:attr:`.protocol.EvalRequest.files`: import-root-relative path -> source). A
:class:`SourceFinder` at the front of ``sys.meta_path`` serves exactly those modules under their
real dotted names (``mypkg/ops/rms_norm.py`` -> ``mypkg.ops.rms_norm``), so relative imports
resolve and the harness's own ``import`` gets the candidate where the candidate replaces the
kernel module. Nothing is written on the target, and a peer process cannot swap a module file
under another (each process serves the sources it received before the fork). Every module is
registered in :mod:`linecache` under its file name, so ``inspect.getsource`` (``triton.jit``)
and tracebacks work. Standard library only.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Mapping


def module_of(path: str) -> tuple[str, bool]:
    """``("mypkg.ops.rms_norm", False)`` for ``mypkg/ops/rms_norm.py``, ``("mypkg", True)`` for
    ``mypkg/__init__.py``. Raises ValueError for a path that is not a ``.py`` file."""
    if not path.endswith(".py"):
        raise ValueError(f"not a Python module path: {path!r}")
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


class SourceFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the modules of ``files`` from memory.

    Args:
        files: import-root-relative POSIX path -> source text.
        filenames: path -> the file name a module is compiled under (the candidate's
            ``<candidate:NAME>``, so failures are located in it); default ``<src:PATH>``.

    Directories with modules but no ``__init__.py`` are namespace packages (an empty module
    with a ``__path__``), as for Python's own finder.
    """

    def __init__(self, files: Mapping[str, str], filenames: Mapping[str, str] | None = None):
        self.table: dict[str, tuple[str | None, bool]] = {}
        self.files = dict(files)
        self.filenames = dict(filenames or {})
        for path in sorted(self.files):
            name, package = module_of(path)
            self.table[name] = (path, package)
            parts = name.split(".")
            for i in range(1, len(parts)):
                self.table.setdefault(".".join(parts[:i]), (None, True))

    def filename(self, path: str) -> str:
        """The file name ``path``'s module is compiled under."""
        return self.filenames.get(path, f"<src:{path}>")

    def find_spec(self, fullname, path=None, target=None):
        found = self.table.get(fullname)
        if found is None:
            return None
        source_path, package = found
        origin = self.filename(source_path) if source_path else None
        spec = importlib.util.spec_from_loader(fullname, self, origin=origin, is_package=package)
        if spec is not None and package:
            spec.submodule_search_locations = []
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        import linecache

        path, _ = self.table[module.__spec__.name]
        if path is None:  # namespace package
            return
        source = self.files[path]
        filename = self.filename(path)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module.__file__ = filename
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)


def install(files: Mapping[str, str], filenames: Mapping[str, str] | None = None) -> SourceFinder:
    """Put a :class:`SourceFinder` for ``files`` first on ``sys.meta_path``, dropping modules of
    the same names imported before (a warm parent never imports user code, but be sure)."""
    finder = SourceFinder(files, filenames)
    for name in finder.table:
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, finder)
    return finder
