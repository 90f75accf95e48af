"""The static gate: a candidate's AST against the evaluation rules (DESIGN.md, rule 2; issue 10,
"Static gate, tightened where cheap").

AST only, nothing is imported or run. The host calls :func:`precheck` before it sends a request
(a rejected candidate costs no target time); the target calls it again before it loads the
candidate: one piece of code on both. Kernels are found by the project's one jit detector
(:mod:`.names`); the launcher's analysis lives in :mod:`.gate.launcher`.

Relative to the original file. The gate judges what a candidate adds or changes, not what the
original (the baseline) already has: a top-level statement of the candidate (a ``def``, a
``class``, an import, an assignment, a module-level ``try``) is *unchanged* when its source text,
or else its AST (``ast.dump``: comments, blank lines and line numbers do not count), is that of a
top-level statement of the original; everything inside an unchanged statement is allowed (a
version check in a ``try``/``except``, an ``lru_cache`` on a device query, as real kernel
libraries have). Every rule applies to the changed statements. The launcher rules (module state,
dead code, dynamic ``getattr`` on any object, calls of module-level objects) also apply to an
unchanged function that the original's launcher did not reach and the candidate's does; compute
ops and low-precision dtypes are allowed when the original has them (its launcher's ops, its
tokens).

Every rejection names its rule (``rule="gate: <name>"`` in the result, :data:`RULES`).
"""

from __future__ import annotations

import ast

from ..names import (
    canonical_module,
    collect_aliases,
    jit_kernels,
    resolved_name,
)
from ..protocol import result_dict
from .compute import item_ops
from .launcher import (
    Reached,
    StateFinder,
    closure_items,
    dead_statements,
    launches,
    local_names,
    module_bindings,
)
from .original import FUNC_DEFS, Original, changed_statements, original_facts, precision_tokens
from .rules import (
    DYNAMIC_GETATTR,
    Violation,
    short_source,
)
from .scan import Scan
from .stack import allowed_modules


def _launcher_rules(
    judged: list[Reached], bindings: dict[str, Reached], mutable: set[str], aliases: dict
) -> Violation | None:
    """The launcher's rules on the judged pieces of the launcher: no ``global`` / ``nonlocal``,
    no module-level state written (:class:`.gate.launcher.StateFinder`), no dead code, no
    ``getattr`` by a computed name on any object, no call of a module-level object that the gate
    cannot read (``_impl = _make(); ... _impl(x)``). The earliest one."""
    finder = StateFinder(bindings, mutable)
    found: list[Violation] = []
    for item in judged:
        found.extend(finder.find(item.node))
        found.extend(_dead_code(item.node))
        local = local_names(item.node)
        for n in ast.walk(item.node):
            if isinstance(n, (ast.Global, ast.Nonlocal)):
                kind = "global" if isinstance(n, ast.Global) else "nonlocal"
                found.append(
                    (
                        "gate: global state",
                        f"'{kind} {', '.join(n.names)}' in the launcher is not allowed (global/"
                        "nonlocal state kept between calls can return cached results)",
                        n.lineno,
                    )
                )
            elif isinstance(n, ast.Call):
                hit = _opaque_call(n, bindings, local, aliases)
                if hit is not None:
                    found.append(hit)
    return min(found, key=lambda v: v[2]) if found else None


def _opaque_call(
    n: ast.Call, bindings: dict[str, Reached], local: set[str], aliases: dict
) -> Violation | None:
    """A launcher call the gate cannot read: ``getattr(obj, <computed>)`` on any object, or a
    call of a module-level name bound to the result of a call (not ``functools.partial``)."""
    func = n.func
    if isinstance(func, ast.Name) and func.id == "getattr" and len(n.args) >= 2:
        if not isinstance(n.args[1], ast.Constant) and "getattr" not in bindings:
            return (
                DYNAMIC_GETATTR[0],
                f"'{short_source(n)}' in the launcher looks up an attribute by a computed name "
                f"({DYNAMIC_GETATTR[1]})",
                n.lineno,
            )
    if not isinstance(func, ast.Name) or func.id in local or func.id not in bindings:
        return None
    value = bindings[func.id].node
    if not isinstance(value, ast.Call):
        return None
    if resolved_name(value.func, aliases) == "functools.partial":
        return None
    return (
        "gate: module-level callable",
        f"the launcher calls '{func.id}', a module-level object made by "
        f"'{short_source(value, 40)}' (line {value.lineno}): the gate cannot see what it runs",
        n.lineno,
    )


