"""Find kernels, launchers and the benchmark harness in a kernel source file.

Pure :mod:`ast` analysis: nothing here imports torch, triton or the Neuron SDK, and
:func:`parse_kernel_file` never raises on bad source (a syntax error is a located
:class:`KernelDiagnostic`).

What is recognised (see ``shared/DESIGN.md``, "The benchmark harness in a kernel file"):

* kernels: functions decorated ``@triton.jit`` / ``@triton.jit(...)`` / ``@jit`` (after
  ``from triton import jit``), also under ``@triton.autotune(...)`` / ``@triton.heuristics(...)``;
  ``@nki.jit`` / ``@nki.jit(...)`` / ``@nki.baremetal`` / ``@nki.benchmark`` / ``@nki.profile``
  (``import neuronxcc.nki as nki``, ``from neuronxcc import nki``). Aliased imports
  (``import triton as tr``) are resolved.
* launchers: module-level functions that launch a kernel: ``kernel[grid](...)`` for Triton, a
  direct call (or the kernel passed to a call, as in ``nki.simulate_kernel(kernel, ...)``) for NKI.
* the harness: ``def get_inputs(seed, device)``, ``def reference(*inputs)`` and
  ``BENCH = {"entry": launcher, "rtol": ..., "atol": ..., "flops": lambda ..., "bytes": lambda ...}``.

Positions: :class:`SourceRange` lines are 1-based; columns are 0-based indices into the line as a
Python ``str`` (code points). :mod:`ast` reports UTF-8 byte columns; they are converted here, so
non-ASCII text before a token does not shift ranges. The LSP layer converts code points to UTF-16
(pygls' position codec). Lines are split on ``\\n``, ``\\r\\n`` and ``\\r`` like the tokenizer and LSP.
"""

from __future__ import annotations

import ast
import difflib
import functools
import hashlib
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from accelopt_core.onsite.names import (
    backend_of,
    collect_aliases,
    decorator_name,
    dotted_name,
    is_api,
    module_statements,
    resolve,
)

__all__ = [
    "SourceRange",
    "KernelDiagnostic",
    "KernelInfo",
    "LauncherInfo",
    "HarnessInfo",
    "KernelFile",
    "KernelFileError",
    "parse_kernel_file",
    "load_kernel_file",
    "quick_has_kernels",
    "normalize_source",
    "source_fingerprint",
    "restore_harness",
    "harness_skeleton",
    "minimal_hunks",
    "apply_hunks",
    "unified_diff",
    "split_lines",
]

Severity = Literal["error", "warning", "information"]
Backend = Literal["triton", "nki"]

#: Harness names a file defines at module level (DESIGN.md).
HARNESS_NAMES = ("get_inputs", "reference", "BENCH")
#: Keys ``BENCH`` may hold.
BENCH_KEYS = ("entry", "rtol", "atol", "flops", "bytes")

_LINE_SPLIT = re.compile(r"\r\n|\r|\n")
_IDENT = re.compile(r"[^\W\d]\w*")


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class SourceRange:
    """A span of source text.

    ``start_line``/``end_line`` are 1-based; ``start_col``/``end_col`` are 0-based code-point
    columns; the end is exclusive (as in :mod:`ast`'s ``end_col_offset``).
    """

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    @property
    def start(self) -> tuple[int, int]:
        return (self.start_line, self.start_col)

    @property
    def end(self) -> tuple[int, int]:
        return (self.end_line, self.end_col)

    def contains(self, line: int, col: int) -> bool:
        """True when (1-based ``line``, 0-based ``col``) lies in the range, its end included
        (a cursor just after the last character still counts)."""
        return self.start <= (line, col) <= self.end

    def to_dict(self) -> dict[str, int]:
        return {
            "start_line": self.start_line,
            "start_col": self.start_col,
            "end_line": self.end_line,
            "end_col": self.end_col,
        }


@dataclass
class KernelDiagnostic:
    """A located message about a kernel file, for CLI output and LSP diagnostics.

    ``code`` is a stable identifier (``syntax-error``, ``no-kernels``, ``bench-entry-invalid``,
    ...) that code actions can key on.
    """

    message: str
    range: SourceRange
    severity: Severity
    code: str

    def format(self, path: str) -> str:
        """``softmax.py:12:5: error: ...`` (line and column 1-based, as compilers print them)."""
        return (
            f"{path}:{self.range.start_line}:{self.range.start_col + 1}: "
            f"{self.severity}: {self.message}"
        )


@dataclass
class KernelInfo:
    """One ``@triton.jit`` / ``@nki.jit`` kernel.

    Attributes:
        name: function name.
        backend: ``triton`` or ``nki``.
        range: the whole definition, decorators included.
        name_range: the identifier after ``def``.
        decorators: resolved dotted names, outermost first, call arguments dropped
            (``["triton.autotune", "triton.jit"]``; NKI ones as ``nki.jit``).
        params: parameter names in order (``*args``/``**kwargs`` without stars).
        constexpr_params: parameters annotated ``tl.constexpr`` (Triton compile-time constants).
        api_calls: calls of the Triton / NKI API inside the kernel, as written (``tl.load``,
            ``nl.matmul``), each with the range of the called name.
    """

    name: str
    backend: Backend
    range: SourceRange
    name_range: SourceRange
    decorators: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    constexpr_params: list[str] = field(default_factory=list)
    api_calls: list[tuple[str, SourceRange]] = field(default_factory=list)


