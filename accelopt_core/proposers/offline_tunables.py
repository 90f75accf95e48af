"""What the offline proposer can tune: the launch parameters of a kernel's launchers
(:class:`TunableParam`, :func:`find_tunables`), the values each may take
(:func:`allowed_values`, with the bounds below) and the exact-range rewrite of a change
(:class:`Change`, :func:`apply_changes`); and which timing modes ignore launch parameters
(:data:`CPU_TIMINGS`, :data:`IGNORED_ON_CPU`).

Shared by :mod:`.offline` (the proposer) and :mod:`.offline_explain` (why nothing is
tunable), and read by the search (:data:`IGNORED_ON_CPU`). The kinds of parameter and the
bounds are described in :mod:`.offline`'s docstring.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from accelopt_core.kernelfile import KernelInfo, parse_kernel_file
from accelopt_core.onsite.names import module_statements
from accelopt_core.proposers.launch_limits import threads_problem
from accelopt_core.proposers.offline_values import ValueSource, int_literal, launch_values
from accelopt_core.textdiff import SourceRange, apply_hunks, split_lines

__all__ = [
    "CPU_TIMINGS",
    "IGNORED_ON_CPU",
    "Change",
    "TunableParam",
    "allowed_values",
    "apply_changes",
    "find_tunables",
    "kernel_loops",
    "key_name",
    "launcher_defs",
    "timing_ignores_launch_params",
]

ParamKind = Literal["block", "num_warps", "num_stages", "nki_partition", "nki_free"]
Origin = Literal["launch", "assignment", "module", "bound"]
Bound = Literal["", "cap", "floor"]
#: Where the new value goes in a virtual bound's template.
_SLOT = "\x00"

BLOCK_MIN, BLOCK_MAX, DOT_BLOCK_MAX = 16, 8192, 128
WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4, 5)
#: NKI tiles (powers of two): partition-dimension tiles (TILE_P / TILE_K / TILE_M, and names with
#: PART) up to the 128 SBUF/PSUM partitions; free-dimension tiles up to 2048 elements, or up to
#: the 512 fp32 of one PSUM tile (``nl.tile_size.gemm_moving_fmax``) in kernels with a matmul.
NKI_TILE_MIN, NKI_PMAX, NKI_FREE_MAX, NKI_PSUM_FMAX = 32, 128, 2048, 512
_NKI_PARTITION_SUFFIXES = ("_P", "_K", "_M")
#: Largest step (in doublings) preferred before bigger jumps are tried.
PREFERRED_MAX_STEP = 3
#: Timing modes measured on a CPU (``EvalResult.timing``): the Triton interpreter runs a launch
#: as plain loops and the NKI simulator counts instructions, so neither sees launch parameters.
CPU_TIMINGS = ("interpreter", "simulated")
#: Launch keywords of ``kernel[grid](...)`` / ``triton.Config`` that only change how the GPU
#: runs a program (warps per program, pipeline stages, CTAs per cluster, register cap); the
#: Triton interpreter accepts and ignores them.
IGNORED_ON_CPU = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def timing_ignores_launch_params(timing: str | None) -> bool:
    """True when latencies of timing mode ``timing`` (``EvalResult.timing``) cannot see the
    launch parameters of :data:`IGNORED_ON_CPU` (``interpreter``, ``simulated``)."""
    return timing in CPU_TIMINGS


@dataclass(frozen=True)
class TunableParam:
    """One launch parameter whose value is an integer literal in the source.

    Attributes:
        name: ``BLOCK_SIZE``, ``BLOCK_M``, ``num_warps``, ``num_stages``, ...
        kind: ``block`` (a block-size constexpr), ``num_warps`` or ``num_stages``.
        value: its current value.
        range: the exact range of the integer literal (what a rewrite replaces).
        launcher: the launcher function holding it.
        kernel: the kernel whose launch it feeds.
        origin: ``launch`` (a keyword literal in ``kernel[grid](...)``), ``assignment``
            (``NAME = <int>`` in the launcher, passed on by name), ``module`` (a module
            constant ``NAME = <int>``) or ``bound`` (a bound on a computed value, below).
        uses_dot: the kernel calls ``tl.dot`` (tighter bounds for block sizes).
        primary: the launch is of the kernel being optimized (not of a sibling kernel
            launched by the same launcher).
        bound: for a value computed in the launcher (``triton.next_power_of_2(n)``,
            ``calculate_settings(n)``): ``cap`` (``min(value, CAP)``) or ``floor``
            (``max(value, FLOOR)``); '' for a plain literal.
        template: a bound not yet in the source (``virtual``; ``value`` is 0): the text that
            replaces ``range`` (an expression to wrap, or an empty range where a bound line
            ``NAME = min(NAME, CAP)`` is inserted), with the new value at ``_SLOT``.
        core: the computed expression a bound applies to (``calculate_settings(n_cols)``).
        raise_only: only larger values are plausible (the cap of a block size in a kernel
            without a loop: a single pass needs the block to cover the row).
        within: ``(low, high)``: a bound's new value must lie strictly between them (a cap
            above the value's floor, a floor below its cap); ``0`` means no limit.
    """

    name: str
    kind: ParamKind
    value: int
    range: SourceRange
    launcher: str
    kernel: str
    origin: Origin
    uses_dot: bool = False
    primary: bool = True
    bound: Bound = ""
    template: str = ""
    core: str = ""
    raise_only: bool = False
    within: tuple[int, int] = (0, 0)

    @property
    def key(self) -> tuple[str, str, str]:
        """``(launcher, kernel, name)``: what identifies the parameter across rewrites (the
        name is ``BLOCK_SIZE:cap`` for a bound on a computed value)."""
        return (self.launcher, self.kernel, key_name(self.name, self.bound))

    @property
    def label(self) -> str:
        """``BLOCK_SIZE``, or ``num_warps (final_sum_kernel)`` for a sibling kernel's launch."""
        return self.name if self.primary else f"{self.name} ({self.kernel})"

    @property
    def virtual(self) -> bool:
        """A bound not yet in the source: a change inserts it (``template``) at ``range``."""
        return bool(self.template)

    def replacement(self, new: int) -> str:
        """The text that replaces ``range`` to give the parameter the value ``new``."""
        return self.template.replace(_SLOT, str(new)) if self.template else str(new)