def _dead_code(node: ast.AST) -> list[Violation]:
    """Statements of a launcher function that never run."""
    if not isinstance(node, FUNC_DEFS):
        return []
    return [
        (
            "gate: dead code",
            f"'{short_source(stmt, 40)}' never runs (after a return, or under a constant condition): "
            "dead code in the launcher is not allowed (a kernel launch that never runs is none)",
            stmt.lineno,
        )
        for stmt in dead_statements(node)
    ]


def _item_aliases(items: list[Reached], aliases: dict[str, str]) -> dict[str, str]:
    """``aliases`` plus the imports inside the launcher's pieces (``import ... as F``)."""
    extra = dict(aliases)
    for item in items:
        for node in ast.walk(item.node):
            if isinstance(node, ast.Import):
                for a in node.names:
                    full = a.name if a.asname else a.name.split(".")[0]
                    extra.setdefault(a.asname or full, canonical_module(full))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    extra.setdefault(
                        a.asname or a.name, f"{canonical_module(node.module)}.{a.name}"
                    )
    return extra


def _launcher_compute(
    judged: list[Reached], aliases: dict[str, str], original: Original | None
) -> Violation | None:
    """Compute in the judged pieces of the launcher that the original's launcher does not do
    (the earliest one)."""
    base_ops = original.ops if original else frozenset()
    found: list[Violation] = []
    for item in judged:
        via = "" if isinstance(item.node, FUNC_DEFS) else f" (through module-level '{item.name}')"
        for desc, line in item_ops(item.node, aliases):
            if desc not in base_ops:
                found.append(
                    (
                        "gate: torch compute",
                        f"compute outside the kernel: {desc} in the launcher{via} (only allocation, "
                        "views and metadata are allowed)",
                        line,
                    )
                )
    return min(found, key=lambda v: v[2]) if found else None


def _precision(tokens: list[tuple[str, int]], original: Original | None) -> Violation | None:
    """A low-precision token the original does not have (the earliest one)."""
    base_tokens = original.tokens if original else frozenset()
    for token, line in sorted(tokens, key=lambda t: t[1]):
        if token not in base_tokens:
            return (
                "gate: precision downcast",
                f"precision downcast: '{token}' does not appear in the baseline (lower precision "
                "than the original is not a speedup of the same computation)",
                line,
            )
    return None


def _violation(
    tree: ast.Module,
    source: str,
    entry: str,
    baseline_source: str | None,
    module: str | None,
    allow_modules: tuple[str, ...] = (),
) -> Violation | None:
    """The first rule the parsed candidate breaks: entry and kernel; the rules of all changed
    code (:class:`Scan`, with the modules it may import: :func:`.stack.allowed_modules`); the
    launcher's rules; a reachable launch; compute and precision."""
    module_aliases = collect_aliases(tree)
    kernels = jit_kernels(tree.body, module_aliases)  # module-level imports, as at run time
    bindings = module_bindings(tree)
    if entry not in bindings or not isinstance(bindings[entry].node, (*FUNC_DEFS, ast.ClassDef)):
        return "gate: no entry", f"the candidate does not define the entry function '{entry}'", None
    if not kernels:
        return "gate: no kernel", "the candidate defines no @triton.jit or @nki.jit kernel", None
    original = original_facts(baseline_source, entry)
    changed = changed_statements(tree, source, original)
    depth = len(module.split(".")) - 1 if module else 0  # mypkg.ops.k: up to mypkg (2)
    imports = original.imports if original else frozenset()
    allowed = allowed_modules(imports, module, allow_modules)
    scan = Scan(tree, changed, module_aliases, bindings, depth, allowed)
    items = closure_items(tree, entry, kernels, bindings)
    changed_ids = {id(s) for s in changed}
    reached = original.reached if original else frozenset()
    judged = [i for i in items if id(i.stmt) in changed_ids or i.name not in reached]
    aliases = _item_aliases(judged, scan.aliases)
    found = scan.first() or _launcher_rules(judged, bindings, scan.mutable, aliases)
    if found:
        return found
    if entry not in kernels and not any(launches(i.node, kernels) for i in items):
        return (
            "gate: no launch",
            f"the entry '{entry}' does not launch a @triton.jit / @nki.jit kernel of the "
            "candidate on a path that runs (expected kernel[grid](...))",
            bindings[entry].node.lineno,
        )
    return _launcher_compute(judged, aliases, original) or _precision(
        precision_tokens(scan.nodes), original
    )


def static_gate(
    candidate_source: str,
    entry: str,
    baseline_source: str | None = None,
    tree: ast.Module | None = None,
) -> tuple[bool, str, int | None]:
    """Check a candidate's AST against the evaluation rules; see :func:`gate_violation`.

    Returns:
        ``(ok, message, line)``: ok True with message "" when the candidate passes; else the
        reason and the 1-based candidate line. A candidate that does not parse fails with
        "syntax error" (call :func:`precheck` to get a compile_error for it instead).
    """
    found = gate_violation(candidate_source, entry, baseline_source, tree)
    if found is None:
        return True, "", None
    return False, found[1], found[2]


