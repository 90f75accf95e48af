"""The local import closure of some files, seen from the host (pure AST, standard library only).

:func:`import_closure` answers, without importing anything, which of the user's modules a set
of files imports, transitively (what a remote target must receive), with a content digest for
caches; site-packages are never part of it. :class:`ClosureError` locations are 1-based lines
and 1-based columns, as in a compiler message.
"""

from __future__ import annotations

import ast
import hashlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from accelopt_core.kernelfile.project import (
    _absolute,
    _absolute_module,
    _locate,
    _package_of,
    _prefixes,
    module_name,
    script_module,
)

CLOSURE_CAP_BYTES = 5 * 1024 * 1024
"""Default cap on an import closure's total size (issue 13: "a size cap (say 5 MiB)")."""


class ClosureError(Exception):
    """A file of an import closure cannot be used; the message is ``path:line:col: message``.

    ``path`` is the file's absolute path as a string, ``line`` / ``col`` are 1-based.
    """

    def __init__(self, path: str | Path, line: int, col: int, message: str) -> None:
        super().__init__(f"{path}:{line}:{col}: {message}")
        self.path = str(path)
        self.line = line
        self.col = col
        self.message = message


@dataclass(frozen=True)
class Closure:
    """The local import closure of some files.

    ``files``: root-relative posix path (``"mypkg/ops/rms_norm.py"``) -> source text (UTF-8,
    a byte-order mark dropped); ``origins``: same keys -> absolute path on this machine;
    ``modules``: dotted module name -> relative path (a start file whose name is not a valid
    module is there under its internal name, :func:`~.project.script_module`);
    ``total_bytes``: the files' total size on disk, in bytes.
    """

    files: dict[str, str]
    origins: dict[str, Path]
    modules: dict[str, str]
    total_bytes: int
    names: dict[str, str] = field(default_factory=dict, compare=False)
    sizes: dict[str, int] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name, rel in self.modules.items():
            self.names.setdefault(rel, name)

    def key_of(self, path: Path) -> str | None:
        """The key of ``files`` (import-root-relative path) of the file ``path`` on this
        machine, None when the file is not in the closure."""
        path = Path(path).resolve()
        return next((k for k, origin in self.origins.items() if origin.resolve() == path), None)

    def module_of(self, key: str) -> str | None:
        """The dotted module name the file ``key`` of ``files`` is imported under (an internal
        name for a file whose name is not a module), None for a key not in the closure."""
        return self.names.get(key)

    @cached_property
    def digest(self) -> str:
        """sha256 hex digest over the sorted relative paths and their contents: an edit to any
        file of the closure, or a file added or removed, changes it."""
        h = hashlib.sha256()
        for rel in sorted(self.files):
            for part in (rel.encode(), self.files[rel].encode()):
                h.update(len(part).to_bytes(8, "big"))
                h.update(part)
        return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Reading and parsing
# ---------------------------------------------------------------------------------------------


def _read_source(path: Path) -> tuple[str, int]:
    """(text, size in bytes) of a source file; ClosureError when unreadable or not UTF-8."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ClosureError(path, 1, 1, f"cannot read: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8-sig"), len(raw)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = raw[exc.start : exc.start + 1].hex()
        raise ClosureError(path, line, col, f"not UTF-8 text (byte 0x{byte})") from exc


def _parse(text: str, path: Path) -> ast.Module:
    """The AST of ``text``; ClosureError located at a syntax error."""
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise ClosureError(path, exc.lineno or 1, exc.offset or 1, exc.msg) from exc
    except ValueError as exc:  # null bytes (Python 3.11)
        raise ClosureError(path, 1, 1, str(exc)) from exc


def _literal_import(call: ast.Call) -> bool:
    """``importlib.import_module("name")`` / ``__import__("name")`` with a literal name."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (
        name in ("import_module", "__import__")
        and bool(call.args)
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    )