def key_name(name: str, bound: str) -> str:
    """A parameter's name in :attr:`TunableParam.key`: ``BLOCK_SIZE``, or ``BLOCK_SIZE:cap``
    for a bound on a computed value."""
    return f"{name}:{bound}" if bound else name


@dataclass(frozen=True)
class Change:
    """Set ``param`` to ``new``."""

    param: TunableParam
    new: int

    @property
    def title(self) -> str:
        """``BLOCK_SIZE 32 -> 128``; for bounds ``cap BLOCK_SIZE at 1024`` (new) or
        ``BLOCK_SIZE cap 1024 -> 2048``: the plan title of this change."""
        p = self.param
        if p.virtual:
            return f"{p.bound} {p.label} at {self.new}"
        if p.bound:
            return f"{p.label} {p.bound} {p.value} -> {self.new}"
        return f"{p.label} {p.value} -> {self.new}"

    def to_dict(self) -> dict[str, Any]:
        """The change as stored in ``Plan.data["changes"]`` (JSON-safe)."""
        return {
            "launcher": self.param.launcher,
            "kernel": self.param.kernel,
            "name": self.param.name,
            "bound": self.param.bound,
            "label": self.param.label,
            "old": self.param.value,
            "new": self.new,
            "line": self.param.range.start_line,
        }


def _kind(name: str, constexpr: set[str]) -> ParamKind | None:
    if name == "num_warps":
        return "num_warps"
    if name == "num_stages":
        return "num_stages"
    if name in constexpr and ("BLOCK" in name.upper() or "TILE" in name.upper()):
        return "block"
    return None


def _range(lines: list[str], node: ast.AST) -> SourceRange:
    def col(line: int, byte_col: int) -> int:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    line = node.lineno  # type: ignore[attr-defined]
    end_line = node.end_lineno or line  # type: ignore[attr-defined]
    return SourceRange(
        line,
        col(line, node.col_offset),  # type: ignore[attr-defined]
        end_line,
        col(end_line, node.end_col_offset or 0),  # type: ignore[attr-defined]
    )


def find_tunables(source: str, kernel_name: str) -> list[TunableParam]:
    """The tunable launch parameters in the launchers of ``kernel_name``, in source order.

    Covers the launches of ``kernel_name`` (``primary``) and of other Triton kernels launched
    by the same launchers (their time is part of the entry's latency), one parameter per
    (launcher, kernel, name) and bound (``BLOCK:cap``, ``BLOCK:floor`` for computed values).
    Empty when the source does not parse, the kernel is not there, or the launches pass no
    literal or computed value (block sizes from ``@triton.autotune`` are edited through
    :func:`autotune_edits` instead). Never raises."""
    try:
        return _find_tunables(source, kernel_name)
    except (SyntaxError, ValueError, RecursionError):
        return []


