"""Name resolution in kernel sources: imports -> canonical dotted names, and which top-level
functions are ``@triton.jit`` / ``@nki.jit`` kernels.

The one jit detector of the project: the host (kernel discovery, precheck) and the target (the
static gate) both use it. Standard library only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Literal

Backend = Literal["triton", "nki"]
_FuncDef = (ast.FunctionDef, ast.AsyncFunctionDef)

# Canonical module paths that count as the Triton / NKI APIs.
_TRITON = "triton"
_NKI = "neuronxcc.nki"
_DEFAULT_ALIASES = {
    "triton": "triton",
    "tl": "triton.language",
    "nki": _NKI,
    "nl": _NKI + ".language",
    "nisa": _NKI + ".isa",
}
_TRITON_KERNEL_DECORATORS = {"triton.jit"}
_TRITON_COMPANIONS = {"triton.autotune", "triton.heuristics"}
_NKI_KERNEL_DECORATORS = {"nki.jit", "nki.baremetal", "nki.benchmark", "nki.profile"}


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for Name/Attribute chains, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def canonical_module(name: str) -> str:
    # The standalone ``nki`` package (newer Neuron SDKs) is the same API as neuronxcc.nki.
    if name == "nki" or name.startswith("nki."):
        return "neuronxcc." + name
    return name


def module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements at module level, including those nested in ``if`` / ``try`` / ``with`` /
    ``for`` / ``while`` blocks, but not the bodies of functions or classes."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (*_FuncDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from module_statements(inner)
        for handler in getattr(stmt, "handlers", ()) or ():
            yield from module_statements(handler.body)
        for case in getattr(stmt, "cases", ()) or ():
            yield from module_statements(case.body)


def collect_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> canonical dotted path, from the module-level imports."""
    aliases = dict(_DEFAULT_ALIASES)
    for node in module_statements(tree.body):
        if isinstance(node, ast.Import):
            for a in node.names:
                full = canonical_module(a.name)
                if a.asname:
                    aliases[a.asname] = full
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = canonical_module(top)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mod = canonical_module(node.module)
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{mod}.{a.name}"
    return aliases


def resolve(dotted: str, aliases: dict[str, str]) -> str:
    head, _, rest = dotted.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


def display(resolved: str) -> str:
    """Canonical name as shown to users: ``neuronxcc.nki.jit`` -> ``nki.jit``."""
    return resolved[len("neuronxcc.") :] if resolved.startswith("neuronxcc.nki") else resolved


def is_api(resolved: str) -> bool:
    return (
        resolved == _TRITON
        or resolved.startswith(_TRITON + ".")
        or resolved == _NKI
        or resolved.startswith(_NKI + ".")
    )


def decorator_name(dec: ast.expr, aliases: dict[str, str]) -> str:
    target = dec.func if isinstance(dec, ast.Call) else dec
    dotted = dotted_name(target)
    if dotted is None:
        try:
            return ast.unparse(target)
        except Exception:  # pragma: no cover - unparse of a parsed node does not fail
            return "?"
    return display(resolve(dotted, aliases))


def backend_of(decorators: list[str]) -> Backend | None:
    if any(d in _TRITON_KERNEL_DECORATORS for d in decorators):
        return "triton"
    if any(d in _NKI_KERNEL_DECORATORS for d in decorators):
        return "nki"
    return None
