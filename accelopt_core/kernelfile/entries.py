"""Which module and top-level name a harness's ``BENCH["entry"]`` refers to, seen from the
host (pure AST, standard library only): :func:`entry_targets` follows imports, aliases and
re-exports to the defining module; :func:`bench_module` reads ``BENCH["module"]``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from accelopt_core.kernelfile.closure import Closure, ClosureError, _parse, _read_source
from accelopt_core.kernelfile.project import (
    _absolute_module,
    _is_local_package_dir,
    _locate,
    _package_of,
    module_name,
)

_MAX_REEXPORT_DEPTH = 8
_HARNESS_DICT = "BENCH"
_ENTRY_KEY = "entry"


@dataclass(frozen=True)
class EntryTarget:
    """What a harness's entry refers to: the top-level ``name`` defined in module ``module``
    (dotted), reached through the entry expression ``expr`` (its source text) on 1-based
    ``line`` of the harness."""

    module: str
    name: str
    expr: str
    line: int


# ---------------------------------------------------------------------------------------------
# Module namespaces (what a module's top level binds)
# ---------------------------------------------------------------------------------------------


class _Binding(NamedTuple):
    """What a top-level name is bound to: ``local`` (def/class/assignment), ``module`` (an
    ``import``), ``from`` (``from module import name``) or ``unknown`` (unresolvable)."""

    kind: str
    module: str = ""
    name: str = ""


_LOCAL = _Binding("local")
_UNKNOWN = _Binding("unknown")


def _module_level(stmts: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements in execution order, entering compound statements but not
    function or class bodies; a ``try``'s handlers come before its body, so the binding of
    the path that succeeds (``try: from .fast import f``) is the last one."""
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            for handler in stmt.handlers:
                yield from _module_level(handler.body)
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                yield from _module_level(block)
        elif isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While)):
            yield from _module_level(stmt.body)
            yield from _module_level(stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from _module_level(stmt.body)


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _bound_names(stmt: ast.stmt) -> list[str]:
    """Names a non-import statement binds at module level."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [n for t in stmt.targets for n in _target_names(t)]
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        has_value = stmt.value is not None or isinstance(stmt, ast.AugAssign)
        return _target_names(stmt.target) if has_value else []
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return _target_names(stmt.target)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [
            n
            for item in stmt.items
            if item.optional_vars
            for n in _target_names(item.optional_vars)
        ]
    return []


def _namespace(tree: ast.Module, package: str | None) -> tuple[dict[str, _Binding], list[str]]:
    """(name -> binding, star-imported modules) of a module's top level; the last binding of
    a name wins."""
    scope: dict[str, _Binding] = {}
    stars: list[str] = []
    for stmt in _module_level(tree.body):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    scope[alias.asname] = _Binding("module", alias.name)
                else:
                    top = alias.name.partition(".")[0]
                    scope[top] = _Binding("module", top)
        elif isinstance(stmt, ast.ImportFrom):
            base = _absolute_module(stmt.level, stmt.module, package)
            for alias in stmt.names:
                if alias.name == "*":
                    stars += [base] if base else []
                else:
                    bound = _Binding("from", base, alias.name) if base else _UNKNOWN
                    scope[alias.asname or alias.name] = bound
        else:
            scope.update(dict.fromkeys(_bound_names(stmt), _LOCAL))
    return scope, stars


# ---------------------------------------------------------------------------------------------
# Entry targets
# ---------------------------------------------------------------------------------------------


class _Value(NamedTuple):
    """What an expression evaluates to, statically: a local module (``name`` empty) or the
    top-level ``name`` of a local module."""

    module: str
    name: str = ""


_FOREIGN = _Value("")  # bound, but to something outside the roots


class _Resolver:
    """Static name resolution across the local modules under ``roots`` (parsed once each);
    ``sources`` (module name -> source text, an import closure's) are read from memory."""

    def __init__(self, roots: Sequence[Path], sources: Mapping[str, str] | None = None) -> None:
        self.roots = [Path(r).resolve() for r in roots]
        self.sources = dict(sources or {})
        self._namespaces: dict[str, tuple[dict[str, _Binding], list[str]]] = {}

    def is_local(self, module: str) -> bool:
        return bool(module) and (
            module in self.sources
            or _locate(module, self.roots) is not None
            or _is_local_package_dir(module, self.roots)
        )

    def _tree(self, module: str) -> tuple[ast.Module, Path] | None:
        """The parsed module and its file (from :attr:`sources` when there), None when it
        has no file or does not read or parse."""
        found = _locate(module, self.roots)
        if module not in self.sources and found is None:
            return None
        path = found[0] if found is not None else Path(module.replace(".", "/") + ".py")
        try:
            text = self.sources[module] if module in self.sources else _read_source(path)[0]
            return _parse(text, path), path
        except ClosureError:
            return None

    def namespace(self, module: str) -> tuple[dict[str, _Binding], list[str]]:
        """A local module's top-level bindings (empty for a namespace package or a file that
        does not read or parse: the harness checks report those)."""
        if module not in self._namespaces:
            self._namespaces[module] = ({}, [])
            parsed = self._tree(module)
            if parsed is not None:
                tree, path = parsed
                self._namespaces[module] = _namespace(tree, _package_of(module, path))
        return self._namespaces[module]

    def member(self, module: str, name: str) -> _Value | None:
        """``module.name`` followed to where it is defined; None when it is not the user's."""
        found = self._find(module, name, 0)
        if found is _FOREIGN:
            return None
        if found is None:  # not bound statically (dynamic, or a typo): keep the module's word
            return _Value(module, name) if self.is_local(module) else None
        return found

    def _find(self, module: str, name: str, depth: int) -> _Value | None:
        """``module.name``: a value, _FOREIGN, or None when ``module`` does not bind it."""
        if not self.is_local(module):
            return _FOREIGN
        if depth > _MAX_REEXPORT_DEPTH:
            return _Value(module, name)
        scope, stars = self.namespace(module)
        bound = scope.get(name)
        if (
            bound is not None
            and bound.kind == "from"
            and (bound.module, bound.name)
            != (
                module,
                name,
            )
        ):
            found = self._find(bound.module, bound.name, depth + 1)
            return _Value(bound.module, bound.name) if found is None else found
        if bound is not None and bound.kind != "from":
            if bound.kind == "local":
                return _Value(module, name)
            if bound.kind == "module" and self.is_local(bound.module):
                return _Value(bound.module)
            return _FOREIGN
        if self.is_local(f"{module}.{name}"):
            return _Value(f"{module}.{name}")
        for star in reversed(stars):
            found = self._find(star, name, depth + 1)
            if found is not None and found is not _FOREIGN:
                return found
        return None

    def value(self, expr: ast.expr, scope: dict[str, _Binding]) -> _Value | None:
        """What a name or attribute chain of the harness refers to, or None."""
        if isinstance(expr, ast.Name):
            bound = scope.get(expr.id)
            if bound is None or bound.kind in ("local", "unknown"):
                return None
            if bound.kind == "module":
                return _Value(bound.module) if self.is_local(bound.module) else None
            return self.member(bound.module, bound.name)
        if isinstance(expr, ast.Attribute):
            base = self.value(expr.value, scope)
            if base is None or base.name:  # ``Cls.method`` / ``Fn.apply``: the top-level name
                return base
            return self.member(base.module, expr.attr)
        return None


def _is_partial(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "partial"


def _targets_of(expr: ast.expr, scope: dict[str, _Binding], resolver: _Resolver) -> list[_Value]:
    """The top-level names an entry expression refers to (``partial``'s first argument, every
    name a lambda calls, a name or attribute chain)."""
    if isinstance(expr, ast.Call) and _is_partial(expr.func):
        return _targets_of(expr.args[0], scope, resolver) if expr.args else []
    if isinstance(expr, ast.Lambda):
        params = {a.arg for a in (*expr.args.posonlyargs, *expr.args.args, *expr.args.kwonlyargs)}
        params |= {a.arg for a in (expr.args.vararg, expr.args.kwarg) if a is not None}
        inner = {k: v for k, v in scope.items() if k not in params}
        calls = [n for n in ast.walk(expr.body) if isinstance(n, ast.Call)]
        calls.sort(key=lambda call: (call.func.lineno, call.func.col_offset))  # reading order
        return [t for call in calls for t in _targets_of(call.func, inner, resolver)]
    found = resolver.value(expr, scope)
    return [found] if found is not None and found.name else []


def _entry_expressions(tree: ast.Module) -> list[ast.expr]:
    """The harness's entry expressions, in order: ``BENCH = {"entry": ...}``, ``BENCH =
    dict(entry=...)`` and ``BENCH["entry"] = ...`` at module level."""
    found: list[ast.expr] = []
    for stmt in _module_level(tree.body):
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id == _HARNESS_DICT:
                if isinstance(value, ast.Dict):
                    found += [
                        v
                        for k, v in zip(value.keys, value.values, strict=True)
                        if isinstance(k, ast.Constant) and k.value == _ENTRY_KEY
                    ]
                elif isinstance(value, ast.Call) and getattr(value.func, "id", "") == "dict":
                    found += [kw.value for kw in value.keywords if kw.arg == _ENTRY_KEY]
            elif (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id == _HARNESS_DICT
                and isinstance(target.slice, ast.Constant)
                and target.slice.value == _ENTRY_KEY
            ):
                found.append(value)
    return found


def entry_targets(
    harness_source: str,
    harness_path: Path,
    roots: Sequence[Path],
    *,
    closure: Closure | None = None,
) -> list[EntryTarget]:
    """Which (module, top-level name) the harness's entry refers to, when it names something
    imported from a local module under ``roots``.

    The entry is the last of ``BENCH = {"entry": <expr>, ...}``, ``BENCH = dict(entry=<expr>)``
    and ``BENCH["entry"] = <expr>`` at module level. Forms: an imported name (aliases too),
    ``Cls.method`` / ``Fn.apply`` (-> ``Cls``), ``module.name`` after ``import pkg.module as m``
    or ``from pkg import module``, ``functools.partial(f, ...)`` (-> ``f``), a lambda (-> every
    imported name it calls), relative imports when the harness is itself in a package. A name a
    module re-exports (``from .ops.rms_norm import rms_norm`` in ``mypkg/__init__.py``, or a
    star import) is followed to the defining module (at most 8 steps). Names defined in the
    harness itself, and names from modules outside the roots (torch, site-packages), are not
    targets. With ``closure`` (the harness's :func:`~.closure.import_closure`), module sources
    and the harness's own module name are read from it instead of the disk. Returns [] when
    nothing resolves, or when the harness does not parse (the harness checks report that).
    Raises nothing.
    """
    try:
        tree = ast.parse(harness_source)
    except (SyntaxError, ValueError):
        return []
    scope, _ = _namespace(tree, _harness_package(Path(harness_path), roots, closure))
    sources = {}
    if closure is not None:
        sources = {name: closure.files[rel] for name, rel in closure.modules.items()}
    resolver = _Resolver(roots, sources)
    expressions = _entry_expressions(tree)
    if not expressions:
        return []
    expr = expressions[-1]
    text = ast.get_source_segment(harness_source, expr) or ast.unparse(expr)
    out: list[EntryTarget] = []
    for target in _targets_of(expr, scope, resolver):
        entry = EntryTarget(target.module, target.name, text, expr.lineno)
        if entry not in out:
            out.append(entry)
    return out


def _harness_package(path: Path, roots: Sequence[Path], closure: Closure | None) -> str | None:
    """The package the harness file's relative imports resolve against (None: a script)."""
    if closure is not None:
        key = closure.key_of(path)
        name = closure.module_of(key) if key is not None else None
        if name is not None:
            return _package_of(name, Path(path)) or None
    try:
        return _package_of(module_name(path, roots)[0], Path(path))
    except ValueError:
        return None


def bench_module(tree: ast.Module) -> str | None:
    """``BENCH["module"]`` of a harness module's top level, when it is a string literal
    (``BENCH = {"entry": ..., "module": "mypkg.ops.rms_norm"}``); None otherwise."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict):
            if any(isinstance(t, ast.Name) and t.id == _HARNESS_DICT for t in stmt.targets):
                for k, v in zip(stmt.value.keys, stmt.value.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == "module":
                        return v.value if isinstance(v, ast.Constant) else None
    return None