def _find_tunables(source: str, kernel_name: str) -> list[TunableParam]:
    kf = parse_kernel_file(source)
    if not kf.ok or kernel_name not in kf.kernel_names:
        return []
    if kf.kernel(kernel_name).backend == "nki":
        return _nki_tunables(source, kf, kernel_name)
    if kf.kernel(kernel_name).backend != "triton":
        return []
    kernels = {k.name: k for k in kf.kernels if k.backend == "triton"}
    launchers = {la.name for la in kf.launchers if kernel_name in la.kernels}
    lines = split_lines(source)
    tree = ast.parse(source)
    found: dict[tuple[str, str, str], TunableParam] = {}
    places: set[tuple[SourceRange, str, str]] = set()
    for fn in launcher_defs(tree, launchers):
        for param in _launcher_tunables(tree, fn, kernels, kernel_name, lines):
            place = (param.range, param.bound, param.template)
            if param.key in found or place in places:
                continue  # one literal feeding two launches is tuned once
            found[param.key] = param
            places.add(place)
    return sorted(found.values(), key=lambda p: (not p.primary, p.range, p.bound))


def launcher_defs(
    tree: ast.Module, names: set[str]
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module-level definitions (also inside module-level ``if`` / ``try``) of ``names``,
    and the methods named ``Cls.method`` among them (a KernelBench ``ModelNew.forward``)."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    found = []
    for s in module_statements(tree.body):
        if isinstance(s, defs) and s.name in names:
            found.append(s)
        elif isinstance(s, ast.ClassDef):
            found += [m for m in s.body if isinstance(m, defs) and f"{s.name}.{m.name}" in names]
    return found


def kernel_loops(tree: ast.Module, kernel_name: str) -> bool:
    """True when the kernel's body has a ``for`` / ``while`` loop (a block size smaller than
    the data is then plausible); False for a single-pass kernel."""
    for s in launcher_defs(tree, {kernel_name}):
        if any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(s)):
            return True
    return False


def _launcher_tunables(
    tree: ast.Module,
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
    kernels: dict[str, KernelInfo],
    kernel_name: str,
    lines: list[str],
) -> Iterator[TunableParam]:
    """The tunables of each Triton launch in launcher ``fn``, launches in source order."""
    for call in _launches(fn, kernels):
        kname = call.func.value.id  # type: ignore[attr-defined]
        kernel = kernels[kname]
        constexpr = set(kernel.constexpr_params)
        uses_dot = any(name.split(".")[-1] == "dot" for name, _ in kernel.api_calls)
        loops = kernel_loops(tree, kname)
        for vs in launch_values(tree, fn, call, kernel):
            kind = _kind(vs.param, constexpr)
            if kind is None:
                continue
            common = {"name": vs.param, "kind": kind, "launcher": fn.name, "kernel": kname,
                      "uses_dot": uses_dot, "primary": kname == kernel_name}  # fmt: skip
            if vs.literal is not None:
                origin = {"literal": "launch", "local": "assignment"}.get(vs.how, "module")
                yield TunableParam(value=int(vs.literal.value), range=_range(lines, vs.literal),
                                   origin=origin, **common)  # type: ignore[arg-type]  # fmt: skip
            elif vs.how == "computed":
                yield from _bound_tunables(vs, kind, loops, lines, common)


def _bound_tunables(
    vs: ValueSource, kind: ParamKind, loops: bool, lines: list[str], common: dict[str, Any]
) -> Iterator[TunableParam]:
    """The bounds of a computed value: its ``cap`` / ``floor`` literals, and the bounds not
    there yet as virtual parameters (no new cap on a block size of a kernel without a loop)."""
    values = {b: int(lit.value) for b, lit in vs.bounds.items()}
    for bound in ("cap", "floor"):
        raise_only = bound == "cap" and kind == "block" and not loops
        literal = vs.bounds.get(bound)
        within = (values.get("floor", 0), 0) if bound == "cap" else (0, values.get("cap", 0))
        extra = {"origin": "bound", "bound": bound, "core": vs.core, "raise_only": raise_only,
                 "within": within}  # fmt: skip
        if literal is not None:
            yield TunableParam(value=int(literal.value), range=_range(lines, literal),
                               **extra, **common)  # fmt: skip
            continue
        site = None if raise_only else _virtual_site(vs, bound, lines)
        if site is not None:
            yield TunableParam(value=0, range=site[0], template=site[1], **extra, **common)


def _virtual_site(vs: ValueSource, bound: str, lines: list[str]) -> tuple[SourceRange, str] | None:
    """Where a new bound of ``vs`` goes: (range replaced, template). Wraps the computed
    expression (``min(<expr>, CAP)``), or inserts ``NAME = min(NAME, CAP)`` on the line after
    the tuple unpacking ``NAME, ... = helper(...)``; None when neither is safe."""
    func = "min" if bound == "cap" else "max"
    if vs.site is not None:
        rng = _range(lines, vs.site)
        text = "".join(lines[rng.start_line - 1 : rng.end_line])
        start = rng.start_col
        end = len("".join(lines[rng.start_line - 1 : rng.end_line - 1])) + rng.end_col
        return rng, f"{func}({text[start:end]}, {_SLOT})"
    stmt = vs.insert_after
    if stmt is None or not vs.local or stmt.end_lineno is None:
        return None
    first = lines[stmt.lineno - 1]
    indent = first[: stmt.col_offset]
    if indent.strip() or stmt.end_lineno >= len(lines):
        return None
    at = SourceRange(stmt.end_lineno + 1, 0, stmt.end_lineno + 1, 0)
    return at, f"{indent}{vs.local} = {func}({vs.local}, {_SLOT})\n"


