"""The offline proposer: no LLM, it retunes launch parameters.

:class:`OfflineProposer` implements :class:`accelopt_core.proposers.Proposer` by finding the
tunable launch parameters of a kernel in its launcher (AST, exact source ranges) and changing
their values:

* constexpr block sizes passed as keywords in the launch, ``kernel[grid](..., BLOCK_SIZE=32)``,
  or through a local of the launcher, ``BLOCK_SIZE = 32`` ... ``BLOCK_SIZE=BLOCK_SIZE``;
* ``num_warps=`` and ``num_stages=`` keywords of the launch (literals or launcher locals);
* the same passed by position (a constexpr parameter of the kernel), or from a module constant
  ``BLOCK = 1024`` bound once;
* computed values (issue 13), ``BLOCK = triton.next_power_of_2(n)`` or
  ``BLOCK_SIZE, num_warps = calculate_settings(n)`` (a helper that may live in another module,
  so it cannot be rewritten): bounded in the launcher, ``min(<expr>, CAP)`` /
  ``max(<expr>, FLOOR)`` wrapped around the expression, or a line ``BLOCK_SIZE =
  max(BLOCK_SIZE, FLOOR)`` inserted after the tuple unpacking; once there, the bound's literal
  is tuned like any other (:mod:`.offline_values`). A block size of a kernel without a loop
  gets no new cap (a single-pass kernel needs the block to cover its row);
* ``@triton.autotune`` config lists: add, drop, pin or move a config first
  (:mod:`.offline_autotune`);
* NKI kernels: tile-size constants, ``TILE_N = 128`` at module level or in the launcher (a name
  with TILE or BLOCK bound once to an integer literal), within the hardware limits (below).

Plans are single changes such as ``BLOCK_SIZE 32 -> 128``, ``cap BLOCK at 1024`` or
``num_warps 1 -> 4``; samples apply a plan (the first exactly, the others with one more
change). Rewrites replace only the integer literal's text (or wrap / insert one bound), so
everything else in the module stays byte-identical. When nothing is tunable,
:attr:`OfflineProposer.notes` says what was looked at and why
(:func:`accelopt_core.proposers.offline_explain.explain`).

Under CPU timing (the baseline timed by the Triton interpreter or the NKI simulator, see
:data:`CPU_TIMINGS`) the launch parameters that timing ignores (:data:`IGNORED_ON_CPU`:
``num_warps``, ``num_stages``, ...) are never proposed: a change to them alone can only
measure noise (issue 10, "Noise is not a speedup").

Bounds (Triton block shapes must be powers of two; ``tl.dot`` needs every dimension >= 16,
and matmul tiles above 128 rarely fit shared memory): block sizes 16..8192, but 16..128 for
kernels that call ``tl.dot``; ``num_warps`` 1, 2, 4, 8, 16; ``num_stages`` 1..5. NKI tiles:
powers of two, partition tiles 32..128, free tiles 32..2048 (32..512 in kernels with a matmul,
whose output tile lives in PSUM).

Modules: the parameters, their bounds and the rewrite of a change are
:mod:`.offline_tunables`'s (shared with :mod:`.offline_explain`); where a value comes from,
:mod:`.offline_values`; autotune config lists, :mod:`.offline_autotune`. This module holds the
proposer: which moves, in which order, and the rules it writes.
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from accelopt_core.kernelfile import parse_kernel_file, source_fingerprint
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers.base import Plan, ProposalContext, Rule, Sample, Usage
from accelopt_core.proposers.launch_limits import threads_problem
from accelopt_core.proposers.offline_autotune import (
    ConfigEdit,
    autotune_site,
    config_edits,
    launchable_edits,
)
from accelopt_core.proposers.offline_explain import explain
from accelopt_core.proposers.offline_tunables import (
    BLOCK_MAX,
    CPU_TIMINGS,
    DOT_BLOCK_MAX,
    IGNORED_ON_CPU,
    PREFERRED_MAX_STEP,
    Change,
    TunableParam,
    allowed_values,
    apply_changes,
    find_tunables,
    kernel_loops,
    key_name,
    launcher_defs,
    timing_ignores_launch_params,
)
from accelopt_core.textdiff import SourceRange, apply_hunks

__all__ = [
    "CPU_TIMINGS",
    "IGNORED_ON_CPU",
    "timing_ignores_launch_params",
    "TunableParam",
    "Change",
    "find_tunables",
    "allowed_values",
    "apply_changes",
    "autotune_edits",
    "launcher_defs",
    "kernel_loops",
    "OfflineProposer",
]


def _step(param: TunableParam, new: int) -> float:
    """Size of a move: doublings for blocks and warps, stages counted linearly."""
    if param.kind == "num_stages":
        return float(abs(new - param.value))
    return abs(math.log2(new) - math.log2(max(param.value, 1)))


def _virtual_reference(param: TunableParam) -> int:
    """The value a new bound is best placed near (its moves are ranked by distance to it):
    1024 for block sizes (64 for ``tl.dot`` kernels), 4 warps, 3 stages."""
    if param.kind == "num_warps":
        return 4
    if param.kind == "num_stages":
        return 3
    return 64 if param.uses_dot else 1024


def _ranked_moves(param: TunableParam, rng: random.Random) -> list[Change]:
    """Moves for one parameter, preferred first: the largest steps up to 8x (3 doublings)
    first, then the bigger jumps; ties (up vs down) in an order drawn from ``rng``. A new
    bound (virtual parameter): nearest to :func:`_virtual_reference` first."""
    values = allowed_values(param)
    rng.shuffle(values)
    if param.virtual:
        ref = _virtual_reference(param)
        values.sort(key=lambda v: abs(math.log2(v) - math.log2(ref)))
    else:
        values.sort(key=lambda v: (_step(param, v) > PREFERRED_MAX_STEP, -_step(param, v)))
    return [Change(param, v) for v in values]


def _plan_text(change: Change) -> str:
    """The plan's full text: ``Raise BLOCK_SIZE from 32 to 128 in softmax (the launch of ...``."""
    p = change.param
    if p.bound:
        return _bound_text(change)
    verb = "Raise" if change.new > p.value else "Lower"
    where = {"launch": "the launch keyword", "module": f"the module constant {p.name} = ..."}
    where_text = where.get(p.origin, f"the local {p.name} = ...")
    if p.launcher == "<module>":
        return (
            f"{verb} the tile size {p.name} from {p.value} to {change.new} (module constant "
            f"used by {p.kernel}, line {p.range.start_line})."
        )
    return (
        f"{verb} {p.name} from {p.value} to {change.new} in {p.launcher} (the launch of "
        f"{p.kernel}; {where_text}, line {p.range.start_line})."
    )