@dataclass
class LauncherInfo:
    """A module-level function that launches kernels (``kernel[grid](...)`` or an NKI call).

    ``kernels`` lists the kernels it launches directly, in order of first launch.
    """

    name: str
    range: SourceRange
    name_range: SourceRange
    kernels: list[str] = field(default_factory=list)


@dataclass
class HarnessInfo:
    """The benchmark harness found in a file (``get_inputs`` / ``reference`` / ``BENCH``).

    Attributes:
        entry: the name ``BENCH["entry"]`` refers to (None when absent or not a name).
        rtol / atol: the tolerances given in ``BENCH`` (None: worker defaults by dtype).
        has_flops / has_bytes: ``BENCH`` gives the work of one call for the roofline.
        get_inputs / reference / bench: ranges of the three definitions (None when missing).
        problems: located errors and warnings about an incomplete or invalid harness.
    """

    entry: str | None = None
    rtol: float | None = None
    atol: float | None = None
    has_flops: bool = False
    has_bytes: bool = False
    get_inputs: SourceRange | None = None
    reference: SourceRange | None = None
    bench: SourceRange | None = None
    problems: list[KernelDiagnostic] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """All three pieces present, an entry named, and no error among :attr:`problems`."""
        return (
            self.get_inputs is not None
            and self.reference is not None
            and self.bench is not None
            and self.entry is not None
            and not any(p.severity == "error" for p in self.problems)
        )


@dataclass
class KernelFile:
    """Everything :func:`parse_kernel_file` found in one source file.

    ``harness`` is None when no harness piece at all is present; ``diagnostics`` holds the
    syntax error, "no kernels", the harness problems and a "no harness" note.
    """

    path: str
    source: str
    kernels: list[KernelInfo] = field(default_factory=list)
    launchers: list[LauncherInfo] = field(default_factory=list)
    harness: HarnessInfo | None = None
    diagnostics: list[KernelDiagnostic] = field(default_factory=list)
    syntax_error: KernelDiagnostic | None = None
    # name -> module-level functions it calls (transitively closed), for entry_for().
    _reach: dict[str, set[str]] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """The source parsed and holds at least one kernel."""
        return self.syntax_error is None and bool(self.kernels)

    @property
    def backend(self) -> Backend | None:
        """Backend of the first kernel (``triton`` / ``nki``), None without kernels."""
        return self.kernels[0].backend if self.kernels else None

    @property
    def kernel_names(self) -> list[str]:
        return [k.name for k in self.kernels]

    def kernel(self, name: str) -> KernelInfo:
        """The kernel called ``name``. Raises KeyError naming the kernels that do exist."""
        for k in self.kernels:
            if k.name == name:
                return k
        known = ", ".join(self.kernel_names) or "none"
        raise KeyError(f"no kernel named {name!r} in {self.path} (kernels: {known})")

    def launcher(self, name: str) -> LauncherInfo | None:
        """The launcher called ``name``, or None."""
        return next((la for la in self.launchers if la.name == name), None)

    def launches(self, function: str, kernel_name: str) -> bool:
        """True when module-level ``function`` launches ``kernel_name`` directly or through
        the module-level functions it calls."""
        names = {function} | self._reach.get(function, set())
        return any(kernel_name in la.kernels for la in self.launchers if la.name in names)

    def launcher_for(self, kernel_name: str) -> LauncherInfo | None:
        """The launcher that launches ``kernel_name`` directly (the BENCH entry if it does,
        else the first such launcher), or None."""
        direct = [la for la in self.launchers if kernel_name in la.kernels]
        entry = self.harness.entry if self.harness else None
        for la in direct:
            if la.name == entry:
                return la
        return direct[0] if direct else None

    def entry_for(self, kernel_name: str) -> str | None:
        """The function to time for ``kernel_name``: the BENCH entry when it launches the
        kernel (directly or via a helper), else the kernel's launcher, else None."""
        entry = self.harness.entry if self.harness else None
        if entry is not None and self.launches(entry, kernel_name):
            return entry
        la = self.launcher_for(kernel_name)
        return la.name if la else None

    def kernel_at(self, line: int, col: int) -> KernelInfo | None:
        """The kernel whose definition contains (1-based ``line``, 0-based ``col``)."""
        for k in self.kernels:
            if k.range.contains(line, col):
                return k
        return None

    def launcher_at(self, line: int, col: int) -> LauncherInfo | None:
        """The launcher whose definition contains (1-based ``line``, 0-based ``col``)."""
        for la in self.launchers:
            if la.range.contains(line, col):
                return la
        return None


class KernelFileError(Exception):
    """A kernel file cannot be read at all. The message is ``path:line:col: message``."""

    def __init__(self, path: str, message: str, line: int = 1, col: int = 1) -> None:
        super().__init__(f"{path}:{line}:{col}: {message}")
        self.path = path
        self.line = line
        self.col = col


# --------------------------------------------------------------------------------------------
# Positions
# --------------------------------------------------------------------------------------------


def split_lines(source: str) -> list[str]:
    """Lines of ``source`` with their line endings kept, split on ``\\n``, ``\\r\\n`` and
    ``\\r`` (as Python's tokenizer and LSP do; unlike :meth:`str.splitlines`, form feeds and
    Unicode separators do not end a line). ``""`` gives ``[]``."""
    if not source:
        return []
    out: list[str] = []
    pos = 0
    for m in _LINE_SPLIT.finditer(source):
        out.append(source[pos : m.end()])
        pos = m.end()
    if pos < len(source):
        out.append(source[pos:])
    return out


