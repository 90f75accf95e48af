"""The offline proposer: no LLM, it retunes launch parameters.

:class:`OfflineProposer` implements :class:`accelopt_core.proposers.Proposer` by finding the
tunable launch parameters of a kernel in its launcher (AST, exact source ranges) and changing
their values:

* constexpr block sizes passed as keywords in the launch, ``kernel[grid](..., BLOCK_SIZE=32)``,
  or through a local of the launcher, ``BLOCK_SIZE = 32`` ... ``BLOCK_SIZE=BLOCK_SIZE``;
* ``num_warps=`` and ``num_stages=`` keywords of the launch (literals or launcher locals);
* NKI kernels: tile-size constants, ``TILE_N = 128`` at module level or in the launcher (a name
  with TILE or BLOCK bound once to an integer literal), within the hardware limits (below).

Plans are single changes such as ``BLOCK_SIZE 32 -> 128`` or ``num_warps 1 -> 4``; samples
apply a plan (the first exactly, the others with one more change). Rewrites replace only the
integer literal's text, so everything else in the module stays byte-identical.

Under CPU timing (the baseline timed by the Triton interpreter or the NKI simulator, see
:data:`CPU_TIMINGS`) the launch parameters that timing ignores (:data:`IGNORED_ON_CPU`:
``num_warps``, ``num_stages``, ...) are never proposed: a change to them alone can only
measure noise (issue 10, "Noise is not a speedup").

Bounds (Triton block shapes must be powers of two; ``tl.dot`` needs every dimension >= 16,
and matmul tiles above 128 rarely fit shared memory): block sizes 16..8192, but 16..128 for
kernels that call ``tl.dot``; ``num_warps`` 1, 2, 4, 8, 16; ``num_stages`` 1..5. NKI tiles:
powers of two, partition tiles 32..128, free tiles 32..2048 (32..512 in kernels with a matmul,
whose output tile lives in PSUM).
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from accelopt_core.kernelfile import KernelInfo, parse_kernel_file, source_fingerprint
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers.base import Plan, ProposalContext, Rule, Sample, Usage
from accelopt_core.textdiff import SourceRange, apply_hunks, split_lines

__all__ = [
    "CPU_TIMINGS",
    "IGNORED_ON_CPU",
    "timing_ignores_launch_params",
    "TunableParam",
    "Change",
    "find_tunables",
    "allowed_values",
    "apply_changes",
    "OfflineProposer",
]

ParamKind = Literal["block", "num_warps", "num_stages", "nki_partition", "nki_free"]
Origin = Literal["launch", "assignment"]

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
        origin: ``launch`` (a keyword literal in ``kernel[grid](...)``) or ``assignment``
            (``NAME = <int>`` in the launcher, passed on by name).
        uses_dot: the kernel calls ``tl.dot`` (tighter bounds for block sizes).
        primary: the launch is of the kernel being optimized (not of a sibling kernel
            launched by the same launcher).
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

    @property
    def key(self) -> tuple[str, str, str]:
        """``(launcher, kernel, name)``: what identifies the parameter across rewrites."""
        return (self.launcher, self.kernel, self.name)

    @property
    def label(self) -> str:
        """``BLOCK_SIZE``, or ``num_warps (final_sum_kernel)`` for a sibling kernel's launch."""
        return self.name if self.primary else f"{self.name} ({self.kernel})"


@dataclass(frozen=True)
class Change:
    """Set ``param`` to ``new``."""

    param: TunableParam
    new: int

    @property
    def title(self) -> str:
        """``BLOCK_SIZE 32 -> 128``: the plan title of this change."""
        return f"{self.param.label} {self.param.value} -> {self.new}"

    def to_dict(self) -> dict[str, Any]:
        """The change as stored in ``Plan.data["changes"]`` (JSON-safe)."""
        return {
            "launcher": self.param.launcher,
            "kernel": self.param.kernel,
            "name": self.param.name,
            "label": self.param.label,
            "old": self.param.value,
            "new": self.new,
            "line": self.param.range.start_line,
        }


