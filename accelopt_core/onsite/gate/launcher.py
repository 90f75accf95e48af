"""What a candidate's launcher does, read from its AST (nothing is imported or run).

The launcher is the entry (``BENCH["entry"]``) and everything it reaches in the module: the
non-kernel top-level functions and classes it names, and the values of the module-level names it
uses (a module-level ``f = lambda x: ...`` or ``f = torch.softmax`` is part of the launcher when
the launcher uses ``f``). The static gate (:mod:`.gate.precheck`) checks that it launches a kernel on a
reachable path, computes nothing itself and keeps no state between calls; the child
(:mod:`.process.child`) asks which backend the entry launches. Kernels are the top-level functions
:func:`.names.jit_kernels` detects, with the module-level imports (as at run time).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple

from ..names import (
    attribute_of,
    collect_aliases,
    jit_kernels,
    module_statements,
    resolved_name,
)

FuncDef = (ast.FunctionDef, ast.AsyncFunctionDef)

#: In-place tensor methods a launcher may call on its outputs (initialisation, not compute).
INPLACE_ALLOWED = {"zero_", "fill_", "requires_grad_", "resize_", "share_memory_"}


class Reached(NamedTuple):
    """One piece of the launcher: ``name`` (the module-level name it is bound to), ``node`` (a
    ``def``, a ``class``, or the value expression of a module-level assignment) and ``stmt`` (the
    top-level statement that holds it)."""

    name: str
    node: ast.AST
    stmt: ast.stmt


def candidate_kernels(tree: ast.Module) -> dict[str, str]:
    """The module's top-level kernels: name -> ``"triton"`` | ``"nki"``."""
    return jit_kernels(tree.body, collect_aliases(tree))


def functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Top-level functions by name (a later ``def`` replaces an earlier one)."""
    return {n.name: n for n in tree.body if isinstance(n, FuncDef)}


def module_bindings(tree: ast.Module) -> dict[str, Reached]:
    """What each module-level name is bound to: top-level ``def`` / ``class`` nodes, and the
    value of each module-level ``name = value`` (also inside module-level ``if`` / ``try``
    blocks); the last binding wins, as when the module runs."""
    out: dict[str, Reached] = {}
    for top in tree.body:
        for stmt in module_statements([top]):
            if isinstance(stmt, (*FuncDef, ast.ClassDef)):
                out[stmt.name] = Reached(stmt.name, stmt, top)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    for name, value in _bound_values(t, stmt.value):
                        out[name] = Reached(name, value, top)
    return out


def _bound_values(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    """``(name, value)`` for each name an assignment binds: ``a, b = x, y`` pairs them up;
    ``a, b = make()`` binds both to ``make()``."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, ast.Starred):
        return _bound_values(target.value, value)
    if not isinstance(target, (ast.Tuple, ast.List)):
        return []
    pairs = (
        zip(target.elts, value.elts, strict=True)
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
        else [(t, value) for t in target.elts]
    )
    return [bound for t, v in pairs for bound in _bound_values(t, v)]


def closure_items(
    tree: ast.Module,
    entry: str,
    kernels: dict[str, str],
    bindings: dict[str, Reached] | None = None,
) -> list[Reached]:
    """The launcher: the entry (a function, or a class such as the ``torch.autograd.Function``
    whose ``apply`` is the entry) and every module-level binding it reaches (through any use of a
    name, called or not), transitively; of a kernel only its decorators are followed (a wrapper
    around a kernel runs when it is launched). Entry first."""
    bindings = module_bindings(tree) if bindings is None else bindings
    start = bindings.get(entry)
    if start is None or not isinstance(start.node, (*FuncDef, ast.ClassDef)):
        return []
    seen = {entry}
    out: list[Reached] = []
    todo = [start]
    while todo:
        item = todo.pop()
        out.append(item)
        for node in ast.walk(item.node):
            if not isinstance(node, ast.Name) or node.id in seen:
                continue
            found = bindings.get(node.id)
            if found is None:
                continue
            seen.add(node.id)
            if node.id not in kernels:
                todo.append(found)
            elif isinstance(found.node, FuncDef):  # what wraps a kernel runs at its launch
                todo.extend(Reached(node.id, d, found.stmt) for d in found.node.decorator_list)
    return out


def launcher_closure(tree: ast.Module, entry: str, kernels: dict[str, str]) -> list[ast.AST]:
    """The nodes of :func:`closure_items` (entry first)."""
    return [item.node for item in closure_items(tree, entry, kernels)]