class _Positions:
    """Converts :mod:`ast` (line, UTF-8 byte column) pairs to :class:`SourceRange` columns."""

    def __init__(self, source: str) -> None:
        self.lines = split_lines(source)

    def col(self, line: int, byte_col: int) -> int:
        if line < 1 or line > len(self.lines):
            return max(byte_col, 0)
        text = self.lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def node(self, node: ast.AST) -> SourceRange:
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        start = self.col(line, getattr(node, "col_offset", 0))
        end = self.col(end_line, end_col) if end_col is not None else start
        return SourceRange(line, start, end_line, end)

    def stmt(self, node: ast.stmt) -> SourceRange:
        """A statement's range; for a decorated def or class it starts at the first ``@``."""
        rng = self.node(node)
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            first = min(decorators, key=lambda d: (d.lineno, d.col_offset))
            line = first.lineno
            col = self.col(line, first.col_offset)
            text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
            at = text.rfind("@", 0, col + 1)
            return SourceRange(line, at if at >= 0 else col, rng.end_line, rng.end_col)
        return rng

    def def_name(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> SourceRange:
        """Range of the identifier after ``def`` / ``class``."""
        line = node.lineno
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        start_col = self.col(line, node.col_offset)
        keyword = "class" if isinstance(node, ast.ClassDef) else "def"
        at = text.find(keyword, start_col)
        at = text.find(node.name, at + len(keyword)) if at >= 0 else -1
        if at < 0:
            at = start_col
        return SourceRange(line, at, line, at + len(node.name))

    def offset(self, line: int, col: int) -> int:
        """String offset of (1-based line, code-point col); positions past the end clamp."""
        if line < 1:
            return 0
        if line > len(self.lines):
            return sum(len(t) for t in self.lines)
        base = sum(len(t) for t in self.lines[: line - 1])
        return base + min(col, len(self.lines[line - 1]))


def _param_names(args: ast.arguments) -> list[str]:
    names = [a.arg for a in args.posonlyargs + args.args]
    if args.vararg:
        names.append(args.vararg.arg)
    names += [a.arg for a in args.kwonlyargs]
    if args.kwarg:
        names.append(args.kwarg.arg)
    return names


def _all_args(args: ast.arguments) -> list[ast.arg]:
    out = list(args.posonlyargs + args.args)
    if args.vararg:
        out.append(args.vararg)
    out += args.kwonlyargs
    if args.kwarg:
        out.append(args.kwarg)
    return out


def _is_constexpr(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.split(".")[-1] == "constexpr"
    dotted = dotted_name(annotation)
    return dotted is not None and dotted.split(".")[-1] == "constexpr"


def _iter_calls(node: ast.AST) -> list[ast.Call]:
    """Every Call node under ``node`` (a leaner :func:`ast.walk`: no generators, no
    ``ctx`` fields; this walk dominates the analysis of large files)."""
    out: list[ast.Call] = []
    stack: list[ast.AST] = [node]
    ast_type, call_type = ast.AST, ast.Call
    while stack:
        n = stack.pop()
        if type(n) is call_type:
            out.append(n)  # type: ignore[arg-type]
        for name in n._fields:
            if name == "ctx":
                continue
            v = getattr(n, name, None)
            if type(v) is list:
                stack.extend(x for x in v if isinstance(x, ast_type))
            elif isinstance(v, ast_type):
                stack.append(v)
    return out


def _names_loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _bound_names(stmt: ast.stmt) -> list[str]:
    """Module-level names a statement binds (defs, classes, simple assignments, imports)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
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


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------

_FuncDef = (ast.FunctionDef, ast.AsyncFunctionDef)


def _syntax_diagnostic(exc: BaseException, pos: _Positions) -> KernelDiagnostic:
    if isinstance(exc, SyntaxError):
        line = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        end_line = getattr(exc, "end_lineno", None) or line
        end_col = getattr(exc, "end_offset", None)
        end_col = max(end_col - 1, col) if end_col and end_line == line else col
        if end_line != line:
            end_line, end_col = line, col
        # SyntaxError offsets are code points of the line already (1-based).
        text = (exc.msg or "invalid syntax").strip()
        if end_col == col:
            end_col = col + 1
        return KernelDiagnostic(
            f"syntax error: {text}",
            SourceRange(line, col, end_line, end_col),
            "error",
            "syntax-error",
        )
    msg = str(exc) or type(exc).__name__
    return KernelDiagnostic(
        f"cannot parse: {msg}", SourceRange(1, 0, 1, 0), "error", "syntax-error"
    )


def parse_kernel_file(source: str, path: str = "<string>") -> KernelFile:
    """Analyse ``source`` (a whole Python module). Never raises: a syntax error or an
    unexpected failure becomes a ``syntax-error`` diagnostic of the returned KernelFile."""
    kf = KernelFile(path=path, source=source)
    pos = _Positions(source)
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        diag = _syntax_diagnostic(exc, pos)
        kf.syntax_error = diag
        kf.diagnostics.append(diag)
        return kf
    try:
        _analyse(tree, kf, pos)
    except Exception as exc:  # defensive: a bug here must not take the caller down
        diag = KernelDiagnostic(
            f"internal error while analysing the file: {type(exc).__name__}: {exc}",
            SourceRange(1, 0, 1, 0),
            "error",
            "internal-error",
        )
        kf.diagnostics.append(diag)
    return kf


def _analyse(tree: ast.Module, kf: KernelFile, pos: _Positions) -> None:
    aliases = collect_aliases(tree)

    # Kernels: module-level defs, also inside module-level `if` / `try` blocks.
    kernel_nodes: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in module_statements(tree.body):
        if not isinstance(node, _FuncDef) or not node.decorator_list:
            continue
        decorators = [decorator_name(d, aliases) for d in node.decorator_list]
        backend = backend_of(decorators)
        if backend is None:
            continue
        all_args = _all_args(node.args)
        api_calls: list[tuple[str, SourceRange]] = []
        for sub in _iter_calls(node):
            dotted = dotted_name(sub.func)
            if dotted and "." in dotted and is_api(resolve(dotted, aliases)):
                api_calls.append((dotted, pos.node(sub.func)))
        api_calls.sort(key=lambda c: c[1])
        kf.kernels.append(
            KernelInfo(
                name=node.name,
                backend=backend,
                range=pos.stmt(node),
                name_range=pos.def_name(node),
                decorators=decorators,
                params=_param_names(node.args),
                constexpr_params=[a.arg for a in all_args if _is_constexpr(a.annotation)],
                api_calls=api_calls,
            )
        )
        kernel_nodes.setdefault(node.name, node)
    kf.kernels.sort(key=lambda k: k.range)
    kernel_backend = {k.name: k.backend for k in kf.kernels}

    # Module-level functions, their direct launches and the functions they call.
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for stmt in tree.body:
        if isinstance(stmt, _FuncDef) and stmt.name not in kernel_backend:
            functions[stmt.name] = stmt
    calls: dict[str, set[str]] = {}
    interesting = set(functions) | set(kernel_backend)
    for name, fn in functions.items():
        launched: list[str] = []
        called: set[str] = set()
        calls[name] = called
        # Cheap text filter first: only walk functions that mention a kernel or a function.
        first, last = fn.lineno, fn.end_lineno or fn.lineno
        mentioned = set(_IDENT.findall("".join(pos.lines[first - 1 : last]))) - {name}
        if not mentioned & interesting:
            continue
        for sub in sorted(_iter_calls(fn), key=lambda c: (c.lineno, c.col_offset)):
            func = sub.func
            if (
                isinstance(func, ast.Subscript)
                and isinstance(func.value, ast.Name)
                and kernel_backend.get(func.value.id) == "triton"
            ):
                launched.append(func.value.id)
            elif isinstance(func, ast.Name):
                if kernel_backend.get(func.id) == "nki":
                    launched.append(func.id)
                elif func.id in functions and func.id != name:
                    called.add(func.id)
            # NKI kernels handed to a runner: nki.simulate_kernel(kernel, ...), nki.baremetal(k)
            for arg in sub.args:
                if isinstance(arg, ast.Name) and kernel_backend.get(arg.id) == "nki":
                    launched.append(arg.id)
        if launched:
            kf.launchers.append(
                LauncherInfo(
                    name=name,
                    range=pos.stmt(fn),
                    name_range=pos.def_name(fn),
                    kernels=list(dict.fromkeys(launched)),
                )
            )
    kf._reach = _transitive(calls)

    if not kf.kernels:
        kf.diagnostics.append(
            KernelDiagnostic(
                "no @triton.jit or @nki.jit kernel in this file",
                SourceRange(1, 0, 1, 0),
                "warning",
                "no-kernels",
            )
        )

    kf.harness = _analyse_harness(tree, kf, pos, functions)
    if kf.harness is not None:
        kf.diagnostics += kf.harness.problems
    elif kf.kernels:
        first = kf.kernels[0]
        kf.diagnostics.append(
            KernelDiagnostic(
                "no benchmark harness (get_inputs / reference / BENCH): the kernel can be "
                "profiled and optimized once the file has one",
                first.name_range,
                "information",
                "no-harness",
            )
        )


def _transitive(calls: dict[str, set[str]]) -> dict[str, set[str]]:
    reach: dict[str, set[str]] = {}
    for start in calls:
        seen: set[str] = set()
        stack = list(calls[start])
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            stack.extend(calls.get(n, ()))
        reach[start] = seen
    return reach


def _number(node: ast.expr) -> float | None:
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


def _analyse_harness(
    tree: ast.Module,
    kf: KernelFile,
    pos: _Positions,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
) -> HarnessInfo | None:
    get_inputs: ast.stmt | None = None
    reference: ast.stmt | None = None
    bench: ast.Assign | ast.AnnAssign | None = None
    for stmt in tree.body:  # the last binding wins, as at run time
        names = _bound_names(stmt)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if "get_inputs" in names:
            get_inputs = stmt
        if "reference" in names:
            reference = stmt
        if "BENCH" in names and isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            bench = stmt
    if get_inputs is None and reference is None and bench is None:
        return None

    h = HarnessInfo()
    problems = h.problems

    def problem(msg: str, rng: SourceRange, code: str, severity: Severity = "error") -> None:
        problems.append(KernelDiagnostic(msg, rng, severity, code))

    def head(stmt: ast.stmt) -> SourceRange:
        if isinstance(stmt, _FuncDef):
            return pos.def_name(stmt)
        if isinstance(stmt, ast.Assign):
            return pos.node(stmt.targets[0])
        if isinstance(stmt, ast.AnnAssign):
            return pos.node(stmt.target)
        r = pos.node(stmt)
        return SourceRange(r.start_line, r.start_col, r.start_line, r.start_col + 1)

    present = [s for s in (get_inputs, reference, bench) if s is not None]
    anchor = head(min(present, key=lambda s: s.lineno))

    # get_inputs(seed, device)
    if get_inputs is None:
        problem(
            "harness has no get_inputs(seed, device) returning the inputs of one call",
            anchor,
            "harness-missing-get-inputs",
        )
    else:
        h.get_inputs = pos.stmt(get_inputs)
        args: ast.arguments | None = None
        if isinstance(get_inputs, _FuncDef):
            args = get_inputs.args
        elif isinstance(get_inputs, ast.Assign) and isinstance(get_inputs.value, ast.Lambda):
            args = get_inputs.value.args
        if args is not None:
            positional = args.posonlyargs + args.args
            required = len(positional) - len(args.defaults)
            kw_required = [
                a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None
            ]
            accepts_two = len(positional) >= 2 or args.vararg is not None
            if not accepts_two or required > 2 or kw_required:
                found = ", ".join(_param_names(args)) or "no parameters"
                problem(
                    f"get_inputs must take (seed, device); it takes ({found})",
                    head(get_inputs),
                    "get-inputs-params",
                )

    # reference(*inputs)
    if reference is None:
        problem(
            "harness has no reference(*inputs) computing the expected output",
            anchor,
            "harness-missing-reference",
        )
    else:
        h.reference = pos.stmt(reference)

    # BENCH = {...}
    if bench is None:
        problem(
            'harness has no BENCH = {"entry": <launcher>, ...} naming the launcher to time',
            anchor,
            "harness-missing-bench",
        )
        return h
    h.bench = pos.stmt(bench)
    value = bench.value
    if value is None or not isinstance(value, ast.Dict):
        problem(
            'BENCH must be a dict literal: BENCH = {"entry": launcher, "rtol": ..., ...}',
            pos.node(value) if value is not None else head(bench),
            "bench-not-dict",
        )
        return h
    seen: dict[str, ast.expr] = {}
    for key, val in zip(value.keys, value.values, strict=True):
        if key is None:
            problem("BENCH cannot unpack another dict (**...)", pos.node(val), "bench-key-invalid")
            continue
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            problem("BENCH keys must be string literals", pos.node(key), "bench-key-invalid")
            continue
        if key.value not in BENCH_KEYS:
            close = difflib.get_close_matches(key.value, BENCH_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problem(
                f"unknown BENCH key {key.value!r}{hint}; known keys: {', '.join(BENCH_KEYS)}",
                pos.node(key),
                "bench-unknown-key",
                "warning",
            )
            continue
        seen[key.value] = val

    entry = seen.get("entry")
    if entry is None:
        problem(
            'BENCH has no "entry": name the launcher function to time, e.g. "entry": softmax',
            head(bench),
            "bench-entry-missing",
        )
    elif not isinstance(entry, ast.Name):
        what = "a string" if isinstance(entry, ast.Constant) else "an expression"
        problem(
            f'BENCH["entry"] must be the launcher function itself (a name), not {what}',
            pos.node(entry),
            "bench-entry-invalid",
        )
    else:
        h.entry = entry.id
        kernel_names = {k.name for k in kf.kernels}
        if entry.id in kernel_names:
            problem(
                f'BENCH["entry"] must be the launcher that calls {entry.id}[grid](...), '
                "not the kernel itself",
                pos.node(entry),
                "bench-entry-not-launcher",
            )
        elif entry.id not in functions:
            problem(
                f'BENCH["entry"] names {entry.id!r}, which is not a function defined in this file',
                pos.node(entry),
                "bench-entry-invalid",
            )
        elif not any(kf.launches(entry.id, k) for k in kernel_names):
            problem(
                f'BENCH["entry"] {entry.id!r} does not launch any kernel of this file',
                pos.node(entry),
                "bench-entry-not-launcher",
            )

    for key in ("rtol", "atol"):
        if key in seen:
            num = _number(seen[key])
            if num is None or num < 0:
                problem(
                    f'BENCH["{key}"] must be a non-negative number such as 1e-4',
                    pos.node(seen[key]),
                    "bench-tolerance-invalid",
                )
            else:
                setattr(h, key, num)
    for key in ("flops", "bytes"):
        if key in seen:
            val = seen[key]
            if isinstance(val, ast.Lambda) or (
                isinstance(val, ast.Name) and val.id not in kf.kernel_names
            ):
                setattr(h, f"has_{key}", True)
            else:
                problem(
                    f'BENCH["{key}"] must be a function of the inputs, '
                    f"e.g. lambda x: {'2 * x.numel()' if key == 'flops' else 'x.nbytes'}",
                    pos.node(val),
                    "bench-work-invalid",
                )
    return h


def load_kernel_file(path: str | Path) -> KernelFile:
    """Read and analyse a kernel file (encoding from its coding cookie, default UTF-8).

    Raises KernelFileError (``path:line:col: message``) when the file cannot be read or
    decoded; a syntax error does not raise (it is a diagnostic)."""
    p = Path(path)
    shown = str(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise KernelFileError(shown, "no such file") from None
    except IsADirectoryError:
        raise KernelFileError(shown, "is a directory, not a kernel file") from None
    except OSError as exc:
        raise KernelFileError(shown, f"cannot read: {exc.strerror or exc}") from None
    try:
        encoding, _ = tokenize.detect_encoding(iter(data.splitlines(keepends=True)).__next__)
    except SyntaxError as exc:
        raise KernelFileError(shown, f"bad encoding declaration: {exc.msg}") from None
    try:
        source = data.decode(encoding)
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise KernelFileError(
            shown, f"not valid {encoding} text (byte 0x{data[exc.start]:02x})", line, col
        ) from None
    if source.startswith("\ufeff"):
        source = source[1:]
    return parse_kernel_file(source, shown)


_QUICK = re.compile(
    r"^[ \t]*@[ \t]*(?:[A-Za-z_][\w.]*\.)?(?:jit|baremetal|benchmark|profile)\b", re.MULTILINE
)


def quick_has_kernels(source: str) -> bool:
    """Cheap text test (no parsing) for "this file may hold Triton or NKI kernels": it
    mentions triton or nki and has a ``@...jit`` (or ``@nki.baremetal`` / ``benchmark`` /
    ``profile``) decorator line. False positives are fine (parse_kernel_file decides)."""
    if "triton" not in source and "nki" not in source:
        return False
    return _QUICK.search(source) is not None


@functools.lru_cache(maxsize=512)
def normalize_source(source: str) -> str:
    """``ast.unparse(ast.parse(source))``: the source without comments and formatting, so
    that whitespace-only edits keep the same fingerprint. Unparsable source is returned as is.
    Memoized: a search fingerprints the same candidate several times (dedup, cache key, memory)."""
    try:
        return ast.unparse(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source


def source_fingerprint(source: str) -> str:
    """SHA-256 hex digest of :func:`normalize_source` (64 hex characters)."""
    return hashlib.sha256(normalize_source(source).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# Restoring the original harness in a candidate
# --------------------------------------------------------------------------------------------


def _stmt_span(pos: _Positions, stmt: ast.stmt) -> tuple[int, int]:
    """String offsets of a module-level statement, decorators and a trailing comment on its
    last line included (the line ending excluded)."""
    r = pos.stmt(stmt)
    start, end = pos.offset(r.start_line, r.start_col), pos.offset(r.end_line, r.end_col)
    if 0 < r.end_line <= len(pos.lines):
        line = pos.lines[r.end_line - 1]
        rest = line[r.end_col :].rstrip("\r\n")
        if not rest.strip() or rest.lstrip().startswith("#"):
            end += len(rest)
    return start, end


def _leading_comments(lines: list[str], start_line: int) -> int:
    """First line (1-based) of the column-0 comment block above ``start_line`` (blank lines
    between the block and the statement allowed), or ``start_line`` when there is none."""
    line = start_line
    while line > 1 and not lines[line - 2].strip():
        line -= 1
    first = line
    while first > 1 and lines[first - 2].startswith("#"):
        first -= 1
    return first if first < line else start_line


def _harness_parts(original: KernelFile) -> tuple[dict[str, ast.stmt], list[ast.stmt], ast.Module]:
    """The original's harness statements by name (roots and harness-only helpers) and the
    import statements the harness needs, in source order."""
    tree = ast.parse(original.source)
    body = tree.body
    binders: dict[str, list[ast.stmt]] = {}
    for stmt in body:
        for name in _bound_names(stmt):
            binders.setdefault(name, []).append(stmt)

    roots: dict[str, ast.stmt] = {}
    for name in HARNESS_NAMES:
        stmts = [
            s
            for s in binders.get(name, [])
            if not isinstance(s, (ast.Import, ast.ImportFrom))
            and (name != "BENCH" or isinstance(s, (ast.Assign, ast.AnnAssign)))
        ]
        if stmts:
            roots[name] = stmts[-1]
    entry = original.harness.entry if original.harness else None

    def closure(starts: Iterable[str], skip: set[str]) -> set[str]:
        seen: set[str] = set()
        stack = list(starts)
        while stack:
            n = stack.pop()
            if n in seen or n in skip:
                continue
            seen.add(n)
            for s in binders.get(n, []):
                if not isinstance(s, (ast.Import, ast.ImportFrom)):
                    stack.extend(_names_loaded(s))
        return seen

    kernel_side_roots = set(original.kernel_names) | {la.name for la in original.launchers}
    if entry:
        kernel_side_roots.add(entry)
    kernel_side = closure(kernel_side_roots, set(HARNESS_NAMES))

    harness_used: set[str] = set()
    for name, stmt in roots.items():
        harness_used |= _names_loaded(stmt) - {name}
    if entry:
        harness_used.discard(entry)
    harness_side = closure(harness_used, kernel_side | set(HARNESS_NAMES))

    parts: dict[str, ast.stmt] = dict(roots)
    for name in sorted(harness_side):
        stmts = [
            s for s in binders.get(name, []) if not isinstance(s, (ast.Import, ast.ImportFrom))
        ]
        if not stmts:
            continue
        last = stmts[-1]
        if isinstance(last, (*_FuncDef, ast.ClassDef, ast.Assign, ast.AnnAssign)):
            if all(n in harness_side or n in HARNESS_NAMES for n in _bound_names(last)):
                parts[name] = last
    # Imports whose names the carried statements use (the candidate may lack them).
    imports: list[ast.stmt] = []
    used = set().union(*(_names_loaded(s) for s in parts.values()))
    for name in sorted(used):
        stmts = binders.get(name, [])
        last = stmts[-1] if stmts else None
        if isinstance(last, (ast.Import, ast.ImportFrom)) and last not in imports:
            if not (isinstance(last, ast.ImportFrom) and last.module == "__future__"):
                imports.append(last)
    imports.sort(key=lambda s: s.lineno)
    return parts, imports, tree


def restore_harness(candidate_source: str, original: KernelFile) -> str:
    """Give a candidate the ORIGINAL harness, verbatim.

    The candidate's own ``get_inputs`` / ``reference`` / ``BENCH`` (and any harness-only
    helper of the original: a module-level def or assignment used by the harness and by no
    kernel or launcher) are replaced in place by the original's text; missing ones are added
    (helpers before the first harness statement, the rest at the end, in the original order,
    each with its comment block); imports the harness needs and the candidate lacks are added
    after the candidate's imports. Kernels and launchers stay the candidate's, byte for byte.

    Raises ValueError (``candidate:line:col: syntax error: ...``) when the candidate does not
    parse. An original without a harness (or unparsable) leaves the candidate unchanged.
    """
    try:
        cand_tree = ast.parse(candidate_source)
    except (SyntaxError, ValueError, RecursionError) as exc:
        diag = _syntax_diagnostic(exc, _Positions(candidate_source))
        where = f"candidate:{diag.range.start_line}:{diag.range.start_col + 1}"
        raise ValueError(f"{where}: {diag.message}") from None
    if original.harness is None or original.syntax_error is not None:
        return candidate_source
    try:
        parts, imports, _ = _harness_parts(original)
    except (SyntaxError, ValueError, RecursionError):
        return candidate_source
    if not parts:
        return candidate_source

    opos = _Positions(original.source)
    cpos = _Positions(candidate_source)
    orig_text = {name: original.source[slice(*_stmt_span(opos, s))] for name, s in parts.items()}

    def with_comments(name: str) -> str:
        s = parts[name]
        first = _leading_comments(opos.lines, _stmt_start_line(opos, s))
        start = opos.offset(first, 0)
        end = _stmt_span(opos, s)[1]
        return original.source[start:end]

    # Candidate statements binding a harness name: replace the last, delete the others.
    binders: dict[str, list[ast.stmt]] = {}
    for stmt in cand_tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        for name in _bound_names(stmt):
            if name in parts:
                binders.setdefault(name, []).append(stmt)
    edits: dict[int, tuple[int, int, str]] = {}  # id(stmt) -> (start, end, text)
    for name, stmts in binders.items():
        for s in stmts[:-1]:
            start, end = _stmt_span(cpos, s)
            end = _eat_newline(candidate_source, end)
            edits.setdefault(id(s), (start, end, ""))
        last = stmts[-1]
        start, end = _stmt_span(cpos, last)
        if id(last) in edits and edits[id(last)][2]:
            # One statement binding two harness names (a, b = ...): keep the first replacement.
            continue
        edits[id(last)] = (start, end, orig_text[name])

    order = {name: parts[name].lineno for name in parts}
    missing = sorted((n for n in parts if n not in binders), key=order.__getitem__)
    missing_helpers = [n for n in missing if n not in HARNESS_NAMES]
    missing_roots = [n for n in missing if n in HARNESS_NAMES]

    # Imports the harness needs that the candidate does not bind at module level.
    cand_bound = {n for s in cand_tree.body for n in _bound_names(s)}
    import_text = [
        original.source[slice(*_stmt_span(opos, s))]
        for s in imports
        if not set(_bound_names(s)) <= cand_bound
    ]

    result = candidate_source
    inserts: list[tuple[int, int, str]] = [e for e in edits.values()]
    if missing_helpers:
        harness_stmts = [s for ss in binders.values() for s in ss]
        if harness_stmts:
            first = min(harness_stmts, key=lambda s: s.lineno)
            at = cpos.offset(_leading_comments(cpos.lines, _stmt_start_line(cpos, first)), 0)
            text = "\n\n\n".join(with_comments(n) for n in missing_helpers) + "\n\n\n"
            inserts.append((at, at, text))
        else:
            missing_roots = missing_helpers + missing_roots
    if import_text:
        at = _import_insertion_offset(cand_tree, cpos, candidate_source)
        inserts.append((at, at, "\n".join(import_text) + "\n"))
    for start, end, text in sorted(inserts, key=lambda e: (e[0], e[1]), reverse=True):
        result = result[:start] + text + result[end:]
    if missing_roots:
        body = result.rstrip("\r\n")
        tail = "\n\n\n".join(with_comments(n) for n in missing_roots)
        result = (body + "\n\n\n" if body else "") + tail + "\n"
    return result


def _stmt_start_line(pos: _Positions, stmt: ast.stmt) -> int:
    """First line of a statement, decorators included."""
    return pos.stmt(stmt).start_line


def _eat_newline(source: str, end: int) -> int:
    if source.startswith("\r\n", end):
        return end + 2
    if end < len(source) and source[end] in "\r\n":
        return end + 1
    return end


def _import_insertion_offset(tree: ast.Module, pos: _Positions, source: str) -> int:
    """Offset just after the module's leading docstring / imports block."""
    last: ast.stmt | None = None
    for i, stmt in enumerate(tree.body):
        is_doc = (
            i == 0
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        )
        if is_doc or isinstance(stmt, (ast.Import, ast.ImportFrom)):
            last = stmt
        else:
            break
    if last is None:
        return 0
    end = _stmt_span(pos, last)[1]
    return _eat_newline(source, end) if end < len(source) else end


# --------------------------------------------------------------------------------------------
# Harness skeleton
# --------------------------------------------------------------------------------------------


def harness_skeleton(kernel_file: KernelFile, kernel_name: str) -> str:
    """Harness template (``get_inputs`` / ``reference`` / ``BENCH``) for ``kernel_name``, to
    append to a file that has none. It parses, and every guess is marked ``TODO``:
    ``reference`` raises NotImplementedError until written, so an unfinished harness fails
    the evaluation loudly instead of passing. Raises KeyError for an unknown kernel."""
    kernel = kernel_file.kernel(kernel_name)
    launcher = kernel_file.launcher_for(kernel_name)
    source = kernel_file.source
    if launcher is not None:
        params = _launcher_params(source, launcher)
        entry_line = f'    "entry": {launcher.name},'
    else:
        params = []
        entry_line = (
            f'    "entry": None,  # TODO: the launcher function that calls {kernel_name}'
            + ("[grid](...)" if kernel.backend == "triton" else "(...)")
        )
    params = params or ["x"]
    args = ", ".join(params)
    who = launcher.name if launcher else kernel_name
    lines = [
        "",
        "",
        "# --- benchmark harness (AccelOpt) -----------------------------------------------------",
        "# get_inputs(seed, device): fresh random inputs for ONE call of the launcher",
        "# reference(*inputs):      the expected output, computed without the kernel",
        "# BENCH:                   the launcher to time, tolerances, and work for the roofline",
        "",
        "",
    ]
    if kernel.backend == "nki":
        lines += [
            "def get_inputs(seed: int, device: str) -> tuple:",
            f'    """Fresh random inputs for one call of {who}."""',
            "    import numpy as np",
            "",
            "    rng = np.random.default_rng(seed)",
            f"    # TODO: one array per parameter ({args}), with the shapes and dtypes you care about.",
        ]
        lines += [f"    {p} = rng.standard_normal((128, 512)).astype(np.float32)" for p in params]
    else:
        lines += [
            "def get_inputs(seed: int, device: str) -> tuple:",
            f'    """Fresh random inputs for one call of {who}."""',
            "    import torch",
            "",
            "    g = torch.Generator().manual_seed(seed)",
            f"    # TODO: one tensor per parameter ({args}), with the shapes and dtypes you care about.",
        ]
        lines += [f"    {p} = torch.randn(4096, generator=g).to(device)" for p in params]
    ret = f"({params[0]},)" if len(params) == 1 else f"({args})"
    lines += [
        f"    return {ret}",
        "",
        "",
        f"def reference({args}):",
        f'    """The expected output of {who}({args})."""',
        "    # TODO: compute the same result without the kernel (PyTorch or NumPy).",
        f'    raise NotImplementedError("TODO: write reference() for {who}")',
        "",
        "",
        "BENCH = {",
        entry_line,
        '    # "rtol": 1e-4, "atol": 1e-4,  # optional; default by output dtype',
        f'    # "flops": lambda {args}: ...,  # floating-point operations of one call',
        f'    # "bytes": lambda {args}: ...,  # bytes read + written by one call',
        "}",
        "",
    ]
    return "\n".join(lines)


def _launcher_params(source: str, launcher: LauncherInfo) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    for stmt in tree.body:
        if isinstance(stmt, _FuncDef) and stmt.name == launcher.name:
            return [a.arg for a in stmt.args.posonlyargs + stmt.args.args]
    return []


# --------------------------------------------------------------------------------------------
# Diffs and edits
# --------------------------------------------------------------------------------------------


def _line_end_position(lines: list[str], index: int) -> tuple[int, int]:
    """Position of the start of line ``index`` (0-based), or the end of the text when
    ``index == len(lines)``."""
    if index < len(lines):
        return (index + 1, 0)
    if not lines:
        return (1, 0)
    last = lines[-1]
    if last.endswith(("\n", "\r")):
        return (len(lines) + 1, 0)
    return (len(lines), len(last))


def minimal_hunks(old: str, new: str) -> list[tuple[SourceRange, str]]:
    """Line-based replacement hunks (difflib.SequenceMatcher) that turn ``old`` into ``new``.

    Each hunk replaces the text between two positions of ``old`` (ranges in ascending order,
    non-overlapping, usually whole lines) by the given text; applied back to front
    (:func:`apply_hunks`) they reproduce ``new`` exactly. Equal texts give ``[]``.
    """
    if old == new:
        return []
    a, b = split_lines(old), split_lines(new)
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    hunks: list[tuple[SourceRange, str]] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        start = _line_end_position(a, i1)
        end = _line_end_position(a, i2)
        hunks.append((SourceRange(*start, *end), "".join(b[j1:j2])))
    return hunks


def apply_hunks(text: str, hunks: Iterable[tuple[SourceRange, str]]) -> str:
    """Apply replacement hunks (as from :func:`minimal_hunks`) to ``text``, back to front."""
    pos = _Positions(text)
    for rng, repl in sorted(hunks, key=lambda h: h[0], reverse=True):
        start = pos.offset(rng.start_line, rng.start_col)
        end = pos.offset(rng.end_line, rng.end_col)
        text = text[:start] + repl + text[end:]
    return text


def unified_diff(old: str, new: str, path: str) -> str:
    """A ``git diff``-style unified diff (``a/path`` -> ``b/path``, 3 lines of context);
    ``""`` when the texts are equal."""
    a, b = split_lines(old), split_lines(new)

    def fix(lines: list[str]) -> Iterator[str]:
        for i, line in enumerate(lines):
            if i == len(lines) - 1 and not line.endswith(("\n", "\r")):
                yield line + "\n\\ No newline at end of file\n"
            else:
                yield line

    out = difflib.unified_diff(list(fix(a)), list(fix(b)), f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)
