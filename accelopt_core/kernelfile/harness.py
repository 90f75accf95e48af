"""The benchmark harness of a kernel file: find ``get_inputs`` / ``reference`` / ``BENCH`` and
check each part, one checker per part (DESIGN.md, "The benchmark harness in a kernel file").

Every problem is a located :class:`KernelDiagnostic` on :attr:`HarnessInfo.problems`, in the
order get_inputs, reference, BENCH (its keys, then ``entry``, the tolerances, the work).
"""

from __future__ import annotations

import ast
import difflib

from accelopt_core.kernelfile.model import (
    BENCH_KEYS,
    HARNESS_NAMES,
    HarnessInfo,
    KernelDiagnostic,
    KernelFile,
    Severity,
)
from accelopt_core.kernelfile.nodes import FUNC_DEF, IMPORT, bound_names, param_names
from accelopt_core.kernelfile.positions import Positions
from accelopt_core.kernelfile.sizes import find_sizes
from accelopt_core.textdiff import SourceRange

__all__ = ["analyse_harness", "entry_root", "harness_statements"]

_Functions = dict[str, ast.FunctionDef | ast.AsyncFunctionDef]


def harness_statements(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Harness name -> the module-level statement that binds it (in :data:`HARNESS_NAMES`
    order; absent names left out). The last binding wins, as at run time; imports do not
    count, and ``BENCH`` counts only from an assignment."""
    found: dict[str, ast.stmt] = {}
    for stmt in body:
        if isinstance(stmt, IMPORT):
            continue
        for name in bound_names(stmt):
            if name == "BENCH" and not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                continue
            if name in HARNESS_NAMES:
                found[name] = stmt
    return {name: found[name] for name in HARNESS_NAMES if name in found}


class _Checker:
    """What the part checkers share: the file, its positions, and the HarnessInfo they fill."""

    def __init__(self, kf: KernelFile, pos: Positions, functions: _Functions) -> None:
        self.kf = kf
        self.pos = pos
        self.functions = functions
        self.harness = HarnessInfo()
        self.imported: set[str] = set()  # module-level names bound by imports
        self.classes: set[str] = set()  # module-level classes

    def problem(self, msg: str, rng: SourceRange, code: str, severity: Severity = "error") -> None:
        self.harness.problems.append(KernelDiagnostic(msg, rng, severity, code))

    def head(self, stmt: ast.stmt) -> SourceRange:
        """Where a problem about a whole statement is shown: the defined name."""
        if isinstance(stmt, FUNC_DEF):
            return self.pos.def_name(stmt)
        if isinstance(stmt, ast.Assign):
            return self.pos.node(stmt.targets[0])
        if isinstance(stmt, ast.AnnAssign):
            return self.pos.node(stmt.target)
        r = self.pos.node(stmt)
        return SourceRange(r.start_line, r.start_col, r.start_line, r.start_col + 1)


def analyse_harness(
    tree: ast.Module, kf: KernelFile, pos: Positions, functions: _Functions
) -> HarnessInfo | None:
    """The harness of a parsed file, or None when it has none of the three parts.

    ``kf`` must already hold the kernels and launchers (the entry is checked against them);
    ``functions`` maps the module-level non-kernel functions by name. A missing part is an
    error located at the first part present."""
    found = harness_statements(tree.body)
    if not found:
        return None
    check = _Checker(kf, pos, functions)
    check.imported = {n for st in tree.body if isinstance(st, IMPORT) for n in bound_names(st)}
    check.classes = {st.name for st in tree.body if isinstance(st, ast.ClassDef)}
    anchor = check.head(min(found.values(), key=lambda s: s.lineno))
    _check_get_inputs(check, found.get("get_inputs"), anchor)
    _check_reference(check, found.get("reference"), anchor)
    _check_bench(check, found.get("BENCH"), anchor)
    check.harness.sizes = find_sizes(tree, own_module=not kf.kernels)
    return check.harness


# --- get_inputs(seed, device) ---------------------------------------------------------------


def _check_get_inputs(check: _Checker, stmt: ast.stmt | None, anchor: SourceRange) -> None:
    if stmt is None:
        check.problem(
            "harness has no get_inputs(seed, device) returning the inputs of one call",
            anchor,
            "harness-missing-get-inputs",
        )
        return
    check.harness.get_inputs = check.pos.stmt(stmt)
    args = _signature(stmt)
    if args is not None and not _takes_seed_and_device(args):
        found = ", ".join(param_names(args)) or "no parameters"
        check.problem(
            f"get_inputs must take (seed, device); it takes ({found})",
            check.head(stmt),
            "get-inputs-params",
        )


def _signature(stmt: ast.stmt) -> ast.arguments | None:
    """Parameters of a ``def`` or of ``name = lambda ...``; None for anything else."""
    if isinstance(stmt, FUNC_DEF):
        return stmt.args
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Lambda):
        return stmt.value.args
    return None


def _takes_seed_and_device(args: ast.arguments) -> bool:
    """The function can be called as ``f(seed, device)``."""
    positional = args.posonlyargs + args.args
    required = len(positional) - len(args.defaults)
    kw_required = any(default is None for default in args.kw_defaults)
    accepts_two = len(positional) >= 2 or args.vararg is not None
    return accepts_two and required <= 2 and not kw_required


# --- reference(*inputs) ---------------------------------------------------------------------


def _check_reference(check: _Checker, stmt: ast.stmt | None, anchor: SourceRange) -> None:
    if stmt is None:
        check.problem(
            "harness has no reference(*inputs) computing the expected output",
            anchor,
            "harness-missing-reference",
        )
    else:
        check.harness.reference = check.pos.stmt(stmt)


# --- BENCH = {...} --------------------------------------------------------------------------


def _check_bench(check: _Checker, bench: ast.stmt | None, anchor: SourceRange) -> None:
    if bench is None:
        check.problem(
            'harness has no BENCH = {"entry": <launcher>, ...} naming the launcher to time',
            anchor,
            "harness-missing-bench",
        )
        return
    check.harness.bench = check.pos.stmt(bench)
    value = bench.value if isinstance(bench, (ast.Assign, ast.AnnAssign)) else None
    if not isinstance(value, ast.Dict):
        check.problem(
            'BENCH must be a dict literal: BENCH = {"entry": launcher, "rtol": ..., ...}',
            check.pos.node(value) if value is not None else check.head(bench),
            "bench-not-dict",
        )
        return
    items = _bench_items(check, value)
    _check_entry(check, items.get("entry"), bench)
    _check_tolerances(check, items)
    _check_work(check, items)


def _bench_items(check: _Checker, value: ast.Dict) -> dict[str, ast.expr]:
    """Known key -> value expression; ``**`` unpacking, non-string keys (errors) and unknown
    keys (warnings, with the closest known key) are reported and left out."""
    items: dict[str, ast.expr] = {}
    for key, val in zip(value.keys, value.values, strict=True):
        if key is None:
            check.problem(
                "BENCH cannot unpack another dict (**...)", check.pos.node(val), "bench-key-invalid"
            )
        elif not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            check.problem(
                "BENCH keys must be string literals", check.pos.node(key), "bench-key-invalid"
            )
        elif key.value not in BENCH_KEYS:
            close = difflib.get_close_matches(key.value, BENCH_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            check.problem(
                f"unknown BENCH key {key.value!r}{hint}; known keys: {', '.join(BENCH_KEYS)}",
                check.pos.node(key),
                "bench-unknown-key",
                "warning",
            )
        else:
            items[key.value] = val
    return items


def _check_entry(check: _Checker, entry: ast.expr | None, bench: ast.stmt) -> None:
    if entry is None:
        check.problem(
            'BENCH has no "entry": name the launcher function to time, e.g. "entry": softmax',
            check.head(bench),
            "bench-entry-missing",
        )
        return
    root = entry_root(entry)
    if root is None:
        if isinstance(entry, ast.Constant) and isinstance(entry.value, str):
            what = f"the string {entry.value!r} (drop the quotes)"
        elif isinstance(entry, ast.Constant):
            what = f"the {type(entry.value).__name__} {entry.value!r}"
        else:
            what = "an expression of another kind"
        check.problem(
            f'BENCH["entry"] must be the launcher (a function, `Function.apply`, a method, '
            f"a lambda or functools.partial of one), not {what}",
            check.pos.node(entry),
            "bench-entry-invalid",
        )
        return
    check.harness.entry = root
    if not isinstance(entry, ast.Name):
        check.harness.entry_expr = ast.get_source_segment(check.kf.source, entry) or ast.unparse(
            entry
        )
    if root in check.imported and root not in check.functions:
        check.harness.entry_imported = True  # checked against the module that defines it
        return
    if root in check.classes:
        return  # a torch.autograd.Function (or a class with the method): the gate checks it
    wrong = _entry_problem(check.kf, check.functions, root)
    if wrong is not None:
        check.problem(wrong[0], check.pos.node(entry), wrong[1])


def entry_root(entry: ast.expr) -> str | None:
    """The module-level name the entry expression starts from: ``rms_norm`` for ``rms_norm``,
    ``RMSNorm`` for ``RMSNorm.apply``, ``rms_norm`` for ``functools.partial(rms_norm, ...)``
    and for ``lambda x, w: rms_norm(x, w)`` (the first name it calls), else None."""
    if isinstance(entry, ast.Name):
        return entry.id
    if isinstance(entry, ast.Attribute):
        node: ast.expr = entry
        while isinstance(node, ast.Attribute):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None
    if isinstance(entry, ast.Call) and entry.args:
        func = entry.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return entry_root(entry.args[0]) if name == "partial" else None
    if isinstance(entry, ast.Lambda):
        for node in ast.walk(entry.body):
            if isinstance(node, ast.Call):
                root = entry_root(node.func)
                if root is not None:
                    return root
    return None


def _entry_problem(kf: KernelFile, functions: _Functions, name: str) -> tuple[str, str] | None:
    """(message, code) when the function ``name`` cannot be the entry, else None."""
    kernel_names = set(kf.kernel_names)
    if name in kernel_names:
        return (
            f'BENCH["entry"] must be the launcher that calls {name}[grid](...), '
            "not the kernel itself",
            "bench-entry-not-launcher",
        )
    if name not in functions:
        return (
            f'BENCH["entry"] names {name!r}, which is not a function defined in this file',
            "bench-entry-invalid",
        )
    if not any(kf.launches(name, k) for k in kernel_names):
        return (
            f'BENCH["entry"] {name!r} does not launch any kernel of this file',
            "bench-entry-not-launcher",
        )
    return None


def _check_tolerances(check: _Checker, items: dict[str, ast.expr]) -> None:
    for key in ("rtol", "atol"):
        if key not in items:
            continue
        num = _number(items[key])
        if num is None or num < 0:
            check.problem(
                f'BENCH["{key}"] must be a non-negative number such as 1e-4',
                check.pos.node(items[key]),
                "bench-tolerance-invalid",
            )
        else:
            setattr(check.harness, key, num)


def _number(node: ast.expr) -> float | None:
    """The value of a numeric literal, signs included (``-1e-4``); None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        if inner is None:
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    return None


def _check_work(check: _Checker, items: dict[str, ast.expr]) -> None:
    for key in ("flops", "bytes"):
        if key not in items:
            continue
        val = items[key]
        if isinstance(val, ast.Lambda) or (
            isinstance(val, ast.Name) and val.id not in check.kf.kernel_names
        ):
            setattr(check.harness, f"has_{key}", True)
        else:
            check.problem(
                f'BENCH["{key}"] must be a function of the inputs, '
                f"e.g. lambda x: {'2 * x.numel()' if key == 'flops' else 'x.nbytes'}",
                check.pos.node(val),
                "bench-work-invalid",
            )