def _imported_modules(tree: ast.Module, package: str | None) -> list[str]:
    """Every module an import anywhere in ``tree`` may load: each imported module, its parent
    packages, ``base.name`` for ``from base import name`` (``name`` may be a submodule), and
    literal ``importlib.import_module("a.b")`` / ``__import__("a.b")`` calls (a relative literal
    resolves against the importing module's package, as if ``package=__package__``)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _literal_import(node):
            arg = node.args[0].value
            level = len(arg) - len(arg.lstrip("."))
            base = _absolute_module(level, arg[level:] or None, package) if level else arg
            names += [base] if base else []
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute_module(node.level, node.module, package)
            if base is not None:
                names.append(base)
                names += [f"{base}.{a.name}" for a in node.names if a.name != "*"]
    return names


# ---------------------------------------------------------------------------------------------
# Import closure
# ---------------------------------------------------------------------------------------------


def _human(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value, unit = (size / 1024, "KiB") if size < 1024 * 1024 else (size / 1024 / 1024, "MiB")
    return f"{value:.1f}".removesuffix(".0") + f" {unit}"


class _Walk:
    """The breadth-first walk behind :func:`import_closure`."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = [Path(r).resolve() for r in roots]
        self.files: dict[str, str] = {}
        self.origins: dict[str, Path] = {}
        self.modules: dict[str, str] = {}
        self.sizes: dict[str, int] = {}
        self.queue: deque[tuple[Path, str, str]] = deque()

    def add_start(self, path: Path) -> None:
        path = _absolute(path)
        try:
            name, root = module_name(path, self.roots)
            rel = path.relative_to(root).as_posix()
        except ValueError:  # ``19_ReLU.py``, ``bench-rms.py``: an internal name, no package
            name = base = script_module(path)
            taken = {n for _, n, _ in self.queue} | set(self.modules)
            for i in range(2, 1000):
                if name not in taken:
                    break
                name = f"{base}_{i}"
            rel = f"{name}.py"
        self.queue.append((path, name, rel))
        self.add_modules(_prefixes(name)[:-1])

    def add_modules(self, names: Sequence[str]) -> None:
        for name in names:
            for prefix in _prefixes(name):
                if prefix in self.modules:
                    continue
                found = _locate(prefix, self.roots)
                if found is not None:
                    path, root = found
                    self.queue.append((path, prefix, path.relative_to(root).as_posix()))

    def run(self) -> None:
        while self.queue:
            path, name, rel = self.queue.popleft()
            if name in self.modules:
                continue
            self.modules[name] = rel
            if rel in self.files:
                continue
            text, size = _read_source(path)
            self.files[rel], self.origins[rel], self.sizes[rel] = text, path, size
            tree = _parse(text, path)
            self.add_modules(_imported_modules(tree, _package_of(name, path)))


def import_closure(
    paths: Sequence[Path], roots: Sequence[Path], *, cap_bytes: int | None = CLOSURE_CAP_BYTES
) -> Closure:
    """The local import closure of ``paths`` (e.g. the harness and the kernel module) under
    ``roots`` (from :func:`import_roots`): each file, every module any import in it may load
    (module level, inside functions, under ``if`` / ``try``; absolute and relative; ``from pkg
    import name`` where ``name`` is a submodule; literal ``importlib.import_module("a.b")``)
    when it resolves under the roots, and the parent packages' ``__init__.py`` of every module
    (Python runs them), transitively. Cycles are fine; namespace packages (no ``__init__.py``) are allowed; modules not under the roots
    (standard library, site-packages) are left out. When two roots hold the same relative path
    the first root wins, as on ``sys.path``. A start file whose name is not an importable module
    (``19_ReLU.py``, ``bench-rms.py``, ``my.problem.py``) is kept at the top under its internal
    module name (:func:`~.project.script_module`; ``_accelopt_file_19_ReLU.py``), with no
    package (its relative imports resolve to nothing); two such files get distinct names.

    Raises ClosureError: a syntax error in a closure file (located at the error), an unreadable
    or non-UTF-8 file (located at the first bad byte), or a closure whose total size is over
    ``cap_bytes`` bytes (:func:`check_cap`, located at the first of ``paths``; None: not
    checked here). Never a partial result.
    """
    walk = _Walk(roots)
    for path in paths:
        walk.add_start(path)
    walk.run()
    closure = Closure(
        walk.files, walk.origins, walk.modules, sum(walk.sizes.values()), sizes=walk.sizes
    )
    if cap_bytes is not None:
        check_cap(closure, paths[0], cap_bytes)
    return closure


def check_cap(closure: Closure, at: Path, cap_bytes: int = CLOSURE_CAP_BYTES) -> None:
    """Raise ClosureError, located at the file ``at`` (line 1), when ``closure`` is over
    ``cap_bytes`` bytes: the message gives the total, the cap and the three largest files
    with their sizes."""
    if closure.total_bytes <= cap_bytes:
        return
    largest = sorted(closure.sizes.items(), key=lambda item: (-item[1], item[0]))[:3]
    listed = ", ".join(f"{rel} ({_human(size)})" for rel, size in largest)
    message = (
        f"import closure of {Path(at).name} is {_human(closure.total_bytes)}, over the "
        f"{_human(cap_bytes)} cap: {listed}"
    )
    raise ClosureError(_absolute(at), 1, 1, message)
