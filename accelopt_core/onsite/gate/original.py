"""What the gate knows of the original file (the baseline): its top-level statements' texts and
ASTs, the names it defines, what its launcher reaches and computes, and its low-precision dtype
tokens; and which statements of a candidate are changed relative to it."""

from __future__ import annotations

import ast
import functools
from typing import NamedTuple

from ..names import (
    canonical_module,
    collect_aliases,
)
from .compute import launcher_ops
from .launcher import candidate_kernels, closure_items
from .rules import (
    LINE_BREAK,
    LOW_PRECISION,
)


class Original(NamedTuple):
    """What the gate needs to know of the original file (cached per baseline)."""

    texts: frozenset[str]  # source text of each top-level statement
    dumps: frozenset[str]  # ast.dump of each top-level statement
    names: frozenset[str]  # the names its top-level def / class statements bind
    reached: frozenset[str]  # module-level names its launcher reaches
    ops: frozenset[str]  # compute ops of its launcher
    tokens: frozenset[str]  # its low-precision dtype tokens
    imports: frozenset[str] = frozenset()  # the modules it imports (:func:`imported_modules`)


def statement_text(stmt: ast.stmt, lines: list[str]) -> str:
    """The source lines of a top-level statement, its decorators included."""
    start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
    return "\n".join(lines[start - 1 : stmt.end_lineno])


def precision_tokens(nodes: list[ast.AST]) -> list[tuple[str, int]]:
    """Low-precision dtype names (``float16``, ``bf16``, ``float8_e4m3fn``, ...) as names,
    attributes or strings in ``nodes``: ``(lower-case token, line)``."""
    found: list[tuple[str, int]] = []
    for node in nodes:
        token = None
        if isinstance(node, ast.Name):
            token = node.id
        elif isinstance(node, ast.Attribute):
            token = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            token = node.value
        if token and LOW_PRECISION.match(token):
            found.append((token.lower(), getattr(node, "lineno", 0)))
    return found


@functools.lru_cache(maxsize=64)
def original_facts(baseline_source: str | None, entry: str) -> Original | None:
    """:class:`Original` of the baseline, None without one (or when it does not parse).
    Cached: every candidate of a search is gated against the same baseline."""
    if not baseline_source:
        return None
    try:
        tree = ast.parse(baseline_source)
    except (SyntaxError, ValueError):
        return None
    lines = LINE_BREAK.split(baseline_source)
    aliases = collect_aliases(tree, everywhere=True)
    kernels = candidate_kernels(tree)
    items = closure_items(tree, entry, kernels)
    return Original(
        texts=frozenset(statement_text(s, lines) for s in tree.body),
        dumps=frozenset(ast.dump(s) for s in tree.body),
        names=frozenset(n for n in map(def_name, tree.body) if n is not None),
        reached=frozenset(i.name for i in items),
        ops=frozenset(d for d, _ in launcher_ops(tree, entry, kernels, aliases, items)),
        tokens=frozenset(t for t, _ in precision_tokens(list(ast.walk(tree)))),
        imports=imported_modules(tree),
    )


def imported_modules(tree: ast.Module) -> frozenset[str]:
    """The canonical modules a file imports anywhere (issue 53: a candidate may import them):
    ``import a.b`` -> ``a.b`` and ``a`` (the name it binds); ``import a.b as c`` -> ``a.b``;
    ``from a.b import c`` -> ``a.b`` (``a.b.c`` is under it). Relative imports are the user's
    own package's, judged by their depth instead."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.add(canonical_module(a.name))
                if not a.asname:
                    out.add(canonical_module(a.name.split(".")[0]))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(canonical_module(node.module))
    return frozenset(out)


def def_name(stmt: ast.stmt) -> str | None:
    """The name a top-level ``def`` / ``class`` binds, None for other statements."""
    return stmt.name if isinstance(stmt, (*FUNC_DEFS, ast.ClassDef)) else None


def changed_statements(tree: ast.Module, source: str, original: Original | None) -> list:
    """The candidate's top-level statements that are not in the original (all without one):
    not the same source text, nor the same ``ast.dump`` (only dumped when the text differs and
    the original has a statement of that name, which an equal dump needs)."""
    if original is None:
        return list(tree.body)
    lines = LINE_BREAK.split(source)
    changed = []
    for stmt in tree.body:
        if statement_text(stmt, lines) in original.texts:
            continue
        name = def_name(stmt)
        if name is not None and name not in original.names:
            changed.append(stmt)
        elif ast.dump(stmt) not in original.dumps:
            changed.append(stmt)
    return changed


FUNC_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