def _nki_kind(name: str) -> ParamKind | None:
    upper = name.upper()
    if "TILE" not in upper and "BLOCK" not in upper:
        return None
    partition = upper.endswith(_NKI_PARTITION_SUFFIXES) or "PART" in upper
    return "nki_partition" if partition else "nki_free"


def _nki_tunables(source: str, kf: Any, kernel_name: str) -> list[TunableParam]:
    """Tile constants of an NKI kernel: module-level, then in its launchers (bound once)."""
    kernel = kf.kernel(kernel_name)
    uses_matmul = any(name.split(".")[-1].endswith("matmul") for name, _ in kernel.api_calls)
    tree = ast.parse(source)
    scopes: list[tuple[str, ast.AST]] = [("<module>", ast.Module(body=[
        n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ], type_ignores=[]))]  # fmt: skip
    launchers = {la.name for la in kf.launchers if kernel_name in la.kernels}
    scopes += [(n.name, n) for n in tree.body if getattr(n, "name", None) in launchers]
    lines = split_lines(source)
    found = []
    for scope, node in scopes:
        for name, (_, literal) in _single_int_locals(node).items():
            kind = _nki_kind(name)
            if kind is not None and literal.value > 0:
                found.append(TunableParam(name, kind, int(literal.value), _range(lines, literal),
                                          scope, kernel_name, "assignment", uses_matmul))  # fmt: skip
    return sorted(found, key=lambda p: p.range)


def _single_int_locals(fn: ast.AST) -> dict[str, tuple[int, ast.Constant]]:
    """Locals of ``fn`` bound exactly once, by a plain ``NAME = <int>``: name -> (line of the
    assignment, the literal). Only such a local is safe to rewrite."""
    assigned: dict[str, tuple[int, ast.Constant]] = {}
    stores: dict[str, int] = {}
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and int_literal(node.value) is not None
        ):
            assigned[node.targets[0].id] = (node.lineno, node.value)  # type: ignore[assignment]
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    return {name: found for name, found in assigned.items() if stores.get(name) == 1}


def _launches(fn: ast.AST, kernels: dict[str, KernelInfo]) -> list[ast.Call]:
    """The ``kernel[grid](...)`` calls in ``fn`` of a kernel in ``kernels``, in source order."""
    calls = (
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id in kernels
    )
    return sorted(calls, key=lambda n: (n.lineno, n.col_offset))


def allowed_values(param: TunableParam) -> list[int]:
    """Values ``param`` may take (its current value excluded), ascending; for a
    ``raise_only`` bound only values above the current one.

    Blocks: powers of two in 16..8192 (16..128 for ``tl.dot`` kernels); num_warps: 1..16,
    powers of two; num_stages: 1..5; NKI partition tiles 32..128, free tiles 32..2048
    (32..512 with a matmul: ``uses_dot`` is set for NKI kernels calling ``nc_matmul``)."""
    if param.kind in ("nki_partition", "nki_free"):
        top = NKI_PMAX if param.kind == "nki_partition" else NKI_FREE_MAX
        top = min(top, NKI_PSUM_FMAX) if param.uses_dot else top
        values = [2**e for e in range(int(math.log2(NKI_TILE_MIN)), int(math.log2(top)) + 1)]
    elif param.kind == "num_warps":
        values = [w for w in WARPS if threads_problem(w) is None]
    elif param.kind == "num_stages":
        values = list(STAGES)
    else:
        top = DOT_BLOCK_MAX if param.uses_dot else BLOCK_MAX
        values = [2**e for e in range(int(math.log2(BLOCK_MIN)), int(math.log2(top)) + 1)]
    low, high = param.within
    values = [v for v in values if v > low and (not high or v < high)]
    if param.raise_only:
        return [v for v in values if v > param.value]
    return [v for v in values if v != param.value]


def apply_changes(source: str, changes: list[Change]) -> str:
    """``source`` with each change's integer literal replaced by its new value (a new bound
    inserted: :meth:`TunableParam.replacement`); every other character is kept. Raises
    ValueError when two changes touch the same text."""
    ranges = sorted(c.param.range for c in changes)
    for earlier, later in zip(ranges, ranges[1:], strict=False):
        if earlier.end > later.start or (earlier == later and earlier.start != earlier.end):
            raise ValueError("two changes overlap the same literal")
    return apply_hunks(source, [(c.param.range, c.param.replacement(c.new)) for c in changes])