def _bound_text(change: Change) -> str:
    """The plan text of a bound on a computed value: ``Cap BLOCK_SIZE (computed by
    calculate_settings(n_cols)) at 1024 in ...``."""
    p = change.param
    func = "min" if p.bound == "cap" else "max"
    what = f"{p.name} (computed by {p.core})"
    where = f"in {p.launcher} (the launch of {p.kernel}, line {p.range.start_line})"
    if p.virtual:
        return f"{p.bound.capitalize()} {what} at {change.new} {where}: {func}(..., {change.new})."
    verb = "Raise" if change.new > p.value else "Lower"
    return f"{verb} the {p.bound} of {what} from {p.value} to {change.new} {where}."


def _round_robin(queues: list[list[Any]]) -> Iterator[Any]:
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
    _tried: dict[tuple[str, str], set[tuple[str, ...]]] = field(
        default_factory=dict, init=False, repr=False
    )
    #: Per (parent fingerprint, kernel): fingerprints of the samples already produced.
    _made: dict[tuple[str, str], set[str]] = field(default_factory=dict, init=False, repr=False)
    #: What the proposer looked at and why it could not tune it, one line each (filled by
    #: :meth:`plan` when a parent exposes nothing tunable; each line once): for the search
    #: report when no improvement is found.
    notes: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def plan(self, ctx: ProposalContext, n: int) -> list[Plan]:
        """Up to ``n`` plans, each one change not yet proposed for this parent, taken
        round-robin over the parameters and the autotune config edits (in an order drawn from
        the seed), preferred moves first. Fewer (or none) when the launcher exposes nothing
        left to change; when it exposes nothing at all, :attr:`notes` gets the lines of
        :func:`accelopt_core.proposers.offline_explain.explain` (what was looked at and why it
        is not tunable). Under CPU timing (the baseline's ``timing`` in :data:`CPU_TIMINGS`) no
        plan changes ``num_warps`` or ``num_stages``."""
        source, kernel = ctx.parent_source, ctx.kernel_name
        params = _proposable(find_tunables(source, kernel), ctx)
        edits = autotune_edits(source, kernel, cpu=_cpu(ctx))
        if not params and not edits:
            header = f"offline proposer: nothing to tune in {kernel}:"
            for line in [header, *explain(source, kernel, timing=_timing(ctx))]:
                if line not in self.notes:
                    self.notes.append(line)
        queues: list[list[Any]] = [_ranked_moves(p, self._rng) for p in params]
        self._rng.shuffle(queues)
        queues.append(list(edits))
        tried = self._tried.setdefault((source_fingerprint(source), kernel), set())
        fresh = [[c for c in moves if _mark(c) not in tried] for moves in queues]
        plans: list[Plan] = []
        for item in _round_robin(fresh):
            if len(plans) >= n:
                break
            tried.add(_mark(item))
            plans.append(_plan(item) if isinstance(item, Change) else _config_plan(item, kernel))
        return plans

    async def implement(self, ctx: ProposalContext, plan: Plan, k: int) -> list[Sample]:
        """Up to ``k`` samples: the first applies ``plan`` exactly; each further one adds one
        change of another parameter (preferred moves first; under CPU timing never
        ``num_warps``/``num_stages``), skipping candidates already
        produced for this parent by an earlier plan, so fewer than ``k`` may come back. A plan
        whose parameter (or autotune edit) is no longer in the parent gives one Sample with
        ``source=None`` and the reason."""
        if k < 1:
            return []
        source = ctx.parent_source
        params = {p.key: p for p in find_tunables(source, ctx.kernel_name)}
        base = _plan_base(plan, params, ctx)
        if isinstance(base, Sample):
            return [base]
        changes, hunks = base
        made = self._made.setdefault((source_fingerprint(source), ctx.kernel_name), set())
        first = _apply(source, changes, hunks)
        made.add(source_fingerprint(first))
        samples = [Sample(first)]
        touched = {(c.param.launcher, c.param.kernel, c.param.name) for c in changes}
        extras = [
            _ranked_moves(p, self._rng)
            for p in _proposable(list(params.values()), ctx)
            if (p.launcher, p.kernel, p.name) not in touched
        ]
        self._rng.shuffle(extras)
        # Extra changes round-robin over the other parameters, skipping any candidate this
        # parent already produced (plan A + change B == plan B + change A).
        for extra in _round_robin(extras):
            if len(samples) >= k:
                break
            try:
                candidate = _apply(source, [*changes, extra], hunks)
            except ValueError:  # two bounds of one value wrapping the same text
                continue
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
                (
                    _bound_label(str(c.get("label") or c.get("name")), str(c.get("bound") or "")),
                    int(c.get("old", 0)),
                    int(c.get("new", 0)),
                )
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
    (the baseline's or the parent's ``timing``) ``num_warps``/``num_stages`` are dropped; and
    without those of a launch that cannot launch on the GPU (:func:`_launchable`)."""
    params = _launchable(params)
    timings = (ctx.baseline_result.timing, ctx.parent_result.timing)
    if not any(timing_ignores_launch_params(t) for t in timings):
        return params
    return [p for p in params if p.kind not in IGNORED_ON_CPU]


def _launchable(params: list[TunableParam]) -> list[TunableParam]:
    """``params`` without those of a launch that cannot launch on the GPU as it stands
    (``num_warps`` over 1,024 threads per block: :mod:`.launch_limits`): only its
    ``num_warps`` (lowered to a launchable value) may change there."""
    stuck = {
        (p.launcher, p.kernel)
        for p in params
        if p.kind == "num_warps" and not p.virtual and threads_problem(p.value)
    }
    return [p for p in params if p.kind == "num_warps" or (p.launcher, p.kernel) not in stuck]


def _mark(item: Change | ConfigEdit) -> tuple[str, ...]:
    """What identifies a plan among those tried for one parent: parameter key and new value,
    or the autotune edit's op, config index and title."""
    if isinstance(item, ConfigEdit):
        return ("@autotune", item.op, str(item.index), item.title)
    return (*item.param.key, str(item.new))