def _int_literal(node: ast.expr | None) -> int | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    ):
        return node.value
    return None


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
    (launcher, kernel, name). Empty when the source does not parse, the kernel is not there,
    or the launches pass no integer literal (e.g. block sizes from ``@triton.autotune``).
    Never raises."""
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
    found: dict[tuple[str, str, str], TunableParam] = {}
    for fn in ast.parse(source).body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name not in launchers:
            continue
        for param in _launcher_tunables(fn, kernels, kernel_name, lines):
            if param.key in found or any(p.range == param.range for p in found.values()):
                continue  # one literal feeding two launches is tuned once
            found[param.key] = param
    return sorted(found.values(), key=lambda p: (not p.primary, p.range))


def _launcher_tunables(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
    kernels: dict[str, KernelInfo],
    kernel_name: str,
    lines: list[str],
) -> Iterator[TunableParam]:
    """The tunables of each Triton launch in launcher ``fn``, launches in source order."""
    local_ints = _single_int_locals(fn)
    for call in _launches(fn, kernels):
        kname = call.func.value.id  # type: ignore[attr-defined]
        kernel = kernels[kname]
        constexpr = set(kernel.constexpr_params)
        uses_dot = any(name.split(".")[-1] == "dot" for name, _ in kernel.api_calls)
        for kw in call.keywords:
            kind = _kind(kw.arg, constexpr) if kw.arg else None
            found = _keyword_literal(kw.value, call.lineno, local_ints) if kind else None
            if kind is None or found is None:
                continue
            literal, origin = found
            yield TunableParam(
                name=str(kw.arg),
                kind=kind,
                value=int(literal.value),
                range=_range(lines, literal),
                launcher=fn.name,
                kernel=kname,
                origin=origin,
                uses_dot=uses_dot,
                primary=kname == kernel_name,
            )


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
            and _int_literal(node.value) is not None
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


def _keyword_literal(
    value: ast.expr, call_line: int, local_ints: dict[str, tuple[int, ast.Constant]]
) -> tuple[ast.Constant, Origin] | None:
    """The integer literal a launch keyword's value comes from: the value itself (``launch``),
    or the assignment of a local passed by name before the call (``assignment``)."""
    if _int_literal(value) is not None:
        return value, "launch"  # type: ignore[return-value]
    if isinstance(value, ast.Name) and value.id in local_ints:
        line, literal = local_ints[value.id]
        if line <= call_line:
            return literal, "assignment"
    return None


def allowed_values(param: TunableParam) -> list[int]:
    """Values ``param`` may take (its current value excluded), ascending.

    Blocks: powers of two in 16..8192 (16..128 for ``tl.dot`` kernels); num_warps: 1..16,
    powers of two; num_stages: 1..5; NKI partition tiles 32..128, free tiles 32..2048
    (32..512 with a matmul: ``uses_dot`` is set for NKI kernels calling ``nc_matmul``)."""
    if param.kind in ("nki_partition", "nki_free"):
        top = NKI_PMAX if param.kind == "nki_partition" else NKI_FREE_MAX
        top = min(top, NKI_PSUM_FMAX) if param.uses_dot else top
        values = [2**e for e in range(int(math.log2(NKI_TILE_MIN)), int(math.log2(top)) + 1)]
    elif param.kind == "num_warps":
        values = list(WARPS)
    elif param.kind == "num_stages":
        values = list(STAGES)
    else:
        top = DOT_BLOCK_MAX if param.uses_dot else BLOCK_MAX
        values = [2**e for e in range(int(math.log2(BLOCK_MIN)), int(math.log2(top)) + 1)]
    return [v for v in values if v != param.value]


def _step(param: TunableParam, new: int) -> float:
    """Size of a move: doublings for blocks and warps, stages counted linearly."""
    if param.kind == "num_stages":
        return float(abs(new - param.value))
    return abs(math.log2(new) - math.log2(max(param.value, 1)))


def _ranked_moves(param: TunableParam, rng: random.Random) -> list[Change]:
    """Moves for one parameter, preferred first: the largest steps up to 8x (3 doublings)
    first, then the bigger jumps; ties (up vs down) in an order drawn from ``rng``."""
    values = allowed_values(param)
    rng.shuffle(values)
    values.sort(key=lambda v: (_step(param, v) > PREFERRED_MAX_STEP, -_step(param, v)))
    return [Change(param, v) for v in values]


def apply_changes(source: str, changes: list[Change]) -> str:
    """``source`` with each change's integer literal replaced by its new value; every other
    character is kept. Raises ValueError when two changes touch the same literal."""
    ranges = sorted(c.param.range for c in changes)
    for earlier, later in zip(ranges, ranges[1:], strict=False):
        if earlier.end > later.start:
            raise ValueError("two changes overlap the same literal")
    return apply_hunks(source, [(c.param.range, str(c.new)) for c in changes])


def _plan_text(change: Change) -> str:
    """The plan's full text: ``Raise BLOCK_SIZE from 32 to 128 in softmax (the launch of ...``."""
    p = change.param
    verb = "Raise" if change.new > p.value else "Lower"
    where = "the launch keyword" if p.origin == "launch" else f"the local {p.name} = ..."
    if p.launcher == "<module>":
        return (
            f"{verb} the tile size {p.name} from {p.value} to {change.new} (module constant "
            f"used by {p.kernel}, line {p.range.start_line})."
        )
    return (
        f"{verb} {p.name} from {p.value} to {change.new} in {p.launcher} (the launch of "
        f"{p.kernel}; {where}, line {p.range.start_line})."
    )


