"""The static gate: a candidate's AST against the evaluation rules (DESIGN.md, rule 2).

AST only, nothing is imported or run. The host calls :func:`precheck` before it sends a request
(a rejected candidate costs no target time); the target calls it again before it loads the
candidate. Kernels are found by the project's one jit detector (:mod:`.names`); the launcher's
analysis lives in :mod:`.launcher`.
"""

from __future__ import annotations

import ast
import functools
import re

from .launcher import candidate_kernels, functions, launcher_closure, launcher_ops, launches
from .names import collect_aliases, resolved_name
from .protocol import result_dict

#: A rule broken: ``(message, 1-based candidate line or None)``.
Violation = tuple[str, int | None]

_CONCURRENCY_MODULES = (
    "threading",
    "_thread",
    "multiprocessing",
    "concurrent",
    "subprocess",
    "asyncio",
    "torch.multiprocessing",
)
_FORBIDDEN_CALLS = re.compile(
    r"^(os\.(system|popen|fork|forkpty|spawn\w*|exec\w*|posix_spawn\w*)"
    r"|torch\.cuda\.(Stream|stream|set_stream|graph|CUDAGraph|graphs)|torch\.Stream"
    r"|functools\.(lru_cache|cache)|contextlib\.suppress)$"
)
_LOW_PRECISION = re.compile(r"^(float16|bfloat16|half|fp16|bf16|float8\w*|fp8\w*)$", re.I)


def _imported_modules(node: ast.AST) -> list[str]:
    """What an import statement names: ``import a.b`` -> ``a.b``; ``from a import b`` -> ``a``
    and ``a.b``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def _concurrency_or_cache(tree: ast.Module, aliases: dict[str, str]) -> Violation | None:
    """Threads, processes, streams, CUDA graphs, result caches, shells: anywhere."""
    for node in ast.walk(tree):
        for mod in _imported_modules(node):
            if any(mod == m or mod.startswith(m + ".") for m in _CONCURRENCY_MODULES):
                return f"'{mod}' is not allowed (no threads or processes)", node.lineno
            if _FORBIDDEN_CALLS.match(mod):
                return f"'{mod}' is not allowed", node.lineno
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = resolved_name(node, aliases)
            if name and _FORBIDDEN_CALLS.match(name):
                return (
                    f"'{name}' is not allowed (no streams, graphs, caches or shells)",
                    node.lineno,
                )
    return None


def _fallback_or_state(launcher: list[ast.AST], kernel_defs: list[ast.AST]) -> Violation | None:
    """try/except in kernels or launcher; global/nonlocal in the launcher."""
    for fn in launcher + kernel_defs:
        for node in ast.walk(fn):
            if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                return (
                    "try/except is not allowed in kernels or the launcher (no fallbacks)",
                    node.lineno,
                )
            if isinstance(node, (ast.Global, ast.Nonlocal)) and fn in launcher:
                return "global/nonlocal state in the launcher is not allowed", node.lineno
    return None


def _module_level_writes(tree: ast.Module, launcher: list[ast.AST]) -> Violation | None:
    """The launcher storing into a module-level name (``_CACHE[key] = out``)."""
    module_names = {
        t.id
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    for fn in launcher:
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in module_names
            ):
                return (
                    f"the launcher writes into module-level '{node.value.id}' (no result caches)",
                    node.lineno,
                )
    return None


def _precision_tokens(tree: ast.AST) -> list[tuple[str, int]]:
    """Low-precision dtype names (``float16``, ``bf16``, ``float8_e4m3fn``, ...) as names,
    attributes or strings: ``(lower-case token, line)`` in source order."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        token = None
        if isinstance(node, ast.Name):
            token = node.id
        elif isinstance(node, ast.Attribute):
            token = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            token = node.value
        if token and _LOW_PRECISION.match(token):
            found.append((token.lower(), getattr(node, "lineno", 0)))
    found.sort(key=lambda t: t[1])
    return found


@functools.lru_cache(maxsize=64)
def _baseline_allowances(
    baseline_source: str | None, entry: str
) -> tuple[frozenset[str], frozenset[str]]:
    """What the baseline already does: its launcher's compute ops and its low-precision tokens.
    Cached: every candidate of a search is gated against the same baseline."""
    if not baseline_source:
        return frozenset(), frozenset()
    try:
        tree = ast.parse(baseline_source)
    except SyntaxError:
        return frozenset(), frozenset()
    aliases = collect_aliases(tree, everywhere=True)
    ops = launcher_ops(tree, entry, candidate_kernels(tree), aliases)
    tokens = _precision_tokens(tree)
    return frozenset(d for d, _ in ops), frozenset(t for t, _ in tokens)