def _plan(change: Change) -> Plan:
    return Plan(title=change.title, text=_plan_text(change), data={"changes": [change.to_dict()]})


def _config_plan(edit: ConfigEdit, kernel: str) -> Plan:
    data = {"autotune": {"kernel": kernel, "op": edit.op, "index": edit.index, "title": edit.title}}
    return Plan(title=edit.title, text=edit.text, data=data)


def _timing(ctx: ProposalContext) -> str | None:
    """The CPU timing mode of the parent or the baseline (None when both are GPU-timed)."""
    timings = (ctx.parent_result.timing, ctx.baseline_result.timing)
    return next((t for t in timings if timing_ignores_launch_params(t)), None)


def _cpu(ctx: ProposalContext) -> bool:
    return _timing(ctx) is not None


def autotune_edits(source: str, kernel_name: str, *, cpu: bool) -> list[ConfigEdit]:
    """The edits of ``kernel_name``'s ``@triton.autotune`` config list
    (:func:`accelopt_core.proposers.offline_autotune.config_edits`; block sizes up to 8192, 128
    in ``tl.dot`` kernels). Empty when not autotuned or the source does not parse; never
    raises."""
    try:
        kf = parse_kernel_file(source)
        if not kf.ok or kernel_name not in kf.kernel_names:
            return []
        site = autotune_site(ast.parse(source), kernel_name)
        if site is None:
            return []
        uses_dot = any(n.split(".")[-1] == "dot" for n, _ in kf.kernel(kernel_name).api_calls)
        top = DOT_BLOCK_MAX if uses_dot else BLOCK_MAX
        return launchable_edits(config_edits(source, site, cpu=cpu, top=top), site.configs)
    except (SyntaxError, ValueError, RecursionError):
        return []


