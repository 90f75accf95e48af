"""The sizes a harness draws its inputs at, seen from the host (pure AST, issue 24).

KernelBench problems (and many plain harnesses) keep their sizes in module-level ints
(``batch_size = 4096``, ``dim = 393216``, ``N = 2048 * 2``) that ``get_inputs()`` and
``get_init_inputs()`` read when called. Under the CPU interpreter the target rebinds those
globals to smaller values (:mod:`accelopt_core.onsite.runtime.sizes`); :func:`find_sizes` says
which globals that may be done to, and which it may not (with the reason, so the message can
say which sizes to lower by hand).

A size may be rebound when rebinding the module global changes every use consistently: it is
assigned once at module level from an int constant expression, and read only inside function
bodies that run after the rebinding (never at import time: a module-level expression, a default
argument, a decorator, a class body), and, when the harness shares its module with the kernels
(``own_module=False``), only by ``get_inputs``, ``get_init_inputs`` and ``reference`` (the
candidate's copy of the module keeps the published value).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

__all__ = ["SIZE_FLOOR", "SizePlan", "find_sizes"]

#: Sizes at or below this are never scaled (kernel sizes, strides, head counts, axes).
SIZE_FLOOR = 16

_READERS = ("get_inputs", "get_init_inputs")
_HARNESS_FUNCTIONS = ("get_inputs", "get_init_inputs", "reference")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


@dataclass(frozen=True)
class SizePlan:
    """What the target may rebind in the module that holds the sizes.

    Attributes:
        names: size name -> published value, for every int global ``get_inputs`` reads that is
            over :data:`SIZE_FLOOR` and safe to rebind (in source order).
        fixed: size name -> why it cannot be rebound (``"read at import time (line 12)"``),
            for sizes ``get_inputs`` reads that are not safe.
        module: the key of the request's ``files`` of the module holding the sizes (a
            KernelBench problem), None for the harness module itself.
    """

    names: dict[str, int] = field(default_factory=dict)
    fixed: dict[str, str] = field(default_factory=dict)
    module: str | None = None

    def request_field(self, setting: str) -> dict:
        """The :attr:`~accelopt_core.onsite.protocol.EvalRequest.sizes` of this plan under the
        setting ``evaluation.sizes`` (``"auto"``, ``"published"`` or ``"name=int,..."`` pins):
        ``{"module", "names", "fixed", "mode", "pin"}``, plain JSON."""
        mode, pins = parse_sizes_setting(setting)
        return {
            "module": self.module,
            "names": dict(self.names),
            "fixed": dict(self.fixed),
            "mode": mode,
            "pin": pins,
        }


def parse_sizes_setting(value: str) -> tuple[str, dict[str, int]]:
    """``("auto", {})``, ``("published", {})`` or ``("auto", {"batch_size": 16, ...})`` for
    the setting ``evaluation.sizes``. Raises ValueError naming the bad part."""
    text = value.strip()
    if text in ("auto", "published"):
        return text, {}
    pins: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, number = (s.strip() for s in part.partition("="))
        if not sep or not name.isidentifier():
            raise ValueError(f"{part!r} is not NAME=INT (e.g. batch_size=16)")
        try:
            pins[name] = int(number)
        except ValueError:
            raise ValueError(f"{part!r}: {number!r} is not an int") from None
        if pins[name] < 1:
            raise ValueError(f"{part!r}: a size is at least 1")
    if not pins:
        raise ValueError('expected "auto", "published" or pins like "batch_size=16,dim=1536"')
    return "auto", pins


def _int_value(node: ast.expr) -> int | None:
    """The value of an int constant expression (``4096``, ``2048 * 2``, ``1 << 20``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _int_value(node.operand)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.BinOp):
        left, right = _int_value(node.left), _int_value(node.right)
        if left is None or right is None:
            return None
        ops = {
            ast.Add: lambda: left + right,
            ast.Sub: lambda: left - right,
            ast.Mult: lambda: left * right,
            ast.FloorDiv: lambda: left // right if right else None,
            ast.LShift: lambda: left << right if 0 <= right < 64 else None,
            ast.Pow: lambda: left**right if 0 <= right < 64 else None,
        }
        op = ops.get(type(node.op))
        return op() if op is not None else None
    return None


