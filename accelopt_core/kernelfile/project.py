"""Where a kernel's modules live, seen from the host (pure path logic, standard library only).

- :func:`import_roots`: the directories imports resolve against, as the user's own test run sees
  them (the file's package root, the project root and its ``src/``, extra folders, the workspace);
- :func:`module_name` / :func:`resolve_module`: file <-> dotted module name under those roots;
- :func:`script_module`: the safe internal module name of a file whose name is not an importable
  module (``19_ReLU.py``, ``bench-rms.py``, ``36_RMSNorm_.py``): how it is loaded and shipped.

The import closure is :mod:`.closure`, the harness entry's targets :mod:`.entries`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from pathlib import Path

_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg")

#: Prefix of the internal module name a file with a non-importable name is loaded under.
SCRIPT_PREFIX = "_accelopt_file_"


def import_roots(
    path: Path, *, workspace: Sequence[Path] = (), extra: Sequence[Path] = ()
) -> list[Path]:
    """The directories imports of ``path`` (a file, or a directory) resolve against, in order,
    as the user's own test run would see them, resolved and without duplicates:

    (a) the file's package root: walking up from the file's directory while the directory has
    an ``__init__.py``, the parent of the top-most package directory (the file's own directory
    when it has no ``__init__.py``); (b) the nearest ancestor holding ``pyproject.toml``,
    ``setup.py`` or ``setup.cfg``: its ``src/`` first (a src layout's packages are imported as
    ``mypkg``, not ``src.mypkg``), then the project directory itself; (c) each of ``extra`` (e.g. the harness's
    directory); (d) each workspace folder. Only existing directories are kept. Raises nothing.
    """
    path = Path(path)
    start = path.resolve() if path.is_dir() else _absolute(path).parent
    candidates: list[Path] = [_package_root(start)]
    project = next((d for d in (start, *start.parents) if _is_project(d)), None)
    if project is not None:
        candidates += [project / "src", project]
    candidates += [Path(p) for p in extra] + [Path(p) for p in workspace]
    roots: list[Path] = []
    for candidate in candidates:
        resolved = candidate.resolve()
        if resolved.is_dir() and resolved not in roots:
            roots.append(resolved)
    return roots


def _absolute(path: Path) -> Path:
    """``path`` absolute with its directories resolved, the file itself not (a symlinked
    module keeps its place in the package)."""
    path = Path(path)
    return path.parent.resolve() / path.name


def _package_root(directory: Path) -> Path:
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        directory = directory.parent
    return directory


def _is_project(directory: Path) -> bool:
    return any((directory / marker).is_file() for marker in _PROJECT_MARKERS)


def _identifier(part: str) -> bool:
    return part.isidentifier() and not keyword.iskeyword(part)


def module_name(path: Path, roots: Sequence[Path]) -> tuple[str, Path]:
    """The dotted module name of the ``.py`` file ``path`` and the root it is relative to: the
    first of ``roots`` under which every directory between the root and the file, and the
    file's stem, are valid identifiers (``<root>/pkg/__init__.py`` -> ``pkg``).

    Raises ValueError (the message names the file) when the file is not a ``.py`` file or no
    root fits.
    """
    path = _absolute(path)
    if path.suffix == ".py":
        for root in roots:
            root = Path(root).resolve()
            try:
                parts = list(path.relative_to(root).with_suffix("").parts)
            except ValueError:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            if parts and all(_identifier(p) for p in parts):
                return ".".join(parts), root
    shown = ", ".join(str(r) for r in roots) or "no roots"
    raise ValueError(f"{path} is not an importable module under any import root ({shown})")


def _locate(name: str, roots: Sequence[Path]) -> tuple[Path, Path] | None:
    """(file, root) of module ``name``: a package's ``__init__.py`` before a module's ``.py``
    in one directory (as Python's path finder), the first root that has either."""
    parts = name.split(".")
    if not all(_identifier(p) for p in parts):
        return None
    for root in roots:
        root = Path(root).resolve()
        base = root.joinpath(*parts)
        for candidate in (base / "__init__.py", base.with_name(parts[-1] + ".py")):
            if candidate.is_file():
                return candidate, root
    return None


def resolve_module(name: str, roots: Sequence[Path]) -> Path | None:
    """The file of module ``name`` (dotted): ``<root>/a/b/c/__init__.py`` or ``<root>/a/b/c.py``
    (the root resolved, the file itself not), the first root that has one wins (as on
    ``sys.path``). None when no root has it: standard
    library and site-packages modules are never resolved, they are not the user's. Raises
    nothing."""
    found = _locate(name, roots)
    return found[0] if found else None


def _is_local_package_dir(name: str, roots: Sequence[Path]) -> bool:
    parts = name.split(".")
    return all(_identifier(p) for p in parts) and any(
        Path(root).joinpath(*parts).is_dir() for root in roots
    )


def _absolute_module(level: int, module: str | None, package: str | None) -> str | None:
    """The absolute module an import names: ``from ..x import y`` in package ``a.b.c`` -> ``a.b.x``;
    None for a relative import with no package or beyond the top-level package."""
    if level == 0:
        return module or None
    if not package:
        return None
    parts = package.split(".")
    if level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def _package_of(name: str | None, path: Path) -> str | None:
    if name is None:
        return None
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def script_module(path: Path) -> str:
    """The internal module name a file whose name is no importable module is loaded under:
    :data:`SCRIPT_PREFIX` + its stem with every character that cannot be in an identifier
    replaced by ``_`` (``19_ReLU.py`` -> ``_accelopt_file_19_ReLU``, ``bench-rms.py`` ->
    ``_accelopt_file_bench_rms``). Always a valid identifier; raises nothing."""
    return SCRIPT_PREFIX + re.sub(r"\W", "_", Path(path).stem, flags=re.ASCII)