def _beyond_baseline(
    tree: ast.Module,
    entry: str,
    kernels: dict[str, str],
    aliases: dict[str, str],
    baseline_source: str | None,
) -> Violation | None:
    """Launcher compute or a low-precision token the baseline does not have."""
    base_ops, base_tokens = _baseline_allowances(baseline_source, entry)
    for desc, line in launcher_ops(tree, entry, kernels, aliases):
        if desc not in base_ops:
            return (
                f"compute outside the kernel: {desc} in the launcher (only allocation, views "
                "and metadata are allowed)",
                line,
            )
    for token, line in _precision_tokens(tree):
        if token not in base_tokens:
            return f"precision downcast: '{token}' does not appear in the baseline", line
    return None


def _violation(tree: ast.Module, entry: str, baseline_source: str | None) -> Violation | None:
    """The first rule the parsed candidate breaks, in the order of :func:`static_gate`."""
    kernels = candidate_kernels(tree)  # decided by the module-level imports, as at run time
    aliases = collect_aliases(tree, everywhere=True)  # calls: also function-local imports
    funcs = functions(tree)
    if entry not in funcs:
        return f"the candidate does not define the entry function '{entry}'", None
    if not kernels:
        return "the candidate defines no @triton.jit or @nki.jit kernel", None
    launcher = launcher_closure(tree, entry, kernels)
    found = (
        _concurrency_or_cache(tree, aliases)
        or _fallback_or_state(launcher, [funcs[k] for k in kernels])
        or _module_level_writes(tree, launcher)
    )
    if found:
        return found
    if entry not in kernels and not any(launches(fn, kernels) for fn in launcher):
        return (
            f"the entry '{entry}' does not launch a @triton.jit / @nki.jit kernel of the "
            "candidate (expected kernel[grid](...))",
            funcs[entry].lineno,
        )
    return _beyond_baseline(tree, entry, kernels, aliases, baseline_source)


def static_gate(
    candidate_source: str,
    entry: str,
    baseline_source: str | None = None,
    tree: ast.Module | None = None,
) -> tuple[bool, str, int | None]:
    """Check a candidate's AST against the evaluation rules (DESIGN.md, rule 2).

    Args:
        candidate_source: the full candidate module.
        entry: name of the launcher (``BENCH["entry"].__name__``).
        baseline_source: the baseline module; compute ops in the launcher and low-precision
            dtypes the baseline already has are allowed. None: nothing is allowed.
        tree: the candidate already parsed (saves a parse), else it is parsed here.

    Returns:
        ``(ok, message, line)``: ok True with message "" when the candidate passes; else the
        reason and the 1-based candidate line. A candidate that does not parse fails with
        "syntax error" (call :func:`precheck` to get a compile_error for it instead).

    Rules: the entry must launch a ``@triton.jit`` (``kernel[grid](...)``) or ``@nki.jit``
    kernel defined at the candidate's top level (:func:`.names.jit_kernels`: ``triton.jit``,
    ``nki.jit`` / ``baremetal`` / ``benchmark`` / ``profile``, through the module's imports;
    ``neuronxcc.nki`` and the standalone ``nki`` package alike; a ``jit`` of any other origin
    is no kernel); no torch compute (only allocation, views and metadata) in the launcher and
    the functions it calls; no try/except or ``contextlib.suppress`` in kernels or launcher; no
    threads, processes, streams, CUDA graphs or result caches (``global`` /
    ``functools.cache``); no float16/bfloat16/float8 token the baseline lacks.
    """
    if tree is None:
        try:
            tree = ast.parse(candidate_source)
        except SyntaxError as exc:
            return False, f"syntax error: {exc.msg}", exc.lineno
    found = _violation(tree, entry, baseline_source)
    if found is None:
        return True, "", None
    return False, found[0], found[1]


def precheck(
    candidate_source: str,
    entry: str,
    baseline_source: str | None = None,
    filename: str = "<candidate>",
) -> dict | None:
    """Syntax check and static gate without running anything.

    Returns None when the candidate may be run, else a result dict (EvalResult fields):
    ``compile_error`` with the line for a syntax error, ``rejected`` for a gate failure.
    """
    try:
        tree = ast.parse(candidate_source, filename)
    except SyntaxError as exc:
        return result_dict("compile_error", f"SyntaxError: {exc.msg}", line=exc.lineno)
    except ValueError as exc:  # e.g. null bytes
        return result_dict("compile_error", f"invalid source: {exc}")
    ok, message, line = static_gate(candidate_source, entry, baseline_source, tree)
    if not ok:
        return result_dict("rejected", message, line=line)
    return None