def _module_ints(tree: ast.Module) -> tuple[dict[str, int], set[str]]:
    """(name -> value of module-level ``name = <int expr>`` assigned once, names assigned an
    int and also more than once or otherwise at module level)."""
    values: dict[str, int] = {}
    other: set[str] = set()
    ints: set[str] = set()  # assigned an int constant at least once
    for stmt in tree.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [stmt.target], stmt.value
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    single = len(targets) == 1 and target is node and value is not None
                    number = (
                        _int_value(value)
                        if single and not isinstance(stmt, ast.AugAssign)
                        else None
                    )
                    if number is not None:
                        ints.add(node.id)
                    if number is None or node.id in values:
                        other.add(node.id)
                    else:
                        values[node.id] = number
    return {k: v for k, v in values.items() if k not in other}, other & ints


def _reads(tree: ast.Module) -> dict[str, list[tuple[str | None, int]]]:
    """name -> [(enclosing top-level function, or None at import time; line)] of every
    read of a name, at module level and in top-level functions and class methods."""
    out: dict[str, list[tuple[str | None, int]]] = {}

    def visit(node: ast.AST, where: str | None) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.setdefault(node.id, []).append((where, node.lineno))
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:  # a function that rebinds it: never safe
                out.setdefault(name, []).append((None, node.lineno))
        if isinstance(node, _FUNCTIONS):
            for outer in (*getattr(node, "decorator_list", ()), getattr(node, "returns", None)):
                if outer is not None:
                    visit(outer, where)
            for default in (*node.args.defaults, *node.args.kw_defaults):
                if default is not None:
                    visit(default, where)
            body = node.body if isinstance(node.body, list) else [node.body]
            inner = where or getattr(node, "name", "<lambda>")
            for stmt in body:
                visit(stmt, inner)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):  # methods run later; the class body at import
            for item in stmt.body:
                visit(item, f"{stmt.name}." if isinstance(item, _FUNCTIONS) else None)
        else:
            visit(stmt, None)
    return out


def find_sizes(tree: ast.Module, *, own_module: bool = True) -> SizePlan:
    """The sizes of the harness (or KernelBench problem) module ``tree``: the module-level
    int globals that ``get_inputs`` reads, split into those the target may rebind
    (:attr:`SizePlan.names`, value over :data:`SIZE_FLOOR`) and those it may not
    (:attr:`SizePlan.fixed`, with the reason and line). ``own_module``: the harness has a
    module of its own (a harness file, a KernelBench problem), not the kernel module's.
    An empty plan when there is no top-level ``get_inputs``. Raises nothing."""
    functions = {
        n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    if "get_inputs" not in functions:
        return SizePlan()
    values, other = _module_ints(tree)
    reads = _reads(tree)
    wanted: list[str] = []
    for reader in _READERS:
        node = functions.get(reader)
        for name in (n.id for n in ast.walk(node) if isinstance(n, ast.Name)) if node else ():
            if reader == "get_inputs" and name not in wanted and (name in values or name in other):
                wanted.append(name)
    plan = SizePlan()
    for name in wanted:
        if name in other:
            plan.fixed[name] = "assigned more than once at module level"
            continue
        if values[name] <= SIZE_FLOOR:
            continue
        why = _unsafe(reads.get(name, []), own_module)
        if why:
            plan.fixed[name] = why
        else:
            plan.names[name] = values[name]
    return plan


def _unsafe(reads: list[tuple[str | None, int]], own_module: bool) -> str | None:
    """Why rebinding a size read at ``reads`` would be inconsistent, None when it would not."""
    for where, line in reads:
        if where is None:
            return f"read at import time (line {line})"
        if not own_module and where not in _HARNESS_FUNCTIONS:
            return f"read by {where.rstrip('.')} (line {line}), which candidates rewrite"
    return None