def gate_violation(
    candidate_source: str,
    entry: str,
    baseline_source: str | None = None,
    tree: ast.Module | None = None,
    module: str | None = None,
    allow_modules: tuple[str, ...] = (),
) -> Violation | None:
    """The first evaluation rule the candidate breaks, as ``(rule, message, line)``, else None.

    Args:
        candidate_source: the full candidate module.
        entry: name of the launcher (``BENCH["entry"].__name__``).
        baseline_source: the original file; what it has in unchanged statements is allowed, so
            are its launcher's compute ops and its low-precision dtypes (module docstring).
            None: everything is judged and nothing is allowed.
        tree: the candidate already parsed (saves a parse), else it is parsed here.
        module: the kernel module's real dotted name when it lives in a package (issue 13):
            relative imports that stay inside its top-level package are then allowed (they
            resolve to the user's own modules, served from the request's closure), and so
            are absolute imports of modules under its top-level package.
        allow_modules: modules a candidate may import besides those of the original, the
            kernel stack and the side-effect-free ones (the setting ``gate.allowModules``;
            :mod:`.stack`).

    Rules (:data:`RULES`): the entry must launch a ``@triton.jit`` (``kernel[grid](...)``) or
    ``@nki.jit`` kernel defined at the candidate's top level (:func:`.names.jit_kernels`) on a
    path that runs; in changed code no threads, processes, streams, CUDA graphs, shells, result
    caches, try/except, exception-swallowing context managers, eval/exec/compile, imports by
    name, ``getattr`` by computed name on modules, namespace lookups (``globals()``,
    ``__dict__``, ``sys.modules``), file or network I/O, process control, stack / frame / heap
    inspection, native code (the parts of torch, triton and numpy that load it, start
    processes or touch files and caches: :mod:`.stack`), imports of modules outside the
    allowlist (``gate: module not allowed``), patched or shadowed imports, mutable default
    arguments; the
    launcher (and everything it reaches in the module) computes nothing but allocation, views
    and metadata, writes no module-level state or function attributes, has no dead code and
    calls nothing the gate cannot read; no float16/bfloat16/float8 token the baseline lacks.
    A syntax error comes back as ``("syntax error", message, line)``.
    """
    if tree is None:
        try:
            tree = ast.parse(candidate_source)
        except SyntaxError as exc:
            return "syntax error", f"syntax error: {exc.msg}", exc.lineno
    return _violation(tree, candidate_source, entry, baseline_source, module, allow_modules)


def precheck(
    candidate_source: str,
    entry: str,
    baseline_source: str | None = None,
    filename: str = "<candidate>",
    module: str | None = None,
    tree: ast.Module | None = None,
    allow_modules: tuple[str, ...] | list[str] = (),
) -> dict | None:
    """Syntax check and static gate without running anything.

    ``module``: the kernel module's dotted name inside its package (see :func:`gate_violation`).
    ``allow_modules``: the setting ``gate.allowModules`` (see :func:`gate_violation`).
    ``tree``: ``candidate_source`` already parsed by the caller (read, not mutated), else it is
    parsed here.
    Returns None when the candidate may be run, else a result dict (EvalResult fields):
    ``compile_error`` with the line for a syntax error, ``rejected`` with the line and the
    ``rule`` (``"gate: eval"``, ... :data:`RULES`) for a gate failure. Never raises: a
    candidate the gate cannot analyse (nesting too deep for the AST tools) is rejected
    (``gate: unreadable``), the gate fails closed.
    """
    try:
        tree = tree if tree is not None else ast.parse(candidate_source, filename)
    except SyntaxError as exc:
        return result_dict("compile_error", f"SyntaxError: {exc.msg}", line=exc.lineno)
    except ValueError as exc:  # e.g. null bytes
        return result_dict("compile_error", f"invalid source: {exc}")
    except (RecursionError, MemoryError):  # Python cannot compile it either
        return result_dict("compile_error", "the source nests too deeply to be parsed")
    try:
        found = _violation(
            tree, candidate_source, entry, baseline_source, module, tuple(allow_modules)
        )
    except RecursionError:  # nesting deeper than the AST tools recurse
        found = ("gate: unreadable", "the candidate nests too deeply for the gate to read", None)
    except Exception as exc:  # noqa: BLE001 - a gate that cannot read a candidate rejects it
        found = ("gate: unreadable", f"the gate could not read the candidate ({exc!r})", None)
    if found is not None:
        return result_dict("rejected", found[1], line=found[2], rule=found[0])
    return None
