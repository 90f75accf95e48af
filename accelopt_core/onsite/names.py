"""Name resolution in kernel sources: imports -> canonical dotted names, and which top-level
functions are ``@triton.jit`` / ``@nki.jit`` kernels.

The one jit detector of the project: the host (kernel discovery, precheck) and the target (the
static gate) both use it. Standard library only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
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


def attribute_of(node: ast.AST) -> tuple[ast.expr, str] | None:
    """``(obj, "name")`` for ``obj.name`` and for ``getattr(obj, "name"[, default])`` (a
    constant-string ``getattr`` is the attribute it names), else None."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and 2 <= len(node.args) <= 3
        and not node.keywords
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[0], node.args[1].value
    return None


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for Name/Attribute chains (``getattr(a, "b")`` counts as ``a.b``), else
    None."""
    parts: list[str] = []
    while (attr := attribute_of(node)) is not None:
        node, name = attr
        parts.append(name)
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def canonical_module(name: str) -> str:
    """The canonical module path: the standalone ``nki`` package -> ``neuronxcc.nki``."""
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


def collect_aliases(tree: ast.Module, *, everywhere: bool = False) -> dict[str, str]:
    """Local name -> canonical dotted path, from the module-level imports (with ``everywhere``,
    also the imports inside functions and classes: the static gate resolves a launcher's
    ``import torch.nn.functional as F`` too). Unimported ``triton``, ``tl``, ``nki``, ``nl`` and
    ``nisa`` resolve to the Triton / NKI APIs."""
    aliases = dict(_DEFAULT_ALIASES)
    nodes = ast.walk(tree) if everywhere else module_statements(tree.body)
    for node in nodes:
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
    """``dotted`` with its first part replaced by what it was imported as (``F.relu`` ->
    ``torch.nn.functional.relu``); unchanged when the first part is not an alias."""
    head, _, rest = dotted.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


def resolved_name(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The canonical dotted name of a Name/Attribute chain (:func:`dotted_name` then
    :func:`resolve`), else None."""
    dotted = dotted_name(node)
    return resolve(dotted, aliases) if dotted is not None else None


def display(resolved: str) -> str:
    """Canonical name as shown to users: ``neuronxcc.nki.jit`` -> ``nki.jit``."""
    return resolved[len("neuronxcc.") :] if resolved.startswith("neuronxcc.nki") else resolved


def is_api(resolved: str) -> bool:
    """True for a canonical name in the Triton or NKI API (``triton.language.load``)."""
    return (
        resolved == _TRITON
        or resolved.startswith(_TRITON + ".")
        or resolved == _NKI
        or resolved.startswith(_NKI + ".")
    )


def decorator_name(dec: ast.expr, aliases: dict[str, str]) -> str:
    """A decorator as users know it (``triton.jit``, ``nki.jit``), call or not; a decorator that
    is not a dotted name comes back as its source text."""
    target = dec.func if isinstance(dec, ast.Call) else dec
    dotted = dotted_name(target)
    if dotted is None:
        try:
            return ast.unparse(target)
        except Exception:  # pragma: no cover - unparse of a parsed node does not fail
            return "?"
    return display(resolve(dotted, aliases))


def backend_of(decorators: list[str]) -> Backend | None:
    """``"triton"`` / ``"nki"`` when one of the decorators (as :func:`decorator_name` shows
    them) makes a kernel, else None."""
    if any(d in _TRITON_KERNEL_DECORATORS for d in decorators):
        return "triton"
    if any(d in _NKI_KERNEL_DECORATORS for d in decorators):
        return "nki"
    return None


def jit_kernels(statements: Iterable[ast.stmt], aliases: dict[str, str]) -> dict[str, Backend]:
    """Kernel name -> backend for the functions among ``statements`` (e.g. ``tree.body``, or
    :func:`module_statements` of it) decorated as a kernel (:func:`backend_of`).

    A later ``def`` of the same name replaces an earlier one, as when the module runs: a plain
    function that redefines a kernel's name is no kernel.
    """
    kernels: dict[str, Backend] = {}
    for node in statements:
        if not isinstance(node, _FuncDef):
            continue
        backend = backend_of([decorator_name(d, aliases) for d in node.decorator_list])
        if backend is None:
            kernels.pop(node.name, None)
        else:
            kernels[node.name] = backend
    return kernels