def _always_false(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and not test.value


def dead_statements(fn: ast.AST) -> list[ast.stmt]:
    """Statements of ``fn`` that never run: the first statement after a ``return`` / ``raise`` /
    ``break`` / ``continue`` in the same block, and the first statement of a branch that a
    constant test rules out (``if False:``, the ``else`` of ``if True:``, ``while False:``); in
    source order. Nested functions and classes are not entered."""
    dead: list[ast.stmt] = []
    body = getattr(fn, "body", None)
    todo = [body] if isinstance(body, list) else []
    while todo:
        body = todo.pop()
        for i, stmt in enumerate(body):
            if isinstance(stmt, (*FuncDef, ast.ClassDef)):
                continue
            if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Constant):
                live, never = (
                    (stmt.body, stmt.orelse) if stmt.test.value else (stmt.orelse, stmt.body)
                )
                dead.extend(never[:1])
                todo.append(live)
            elif isinstance(stmt, ast.While) and _always_false(stmt.test):
                dead.append(stmt.body[0])
                todo.append(stmt.orelse)
            else:
                for name in ("body", "orelse", "finalbody"):
                    inner = getattr(stmt, name, None)
                    if isinstance(inner, list):
                        todo.append(inner)
                todo.extend(h.body for h in getattr(stmt, "handlers", ()) or ())
                todo.extend(c.body for c in getattr(stmt, "cases", ()) or ())
            if isinstance(stmt, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
                dead.extend(body[i + 1 : i + 2])
                break
    dead.sort(key=lambda s: s.lineno)
    return dead


def _live_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk(fn)`` without the statements :func:`dead_statements` finds (and whatever
    follows them in their block)."""
    dead = dead_statements(fn)
    if not dead:
        yield from ast.walk(fn)
        return
    dead_ids = {id(s) for s in dead}
    todo: list[ast.AST] = [fn]
    while todo:
        node = todo.pop()
        yield node
        for _field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for child in value:
                    if id(child) in dead_ids:
                        break  # the rest of this block is dead too
                    if isinstance(child, ast.AST):
                        todo.append(child)
            elif isinstance(value, ast.AST):
                todo.append(value)


def launches(fn: ast.AST, kernels: dict[str, str]) -> bool:
    """True when ``fn`` launches one of ``kernels`` on a path that can run (not after a
    ``return``, not under ``if False:``): ``kernel[grid](...)``, ``kernel.run(...)`` /
    ``kernel.warmup(...)``, an NKI kernel called directly, or an NKI kernel passed to a call
    (``nki.baremetal(kernel)(...)``, ``nki.simulate_kernel(kernel, ...)``)."""
    for node in _live_nodes(fn):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):
            if f.value.id in kernels:  # kernel[grid](...)
                return True
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id in kernels and f.attr in ("run", "warmup"):
                return True
        if isinstance(f, ast.Name) and kernels.get(f.id) == "nki":  # nki kernel(...)
            return True
        for arg in node.args:  # nki.baremetal(kernel)(...), nki.simulate_kernel(kernel, ...)
            if isinstance(arg, ast.Name) and kernels.get(arg.id) == "nki":
                return True
    return False


def entry_backend(tree: ast.Module, entry: str, kernels: dict[str, str]) -> str:
    """``"nki"`` when the entry is, or launches, an ``@nki.jit`` kernel, else ``"triton"``."""
    if kernels.get(entry) == "nki":
        return "nki"
    nki = {k: v for k, v in kernels.items() if v == "nki"}
    if nki and any(launches(fn, nki) for fn in launcher_closure(tree, entry, kernels)):
        return "nki"
    return "triton"


# --- state kept between calls ----------------------------------------------------------------

#: Methods that change the object they are called on (containers, queues, tensors).
_MUTATORS = set(
    """append extend insert add update setdefault pop popitem clear remove discard appendleft
    extendleft put put_nowait send __setitem__ __delitem__ __iadd__ __ior__ write""".split()
)
#: Builtins that only read a container passed to them.
_READERS = set(
    """len isinstance id sorted tuple sum min max any all enumerate zip str repr bool int float
    print hash type""".split()
)
#: Calls that make a mutable object (a module-level name bound to one is state).
_MUTABLE_MAKERS = ("dict", "list", "set", "bytearray", "iter", "object", "array.array")
_MUTABLE_MODULES = (
    "collections.",
    "itertools.",
    "queue.",
    "weakref.",
    "types.",
    "torch.",
    "numpy.",
)


def is_mutable_value(value: ast.expr | None, aliases: dict[str, str], classes: set[str]) -> bool:
    """True when ``value`` makes a mutable object: a list / dict / set display or comprehension,
    ``dict()`` / ``collections.*`` / ``itertools.*`` / torch / numpy objects, an instance of a
    class of the module."""
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.GeneratorExp):
        return True
    if isinstance(value, ast.Call):
        name = resolved_name(value.func, aliases) or ""
        return (
            name in _MUTABLE_MAKERS
            or name.startswith(_MUTABLE_MODULES)
            or name.split(".")[0] in classes
        )
    return False


def root_name(node: ast.AST) -> ast.Name | None:
    """The Name at the root of ``a.b[c].d`` (through attributes and subscripts), else None."""
    while True:
        attr = attribute_of(node)
        if attr is not None:
            node = attr[0]
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return node if isinstance(node, ast.Name) else None


def local_names(node: ast.AST) -> set[str]:
    """Names bound inside ``node`` (parameters, assignments, loop and ``with`` targets,
    imports), less those declared ``global``."""
    bound: set[str] = set()
    declared: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (*FuncDef, ast.ClassDef)) and n is not node:
            bound.add(n.name)
        elif isinstance(n, ast.Global):
            declared.update(n.names)
    return bound - declared


class StateFinder:
    """Writes to module-level state by one piece of the launcher (:class:`Reached`).

    Module-level state is any module-level name that is not an import: the launcher may read
    it, but not store into it (``_C[k] = v``, ``_C.x = v``, ``del _C[k]``), call a mutating
    method on it (``_C.update(...)``, ``_C.append(...)``, an in-place tensor method ``_B.copy_``),
    advance it (``next(_IT)``), set attributes on a module-level function (``add.calls = n``,
    ``setattr(add, ...)``), or hand a mutable module-level object (:func:`is_mutable_value`) to
    anything but a reading builtin (``f(_CACHE)``, ``c = _CACHE``): written elsewhere, it is
    state too.
    """

    def __init__(self, bindings: dict[str, Reached], mutable: set[str]) -> None:
        self.bindings = bindings
        self.mutable = mutable

    def find(self, node: ast.AST) -> list[tuple[str, str, int]]:
        """``(rule, message, line)`` for each write in ``node``, in walk order."""
        module = set(self.bindings) - local_names(node)
        parents: dict[int, ast.AST] = {}
        found: list[tuple[str, str, int]] = []
        for n in ast.walk(node):
            for child in ast.iter_child_nodes(n):
                parents[id(child)] = n
            hit = self._write(n, module) if not isinstance(n, ast.Name) else None
            if hit is None and isinstance(n, ast.Name) and n.id in module & self.mutable:
                hit = self._escape(n, parents.get(id(n)))
            if hit is not None:
                found.append((*hit, n.lineno))
        return found

    def _defined_function(self, name: str) -> bool:
        return isinstance(self.bindings[name].node, FuncDef)

    def _write(self, n: ast.AST, module: set[str]) -> tuple[str, str] | None:
        if isinstance(n, (ast.Subscript, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
            root = root_name(n)
            if root is not None and root.id in module:
                if isinstance(n, ast.Attribute) and self._defined_function(root.id):
                    return "gate: function attribute", (
                        f"the launcher sets '{ast.unparse(n)}', an attribute of function "
                        f"'{root.id}' (function attributes are state kept between calls)"
                    )
                return "gate: module state", (
                    f"the launcher writes into module-level '{root.id}' "
                    f"('{ast.unparse(n)} = ...'; no result caches or state between calls)"
                )
        if not isinstance(n, ast.Call):
            return None
        attr = attribute_of(n.func)
        target = None
        if attr is not None and (attr[1] in _MUTATORS or _inplace(attr[1])):
            target = root_name(attr[0])
        elif isinstance(n.func, ast.Name) and n.func.id in ("setattr", "delattr", "next"):
            target = root_name(n.args[0]) if n.args else None
        if target is None or target.id not in module:
            return None
        call = ast.unparse(n.func)
        if call in ("setattr", "delattr") and self._defined_function(target.id):
            return "gate: function attribute", (
                f"the launcher calls {call}() on function '{target.id}' (function attributes "
                "are state kept between calls)"
            )
        return "gate: module state", (
            f"the launcher changes module-level '{target.id}' ('{call}(...)'; no result caches "
            "or state between calls)"
        )

    @staticmethod
    def _escape(n: ast.Name, parent: ast.AST | None) -> tuple[str, str] | None:
        if isinstance(parent, (ast.Subscript, ast.Attribute, ast.Compare)):
            return None
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is n:
            return None
        if isinstance(parent, ast.Call) and n in parent.args:
            if isinstance(parent.func, ast.Name) and parent.func.id in _READERS:
                return None
        return "gate: module state", (
            f"the launcher hands on module-level mutable '{n.id}' (whoever receives it can keep "
            "results in it between calls)"
        )


def _inplace(method: str) -> bool:
    """A torch in-place method (``copy_``, ``fill_``, ``zero_``), not a dunder."""
    return method.endswith("_") and not method.endswith("__")
