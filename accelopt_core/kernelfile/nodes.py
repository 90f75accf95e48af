"""Small questions asked of :mod:`ast` nodes by discovery, harness analysis and splicing:
which names a statement binds or reads, and a function's parameters."""

from __future__ import annotations

import ast

__all__ = ["FUNC_DEF", "IMPORT", "all_args", "bound_names", "names_loaded", "param_names"]

#: Function definitions (``def`` and ``async def``).
FUNC_DEF = (ast.FunctionDef, ast.AsyncFunctionDef)
#: Import statements (``import x`` and ``from x import y``).
IMPORT = (ast.Import, ast.ImportFrom)


def all_args(args: ast.arguments) -> list[ast.arg]:
    """Every parameter in signature order: positional-only, positional, ``*args``,
    keyword-only, ``**kwargs``."""
    out = list(args.posonlyargs + args.args)
    if args.vararg:
        out.append(args.vararg)
    out += args.kwonlyargs
    if args.kwarg:
        out.append(args.kwarg)
    return out


def param_names(args: ast.arguments) -> list[str]:
    """Names of :func:`all_args` (``*args`` / ``**kwargs`` without stars)."""
    return [a.arg for a in all_args(args)]


def names_loaded(node: ast.AST) -> set[str]:
    """Every plain name that appears under ``node`` (read or written)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def bound_names(stmt: ast.stmt) -> list[str]:
    """Module-level names a statement binds (defs, classes, simple assignments, imports)."""
    if isinstance(stmt, (*FUNC_DEF, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        out: list[str] = []
        for t in stmt.targets:
            out += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
        return out
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    if isinstance(stmt, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        return [a.asname or a.name for a in stmt.names if a.name != "*"]
    return []
