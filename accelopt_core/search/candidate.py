"""Candidates of the beam search and the rules that compare them.

A candidate is one kernel version the search met (the baseline or a rewrite), identified by its
normalized source. :func:`is_faster` is the noise rule every comparison of the search uses
(:func:`beats` on two results); :func:`rank_verified` is the report's ranking (only steps
confirmed by the interleaved re-timing of :mod:`.retime`); :func:`launch_only_change` finds
the rewrites that CPU timing cannot judge (issue 10, "Noise is not a speedup").
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from accelopt_core.kernelfile import normalize_source
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan
from accelopt_core.proposers.offline_tunables import IGNORED_ON_CPU
from accelopt_core.textdiff import unified_diff

#: Statuses a fixer may repair (the others are infrastructure or policy failures).
FIXABLE = ("compile_error", "incorrect", "runtime_error")


def candidate_id(source: str, tree: ast.Module | None = None) -> str:
    """Identity of a candidate: 12 hex digits of sha256 over its normalized source (comments and
    formatting do not count), so identical rewrites merge. ``tree``: ``source`` already parsed
    (the proposer's), so it is not parsed again."""
    return hashlib.sha256(normalize_source(source, tree).encode()).hexdigest()[:12]


@dataclass
class Candidate:
    """One kernel version met by the search.

    Attributes:
        id: :func:`candidate_id` of ``source``.
        source: the full module (kernels, launcher and the original harness).
        parent_id: the candidate it was derived from (None for the baseline).
        plan_title / plan_text: the plan that produced it.
        result: its evaluation; after re-timing, ``latency_ms`` is the slower of its first
            median and the median of its re-timing rounds.
        iteration: the iteration that produced it (0 for the baseline).
        speedup: baseline latency / this latency (None until both are timed).
        rank: 1-based rank among verified improvements in the final report.
        retimed: True once its re-timing ended (whatever its verdict).
        tokens: LLM tokens spent on producing it (its share of the planner call plus the executor).
        fixed: True when the fixer produced it from a failed sample.
        confirmed: True when the interleaved A/B re-timing against its parent confirmed the
            step (:class:`~accelopt_core.search.retime.Retimer`); only confirmed candidates are
            ranked, become a new best or a positive experience.
        ignored_by_timing: it differs from its parent only in launch parameters its timing
            mode ignores (:func:`launch_only_change` under ``interpreter``/``simulated``
            timing): it counts as equal to its parent (never an improvement nor a regression).
        searched: True once the counterexample search (issue 52,
            :meth:`~accelopt_core.search.trials.Trials.falsify`) ran on it.
        ab_ratios: child/parent latency ratio of each re-timing round (< 1: the child won).
        call: the transcript call (executor or fixer) whose reply it is
            (:attr:`~accelopt_core.proposers.CallRecord.n`), None without one.
        tree: ``source`` parsed, when the proposer handed it over (never mutated; the
            evaluator's gate reads it instead of parsing again); None otherwise. Not part of
            the JSON form.
    """

    id: str
    source: str
    parent_id: str | None
    plan_title: str
    plan_text: str
    result: EvalResult
    iteration: int
    speedup: float | None = None
    rank: int | None = None
    retimed: bool = False
    tokens: int = 0
    fixed: bool = False
    confirmed: bool = False
    ignored_by_timing: bool = False
    searched: bool = False
    ab_ratios: list[float] = field(default_factory=list)
    call: int | None = None
    tree: ast.Module | None = field(default=None, repr=False, compare=False)

    @classmethod
    def baseline(cls, source: str, result: EvalResult, *, retimed: bool = True) -> Candidate:
        """The user's file as candidate 0: no parent, plan ``baseline``, speedup 1 when its
        evaluation is ok. It needs no re-timing (``retimed``), except as a stand-in for a
        baseline that was never timed."""
        return cls(
            id=candidate_id(source),
            source=source,
            parent_id=None,
            plan_title="baseline",
            plan_text="",
            result=result,
            iteration=0,
            speedup=1.0 if result.ok else None,
            retimed=retimed,
        )

    @classmethod
    def child(
        cls,
        parent: Candidate,
        plan: Plan,
        source: str,
        iteration: int,
        *,
        tokens: int = 0,
        fixed: bool = False,
        tree: ast.Module | None = None,
        call: int | None = None,
    ) -> Candidate:
        """A rewrite of ``parent`` by ``plan``, not evaluated yet: its result reads ``timeout``
        (what a search stopped during its evaluation leaves) until the evaluation replaces it.
        ``tree``: ``source`` parsed by the proposer, when it was; ``call``: the transcript call
        of its reply."""
        return cls(
            id=candidate_id(source, tree),
            source=source,
            parent_id=parent.id,
            plan_title=plan.title,
            plan_text=plan.text,
            result=EvalResult("timeout"),
            iteration=iteration,
            tokens=tokens,
            fixed=fixed,
            tree=tree,
            call=call,
        )

    @property
    def latency_ms(self) -> float | None:
        """The median latency in ms when the candidate is correct and timed, else None."""
        return self.result.latency_ms if self.result.ok else None

    @property
    def step_ratio(self) -> float | None:
        """The median of :attr:`ab_ratios` (child / parent latency, timed back to back; < 1:
        faster than its parent), None without re-timing rounds."""
        return statistics.median(self.ab_ratios) if self.ab_ratios else None

    def to_dict(
        self, original_source: str | None = None, path: str = "kernel.py"
    ) -> dict[str, Any]:
        """JSON form; with ``original_source`` it also carries the unified ``diff`` against it."""
        data = {
            "id": self.id,
            "rank": self.rank,
            "speedup": self.speedup,
            "latency_ms": self.latency_ms,
            "correct": self.result.ok,
            "status": self.result.status,
            "plan": self.plan_title,
            "plan_text": self.plan_text,
            "parent_id": self.parent_id,
            "iteration": self.iteration,
            "retimed": self.retimed,
            "confirmed": self.confirmed,
            "ignored_by_timing": self.ignored_by_timing,
            "searched": self.searched,
            "ab_ratios": list(self.ab_ratios),
            "tokens": self.tokens,
            "fixed": self.fixed,
            "call": self.call,
            "pct_of_peak": self.result.pct_of_peak,
            "result": self.result.to_dict(),
            "source": self.source,
        }
        if original_source is not None:
            data["diff"] = unified_diff(original_source, self.source, path)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        """The inverse of :meth:`to_dict` (the ``diff`` is not read back)."""
        return cls(
            id=data["id"],
            source=data["source"],
            parent_id=data.get("parent_id"),
            plan_title=data.get("plan", ""),
            plan_text=data.get("plan_text", ""),
            result=EvalResult.from_dict(data["result"]),
            iteration=int(data.get("iteration", 0)),
            speedup=data.get("speedup"),
            rank=data.get("rank"),
            retimed=bool(data.get("retimed", False)),
            tokens=int(data.get("tokens", 0)),
            fixed=bool(data.get("fixed", False)),
            # Records written before issue 10 ranked only re-timed, confirmed steps.
            confirmed=bool(data.get("confirmed", data.get("rank") is not None)),
            ignored_by_timing=bool(data.get("ignored_by_timing", False)),
            searched=bool(data.get("searched", False)),
            ab_ratios=[float(r) for r in data.get("ab_ratios") or []],
            call=data.get("call"),
        )


def beats(fast: EvalResult, slow: EvalResult, margin: float) -> bool:
    """The noise rule on two results: ``fast`` beats ``slow`` only if both are ok and timed, its
    median is below ``(1 - margin)`` x the other's, and (when both carry p20/p80) its p80 is
    below the other's p20, so the two timing spreads do not overlap."""
    a = fast.latency_ms if fast.ok else None
    b = slow.latency_ms if slow.ok else None
    if a is None or b is None or a >= b * (1 - margin):
        return False
    p80, p20 = fast.p80_ms, slow.p20_ms
    return p80 is None or p20 is None or p80 < p20


def is_faster(fast: Candidate, slow: Candidate, margin: float) -> bool:
    """The noise rule (:func:`beats`) on two candidates' results."""
    return beats(fast.result, slow.result, margin)


#: What a re-timing round measures (:meth:`~accelopt_core.evaluation.evaluator.Evaluator.
#: time_again`): the timing fields of its result, and the per-shape timings of its metrics.
TIMING_FIELDS = (
    "latency_ms",
    "p20_ms",
    "p80_ms",
    "timing",
    "gbps",
    "tflops",
    "pct_of_peak",
    "bound",
)


def with_timing_of(first: EvalResult, timed: EvalResult) -> EvalResult:
    """``first`` (a candidate's whole evaluation: its correctness on every seed and derived
    input, errors, message) with the timing of ``timed`` (a re-timing round of the same source,
    which checked one seed per shape): its latency, p20/p80 (ms), GB/s, TFLOP/s, % of peak and
    ``metrics["shapes"]``."""
    metrics = dict(first.metrics)
    if "shapes" in timed.metrics:
        metrics["shapes"] = timed.metrics["shapes"]
    return dataclasses.replace(
        first, metrics=metrics, **{name: getattr(timed, name) for name in TIMING_FIELDS}
    )


def slower_of(first: EvalResult, second: EvalResult) -> EvalResult:
    """The conservative rule for two timings of one candidate: of two ok timings the one with
    the slower median; otherwise ``second`` (a failed second evaluation fails the candidate)."""
    if first.ok and second.ok:
        return second if (second.latency_ms or 0) > (first.latency_ms or 0) else first
    return second


def _launch_like(node: ast.AST) -> bool:
    """A Triton launch ``kernel[grid](...)`` or a ``triton.Config(...)``: the calls whose
    :data:`IGNORED_ON_CPU` keywords are launch parameters."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Subscript):
        return True
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "Config"


class _WithoutIgnoredLaunchParams(ast.NodeTransformer):
    """Drops the :data:`IGNORED_ON_CPU` keywords of every launch and ``triton.Config``, and
    blanks the integer literal of a ``NAME = <int>`` assignment whose name is only ever read as
    such a keyword's value (``num_warps = 8`` ... ``kernel[grid](..., num_warps=num_warps)``)."""

    def __init__(self, tree: ast.AST) -> None:
        reads: dict[str, int] = {}
        as_launch: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                reads[node.id] = reads.get(node.id, 0) + 1
            for kw in node.keywords if _launch_like(node) else []:  # type: ignore[attr-defined]
                if kw.arg in IGNORED_ON_CPU and isinstance(kw.value, ast.Name):
                    as_launch[kw.value.id] = as_launch.get(kw.value.id, 0) + 1
        self._names = {n for n, count in as_launch.items() if reads.get(n) == count}

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _launch_like(node):
            node.keywords = [k for k in node.keywords if k.arg not in IGNORED_ON_CPU]
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        target = node.targets[0] if len(node.targets) == 1 else None
        value = node.value
        if (
            isinstance(target, ast.Name)
            and target.id in self._names
            and isinstance(value, ast.Constant)
            and type(value.value) is int
        ):
            node.value = ast.Constant(0)
        return self.generic_visit(node)


def launch_only_change(parent_source: str, child_source: str) -> bool:
    """True when ``child_source`` differs from ``parent_source`` (AST-normalized: comments and
    formatting do not count) and every difference is in the launch parameters of
    :data:`~accelopt_core.proposers.offline_tunables.IGNORED_ON_CPU` (``num_warps``,
    ``num_stages``, ``num_ctas``, ``maxnreg``: keywords of a launch ``kernel[grid](...)`` or of
    ``triton.Config``, or a local passed only as one). False when either source does not
    parse."""
    try:
        parent, child = ast.parse(parent_source), ast.parse(child_source)
    except (SyntaxError, ValueError, RecursionError):
        return False
    if ast.dump(parent) == ast.dump(child):
        return False
    stripped = [ast.dump(_WithoutIgnoredLaunchParams(tree).visit(tree)) for tree in (parent, child)]
    return stripped[0] == stripped[1]


def _confirmed_steps(
    cand: Candidate, known: dict[str, Candidate], baseline: Candidate
) -> list[Candidate] | None:
    """``cand`` and its ancestors below ``baseline``, when each is ``confirmed`` and following
    ``parent_id`` reaches ``baseline``; None otherwise (a missing ancestor, a loop)."""
    steps: list[Candidate] = []
    seen: set[str] = set()
    node = cand
    while node.id != baseline.id:
        if node.id in seen or not node.confirmed or node.ignored_by_timing:
            return None
        seen.add(node.id)
        steps.append(node)
        parent = known.get(node.parent_id or "")
        if parent is None:
            return None
        node = parent
    return steps


def confirmed_chain(cand: Candidate, known: dict[str, Candidate], baseline: Candidate) -> bool:
    """True when every step from ``baseline`` to ``cand`` was confirmed by the interleaved
    re-timing: ``cand`` and each ancestor below the baseline are ``confirmed``, and following
    ``parent_id`` reaches ``baseline`` (a missing ancestor or a loop gives False)."""
    return _confirmed_steps(cand, known, baseline) is not None


def median_faster(fast: Candidate, slow: Candidate, margin: float) -> bool:
    """Both ok and timed, and ``fast``'s median below ``(1 - margin)`` x ``slow``'s: the noise
    margin of :func:`beats` without its spread test."""
    a = fast.result.latency_ms if fast.result.ok else None
    b = slow.result.latency_ms if slow.result.ok else None
    return a is not None and b is not None and a < b * (1 - margin)


def chain_ratio(cand: Candidate, known: dict[str, Candidate], baseline: Candidate) -> float | None:
    """``cand``'s latency as a fraction of ``baseline``'s, measured back to back: the product
    of :attr:`Candidate.step_ratio` over the steps from the baseline down to it. None unless
    :func:`confirmed_chain` holds and every step has ratios."""
    steps = _confirmed_steps(cand, known, baseline)
    if not steps:
        return None
    ratios = [step.step_ratio for step in steps]
    return None if None in ratios else math.prod(ratios)


def rank_verified(
    candidates: Iterable[Candidate], baseline: Candidate, margin: float
) -> list[Candidate]:
    """The report's ranking (pure function), fastest first, with ``rank`` set to 1, 2, ...

    A candidate is ranked when its step was confirmed by the interleaved re-timing
    (``confirmed``, which implies correct and re-timed), it is not
    :attr:`~Candidate.ignored_by_timing`, and it is faster than the baseline: by
    :func:`is_faster` (median past the noise margin, p20..p80 spreads apart), or, when every
    step from the baseline to it was confirmed (:func:`confirmed_chain`), by the median past
    the margin alone (:func:`median_faster`) or by its back-to-back ratio to the baseline
    (:func:`chain_ratio`) below ``1 - margin``. The baseline was timed once, before the search
    and alone, under whatever load the machine had then; each confirmed step already beat its
    parent, timed back to back with it, in a majority of rounds with the spreads apart, so
    comparing timings taken minutes apart adds only the load's noise (on 2 shared cores a
    confirmed 2.5x step failed the spread test, and a confirmed step of the suite's add kernel
    the median one). A candidate ranked by its ratio alone gets ``speedup`` = 1 / ratio: its
    latency against the baseline's says less."""
    known = {c.id: c for c in candidates}
    known.setdefault(baseline.id, baseline)

    def faster(c: Candidate) -> bool:
        if is_faster(c, baseline, margin):
            return True
        if not confirmed_chain(c, known, baseline):
            return False
        if median_faster(c, baseline, margin):
            return True
        ratio = chain_ratio(c, known, baseline)
        if ratio is None or ratio >= 1 - margin:
            return False
        c.speedup = 1.0 / ratio
        return True

    verified = [
        c
        for c in known.values()
        if c.parent_id is not None and c.retimed and c.confirmed and not c.ignored_by_timing
        and faster(c)
    ]  # fmt: skip
    verified.sort(key=lambda c: c.latency_ms or 0.0)
    for rank, cand in enumerate(verified, start=1):
        cand.rank = rank
    return verified