def _apply(source: str, changes: list[Change], hunks: list[tuple[SourceRange, str]]) -> str:
    """``source`` with ``changes`` (:func:`apply_changes`) and the autotune ``hunks``."""
    if not hunks:
        return apply_changes(source, changes)
    apply_changes(source, changes)  # raises on overlapping changes
    extra = [(c.param.range, c.param.replacement(c.new)) for c in changes]
    return apply_hunks(source, [*hunks, *extra])


def _plan_base(
    plan: Plan, params: dict[tuple[str, str, str], TunableParam], ctx: ProposalContext
) -> tuple[list[Change], list[tuple[SourceRange, str]]] | Sample:
    """The parameter changes and autotune hunks ``plan`` stands for on the parent, or a
    failed Sample saying why."""
    spec = plan.data.get("autotune")
    if spec is None:
        changes = _plan_changes(plan, params, ctx.kernel_name)
        return changes if isinstance(changes, Sample) else (changes, [])
    edits = autotune_edits(ctx.parent_source, ctx.kernel_name, cpu=_cpu(ctx))
    for edit in edits:
        if (edit.op, edit.index, edit.title) == (
            spec.get("op"),
            spec.get("index"),
            spec.get("title"),
        ):
            return [], list(edit.hunks)
    return Sample(None, error=f"autotune edit {spec.get('title')!r} does not apply to the parent")


def _plan_changes(
    plan: Plan, params: dict[tuple[str, str, str], TunableParam], kernel_name: str
) -> list[Change] | Sample:
    """The changes ``plan`` stores, bound to the parent's ``params``; a failed Sample saying why
    when a parameter is no longer in the parent or the plan holds no change."""
    changes: list[Change] = []
    for spec in plan.data.get("changes") or []:
        name = key_name(str(spec.get("name")), str(spec.get("bound") or ""))
        p = params.get((spec.get("launcher"), spec.get("kernel"), name))
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
    """``raise BLOCK_SIZE from 32 to 128 and lower num_warps from 8 to 4`` ('' for none);
    a bound (label ``BLOCK_SIZE cap``): ``cap BLOCK_SIZE at 1024`` when new (old 0), else
    ``raise the cap of BLOCK_SIZE from 1024 to 2048``."""
    out = []
    for name, old, new in changes:
        base, _, bound = name.partition(" @")
        verb = "raise" if new > old else "lower"
        if bound and old == 0:
            out.append(f"{bound} {base} at {new}")
        elif bound:
            out.append(f"{verb} the {bound} of {base} from {old} to {new}")
        else:
            out.append(f"{verb} {name} from {old} to {new}")
    return " and ".join(out)


def _bound_label(label: str, bound: str) -> str:
    """The label ``_what_changed`` reads: ``BLOCK_SIZE @cap`` for a bound."""
    return f"{label} @{bound}" if bound else label


def _diff_params(slow: str, fast: str, kernel_name: str) -> list[tuple[str, int, int]]:
    """(label, slow value, fast value) of each tunable whose value differs between the two."""
    before = {p.key: p for p in find_tunables(slow, kernel_name)}
    after = {p.key: p for p in find_tunables(fast, kernel_name)}
    out = []
    for key, p in before.items():
        q = after.get(key)
        if q is not None and q.value != p.value:
            out.append((_bound_label(p.label, p.bound), p.value, q.value))
    return out