def _round_robin(queues: list[list[Change]]) -> Iterator[Change]:
    """The changes of ``queues`` taken one queue at a time in turn (each queue's order kept),
    until all are empty. The queues are consumed."""
    while any(queues):
        for queue in queues:
            if queue:
                yield queue.pop(0)


@dataclass
class OfflineProposer:
    """Proposer without an LLM: plans change one launch parameter, samples apply them.

    Deterministic given ``seed``: the same parents in the same order get the same plans.
    Plans already proposed for a parent (by source fingerprint) are not proposed again.
    """

    seed: int = 0
    name: str = "offline"
    _rng: random.Random = field(init=False, repr=False)
    #: Per (parent fingerprint, kernel): the (launcher, kernel, name, new value) already planned.
    _tried: dict[tuple[str, str], set[tuple[str, str, str, int]]] = field(
        default_factory=dict, init=False, repr=False
    )
    #: Per (parent fingerprint, kernel): fingerprints of the samples already produced.
    _made: dict[tuple[str, str], set[str]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def plan(self, ctx: ProposalContext, n: int) -> list[Plan]:
        """Up to ``n`` plans, each one change not yet proposed for this parent, taken
        round-robin over the parameters (in an order drawn from the seed), preferred moves
        first. Fewer (or none) when the launcher exposes nothing left to change. Under CPU
        timing (the baseline's ``timing`` in :data:`CPU_TIMINGS`) no plan changes
        ``num_warps`` or ``num_stages``."""
        params = _proposable(find_tunables(ctx.parent_source, ctx.kernel_name), ctx)
        per_param = [_ranked_moves(p, self._rng) for p in params]
        self._rng.shuffle(per_param)
        tried = self._tried.setdefault(
            (source_fingerprint(ctx.parent_source), ctx.kernel_name), set()
        )
        fresh = [[c for c in moves if _mark(c) not in tried] for moves in per_param]
        plans: list[Plan] = []
        for change in _round_robin(fresh):
            if len(plans) >= n:
                break
            tried.add(_mark(change))
            plans.append(_plan(change))
        return plans

    async def implement(self, ctx: ProposalContext, plan: Plan, k: int) -> list[Sample]:
        """Up to ``k`` samples: the first applies ``plan`` exactly; each further one adds one
        change of another parameter (preferred moves first; under CPU timing never
        ``num_warps``/``num_stages``), skipping candidates already
        produced for this parent by an earlier plan, so fewer than ``k`` may come back. A plan
        whose parameter is no longer in the parent gives one Sample with ``source=None`` and
        the reason."""
        if k < 1:
            return []
        source = ctx.parent_source
        params = {p.key: p for p in find_tunables(source, ctx.kernel_name)}
        base = _plan_changes(plan, params, ctx.kernel_name)
        if isinstance(base, Sample):
            return [base]
        made = self._made.setdefault((source_fingerprint(source), ctx.kernel_name), set())
        first = apply_changes(source, base)
        made.add(source_fingerprint(first))
        samples = [Sample(first)]
        touched = {c.param.key for c in base}
        extras = [
            _ranked_moves(p, self._rng)
            for p in _proposable(list(params.values()), ctx)
            if p.key not in touched
        ]
        self._rng.shuffle(extras)
        # Extra changes round-robin over the other parameters, skipping any candidate this
        # parent already produced (plan A + change B == plan B + change A).
        for extra in _round_robin(extras):
            if len(samples) >= k:
                break
            candidate = apply_changes(source, [*base, extra])
            if source_fingerprint(candidate) not in made:
                made.add(source_fingerprint(candidate))
                samples.append(Sample(candidate))
        return samples

    async def fix(
        self, ctx: ProposalContext, plan: Plan, source: str, result: EvalResult
    ) -> Sample | None:
        """The offline proposer does not repair candidates: always None."""
        return None

    async def summarize(
        self, ctx: ProposalContext, plan: Plan, slow_source: str, fast_source: str, speedup: float
    ) -> Rule:
        """A deterministic rule from the parameter changes between ``slow_source`` and
        ``fast_source`` (falling back to the plan) and the speedup (slow / fast latency):
        ``Raise BLOCK_SIZE from 32 to 128 in softmax_kernel: 3.1x faster``, or a negative rule
        when ``speedup <= 1``."""
        changes = _diff_params(slow_source, fast_source, ctx.kernel_name)
        if not changes:
            changes = [
                (str(c.get("label") or c.get("name")), int(c.get("old", 0)), int(c.get("new", 0)))
                for c in plan.data.get("changes", [])
            ]
        what = _what_changed(changes) or plan.title or "this change"
        kernel = ctx.kernel_name
        if speedup > 1:
            rule = f"{what[0].upper() + what[1:]} in {kernel}: {speedup:.2g}x faster"
            title = what[0].upper() + what[1:]
        else:
            slower = f"{1 / speedup:.2g}x slower" if speedup > 0 else "no gain"
            rule = f"Do not {what[0].lower() + what[1:]} in {kernel}: {slower} ({speedup:.2g}x)"
            title = f"Avoid: {what[0].lower() + what[1:]}"
        return Rule(title=title[:80], rule=rule, usage=Usage())

    def usage(self) -> dict[str, Usage]:
        """No LLM, no tokens: always ``{}``."""
        return {}


def _proposable(params: list[TunableParam], ctx: ProposalContext) -> list[TunableParam]:
    """``params`` without the launch parameters the search's timing ignores: under CPU timing
    (the baseline's or the parent's ``timing``) ``num_warps``/``num_stages`` are dropped."""
    timings = (ctx.baseline_result.timing, ctx.parent_result.timing)
    if not any(timing_ignores_launch_params(t) for t in timings):
        return params
    return [p for p in params if p.kind not in IGNORED_ON_CPU]


def _mark(change: Change) -> tuple[str, str, str, int]:
    """What identifies a plan among those tried for one parent: parameter key and new value."""
    return (*change.param.key, change.new)


def _plan(change: Change) -> Plan:
    return Plan(title=change.title, text=_plan_text(change), data={"changes": [change.to_dict()]})


def _plan_changes(
    plan: Plan, params: dict[tuple[str, str, str], TunableParam], kernel_name: str
) -> list[Change] | Sample:
    """The changes ``plan`` stores, bound to the parent's ``params``; a failed Sample saying why
    when a parameter is no longer in the parent or the plan holds no change."""
    changes: list[Change] = []
    for spec in plan.data.get("changes") or []:
        p = params.get((spec.get("launcher"), spec.get("kernel"), spec.get("name")))
        if p is None:
            return Sample(
                None,
                error=(
                    f"launch parameter {spec.get('name')} not found in launcher "
                    f"{spec.get('launcher')} of {kernel_name}"
                ),
            )
        changes.append(Change(p, int(spec["new"])))
    return changes or Sample(None, error="plan holds no change")


def _what_changed(changes: list[tuple[str, int, int]]) -> str:
    """``raise BLOCK_SIZE from 32 to 128 and lower num_warps from 8 to 4`` ('' for none)."""
    return " and ".join(
        f"{'raise' if new > old else 'lower'} {name} from {old} to {new}"
        for name, old, new in changes
    )


def _diff_params(slow: str, fast: str, kernel_name: str) -> list[tuple[str, int, int]]:
    """(label, slow value, fast value) of each tunable whose value differs between the two."""
    before = {p.key: p for p in find_tunables(slow, kernel_name)}
    after = {p.key: p for p in find_tunables(fast, kernel_name)}
    out = []
    for key, p in before.items():
        q = after.get(key)
        if q is not None and q.value != p.value:
            out.append((p.label, p.value, q.value))
    return out
