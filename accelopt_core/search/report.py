"""The report of a beam search, the running tally it is made from, and its JSON form.

Failed candidates (issue 30). Every sample that did not become a correct candidate leaves one
:class:`FailedCandidate` record, in the order the failures happened; ``accelopt optimize
--json`` lists them all under ``failed_candidates``, the CLI prints them as a table (the
reasons in full with ``--verbose``), the language server logs each one (``window/logMessage``)
and counts them in its progress, and ``accelopt runs show`` prints them again later. One
record, as JSON::

    {
      "plan": "wider blocks and more warps",  # the plan's title
      "stage": "compile",      # parse | gate | compile | launch | incorrect | timeout
                               # | crash | llm  (FAILURE_STAGES; see failure_stage)
      "reason": "Triton compilation error: ...",  # the full reason, one or more lines
      "line": 37,              # 1-based line of the candidate (null when unknown / parse)
      "status": "compile_error",  # the evaluation status, "no_code" for parse and llm
      "rule": null,            # the judge's rule for stage "gate" ("gate: torch compute", ...)
      "candidate_id": "3f2a9c0d1e4b",  # null when no candidate was made (parse, llm)
      "parent_id": "8be1d2c3a4f5",
      "iteration": 1,
      "fixed": false,          # the fixer's attempt
      "retime": false,         # failed at its re-timing, not at its first evaluation
      "call": 4,               # the transcript call that produced it (accelopt runs show)
      "excerpt": "# Failing line 37:\n>> 37 | ..."  # numbered lines around `line`, or ""
    }

The stages: ``parse`` the reply held no usable code; ``llm`` the agent's call failed (no
reply); ``gate`` the judge rejected the candidate by a trust rule (the static gate before it
ran, or a check of its run, ``rule`` names it); ``compile`` it did not load or compile (also
for the configured GPU); ``launch`` it cannot launch on the configured GPU; ``incorrect`` wrong
outputs; ``timeout`` no answer in time; ``crash`` it raised or died while running.

The beam as a picture (issue 32): besides the ranked ``candidates``, the report keeps every other
candidate the search evaluated as ``explored`` (:func:`explored_record`: the candidate's JSON
with its diff, without its source) and the memory experiences it added as ``experiences``
(:func:`experience_record`), so :mod:`accelopt_core.report` can draw the whole tree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from accelopt_core.devicefacts import number
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Usage
from accelopt_core.search.candidate import Candidate
from accelopt_core.textdiff import unified_diff

#: Where a candidate failed, in the order of its path (see the module docstring).
FAILURE_STAGES = ("llm", "parse", "gate", "compile", "launch", "incorrect", "timeout", "crash")
#: Longest reason kept in a record (characters; the tail is kept: tracebacks end with the cause).
MAX_REASON = 4000

#: What a result timed on the host says about the hardware, where it is shown (issue 11): the
#: Triton interpreter times on CPU, the NKI simulator (``nki.simulate``) does not time at all.
HOST_TIMING_NOTES = {
    "interpreter": "timed under the Triton interpreter on CPU (CPU time of the candidate's "
    "process): these latencies say nothing about GPU speed",
    "simulated": "run by the NKI simulator on CPU (nki.simulate): checked, not timed; says "
    "nothing about Trainium speed",
}

#: NKI profile metrics (:data:`accelopt_core.onsite.nki.profile.METRIC_KEYS`) as shown:
#: (memory, read key, write key) and (engine name, active-time % key).
_TRAFFIC = (
    ("HBM", "hbm_read_bytes", "hbm_write_bytes"),
    ("SBUF", "sbuf_read_bytes", "sbuf_write_bytes"),
    ("PSUM", "psum_read_bytes", "psum_write_bytes"),
)
_ENGINES = (
    ("tensor", "tensor_engine_active_time_percent"),
    ("vector", "vector_engine_active_time_percent"),
    ("scalar", "scalar_engine_active_time_percent"),
    ("GpSimd", "gpsimd_engine_active_time_percent"),
)


def format_bytes(n: float) -> str:
    """``512 B``, ``2.0 KiB``, ``1.5 MiB``, ``3.2 GiB`` (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # unreachable


def metrics_lines(metrics: Mapping[str, Any]) -> list[str]:
    """An NKI profile's metrics (``EvalResult.metrics``, from the ``neuron-profile`` summary)
    as at most two lines; ``[]`` without metrics (Triton, simulated NKI):

    ``memory: HBM 2.0 MiB read, 1.0 MiB written · SBUF ... · spills 0 B saved, 0 B reloaded``
    ``compute: 1.05 MFLOP · matmul arithmetic intensity 0.25 FLOP/B · engines active: tensor 0%
    · vector 43% · scalar 5% · GpSimd 0%``. Missing keys are left out."""
    memory = []
    for name, read, write in _TRAFFIC:
        r, w = number(metrics.get(read)), number(metrics.get(write))
        if r is not None or w is not None:
            memory.append(f"{name} {format_bytes(r or 0)} read, {format_bytes(w or 0)} written")
    save, reload = (
        number(metrics.get("spill_save_bytes")),
        number(metrics.get("spill_reload_bytes")),
    )
    if save is not None or reload is not None:
        memory.append(
            f"spills {format_bytes(save or 0)} saved, {format_bytes(reload or 0)} reloaded"
        )
    compute = []
    flops = number(metrics.get("hardware_flops"))
    if flops is not None:
        compute.append(f"{flops / 1e6:.3g} MFLOP")
    intensity = number(metrics.get("mm_arithmetic_intensity"))
    if intensity is not None:
        compute.append(f"matmul arithmetic intensity {intensity:.3g} FLOP/B")
    engines = [
        f"{name} {pct:.0f}%"
        for name, key in _ENGINES
        if (pct := number(metrics.get(key))) is not None
    ]
    if engines:
        compute.append("engines active: " + " · ".join(engines))
    lines = []
    if memory:
        lines.append("memory: " + " · ".join(memory))
    if compute:
        lines.append("compute: " + " · ".join(compute))
    return lines


def busiest_engine(metrics: Mapping[str, Any]) -> str | None:
    """``vector engine 43% active``: the NKI engine with the largest active-time share, or
    None without engine metrics."""
    shares = [
        (pct, name) for name, key in _ENGINES if (pct := number(metrics.get(key))) is not None
    ]
    if not shares:
        return None
    pct, name = max(shares)
    return f"{name} engine {pct:.0f}% active"


def failure_stage(result: EvalResult) -> str:
    """The stage of a failed evaluation: ``gate`` (``rejected``), ``compile``
    (``compile_error``, or ``incorrect`` because it does not compile for the configured GPU),
    ``launch`` (``incorrect``: it cannot launch on the configured GPU), ``incorrect``,
    ``timeout`` or ``crash`` (``runtime_error``)."""
    message = result.message or ""
    if result.status == "incorrect" and message.startswith("does not compile for "):
        return "compile"
    if result.status == "incorrect" and message.startswith("cannot launch on "):
        return "launch"
    return {
        "rejected": "gate",
        "compile_error": "compile",
        "runtime_error": "crash",
        "timeout": "timeout",
    }.get(result.status, "incorrect")


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON else "..." + text[-MAX_REASON:]


def _excerpt(source: str, line: int | None, context: int = 3) -> str:
    """Numbered source lines around ``line``, the failing one marked ``>>`` ("" without it)."""
    from accelopt_core.proposers.prompting import error_excerpt  # the fixer's view, reused

    return error_excerpt(source, line, context).rstrip("\n")


@dataclass
class FailedCandidate:
    """One sample that did not become a correct candidate (the module docstring shows its JSON
    form). ``stage`` is one of :data:`FAILURE_STAGES`; ``reason`` the full text (at most
    :data:`MAX_REASON` characters, its tail kept); ``line`` 1-based in the candidate."""

    plan: str
    stage: str
    reason: str
    line: int | None = None
    status: str = "no_code"
    rule: str | None = None
    candidate_id: str | None = None
    parent_id: str | None = None
    iteration: int = 0
    fixed: bool = False
    retime: bool = False
    call: int | None = None
    excerpt: str = ""

    @classmethod
    def of_candidate(cls, cand: Candidate, *, retime: bool = False) -> FailedCandidate:
        """The record of an evaluated candidate whose result is not ok."""
        result = cand.result
        return cls(
            plan=cand.plan_title,
            stage=failure_stage(result),
            reason=_clip(result.message or result.status),
            line=result.line,
            status=result.status,
            rule=result.rule,
            candidate_id=cand.id,
            parent_id=cand.parent_id,
            iteration=cand.iteration,
            fixed=cand.fixed,
            retime=retime,
            call=cand.call,
            excerpt=_excerpt(cand.source, result.line),
        )

    @classmethod
    def of_sample(
        cls, plan: str, sample: Any, parent: Candidate, iteration: int, *, fixed: bool = False
    ) -> FailedCandidate:
        """The record of a sample without code (:class:`~accelopt_core.proposers.Sample`:
        its ``stage`` ``parse`` or ``llm``, its ``error`` the reason)."""
        return cls(
            plan=plan,
            stage=sample.stage if sample.stage in FAILURE_STAGES else "parse",
            reason=_clip(sample.error or "no code"),
            parent_id=parent.id,
            iteration=iteration,
            fixed=fixed,
            call=sample.call,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (module docstring)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FailedCandidate:
        """The inverse of :meth:`to_dict`; unknown keys are ignored."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})

    def headline(self) -> str:
        """One line: ``compile (line 37) · plan 'wider blocks': Triton compilation error: ...``
        (the reason's first line)."""
        where = f" (line {self.line})" if self.line else ""
        first = self.reason.strip().splitlines()[0] if self.reason.strip() else ""
        fixed = " [fixer]" if self.fixed else ""
        return f"{self.stage}{where} · plan '{self.plan}'{fixed}: {first}"


def failure_counts(failed: list[FailedCandidate]) -> dict[str, int]:
    """Failed candidates per stage, in :data:`FAILURE_STAGES` order."""
    counts = {stage: 0 for stage in FAILURE_STAGES}
    for f in failed:
        counts[f.stage] = counts.get(f.stage, 0) + 1
    return {stage: n for stage, n in counts.items() if n}


@dataclass
class Tally:
    """What a search counted while it ran, for its report.

    Attributes:
        evaluated: evaluations sent to the evaluator (first evaluations and re-timings).
        duplicates: rewrites skipped because a candidate with the same id was met before.
        failures: status -> count of failed evaluations (``no_code`` for a sample without
            code, ``retime_<status>`` for a failed re-timing).
        failed: every failed candidate's record, in order (:meth:`record`).
        warnings: distinct messages for the report (memory not readable, ...).
        on_failure: called with each new record (the search emits it as an event).
    """

    evaluated: int = 0
    duplicates: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    failed: list[FailedCandidate] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    on_failure: Callable[[FailedCandidate], None] | None = None

    def count_failure(self, status: str) -> None:
        """One more failure of ``status``."""
        self.failures[status] = self.failures.get(status, 0) + 1

    def record(self, failure: FailedCandidate, counted_as: str | None = None) -> None:
        """Keep ``failure`` and count it (as ``counted_as``, default its ``status``)."""
        self.count_failure(counted_as or failure.status)
        self.failed.append(failure)
        if self.on_failure is not None:
            self.on_failure(failure)

    def warn(self, message: str) -> None:
        """Record a warning for the report, once."""
        if message not in self.warnings:
            self.warnings.append(message)


def explored_record(
    cand: Candidate, original_source: str, name: str, diff: str | None = None
) -> dict[str, Any]:
    """One candidate of the search report's ``explored`` list (issue 32): its
    :meth:`Candidate.to_dict` with the unified ``diff`` against ``original_source`` (``name``
    is the file's name in the diff's header) and without its ``source``. ``diff``: the diff
    already computed (a live view computes it once per candidate)."""
    data = cand.to_dict()
    del data["source"]
    data["diff"] = diff if diff is not None else unified_diff(original_source, cand.source, name)
    return data


def explored_records(seen: Any, ranked: list[Candidate], original: Any) -> list[dict[str, Any]]:
    """The report's ``explored`` list: an :func:`explored_record` of every candidate in
    ``seen`` but the baseline and the ``ranked`` ones; ``original`` is the user's
    :class:`~accelopt_core.kernelfile.KernelFile` (its source and path)."""
    ids = {c.id for c in ranked}
    name = original.path.rsplit("/", 1)[-1]
    return [
        explored_record(c, original.source, name)
        for c in seen
        if c.parent_id is not None and c.id not in ids
    ]


def experience_record(exp: Any) -> dict[str, Any]:
    """What the report keeps of one experience the search added to the memory (issue 32):
    ``id``, ``title``, ``positive``, ``speedup`` (slow latency / fast latency), ``hack`` (the
    judge's rule of a reward hack, else None), ``rule`` and ``reason`` (why a negative
    failed); ``accelopt memory show ID`` prints it whole."""
    return {
        "id": exp.id,
        "title": exp.title,
        "positive": bool(exp.positive),
        "speedup": exp.speedup,
        "hack": exp.hack,
        "rule": exp.rule,
        "reason": exp.reason,
    }


def token_table(usage: Mapping[str, Usage]) -> tuple[dict[str, dict[str, Any]], float]:
    """The report's ``tokens`` (each role's :meth:`Usage.to_dict`, plus ``total``) and the total
    cost in USD."""
    total = Usage()
    for u in usage.values():
        total.add(u)
    tokens = {role: u.to_dict() for role, u in usage.items()}
    tokens["total"] = total.to_dict()
    return tokens, total.cost_usd


@dataclass
class SearchReport:
    """The outcome of one search (also of a cancelled or budget-stopped one).

    ``candidates`` holds only verified improvements: correct, re-timed, and faster than the baseline
    past the noise margin (:func:`~accelopt_core.search.candidate.rank_verified`), best first
    (``rank`` 1..). ``tokens`` maps each LLM role, and ``total``,
    to its usage; ``cost_usd`` uses the configured price table (0 without one).
    ``failed_candidates`` holds every :class:`FailedCandidate`, in order; ``failures`` counts
    them by status. ``run_id`` names the run's folder (``accelopt runs show ID``), "" when none
    was kept.
    """

    path: str
    kernel_name: str
    entry: str
    baseline: Candidate
    candidates: list[Candidate]
    original_source: str
    target: str
    timing: str
    proposer: str
    stopped_reason: str = "completed"
    iterations_run: int = 0
    evaluated: int = 0
    duplicates: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost_usd: float = 0.0
    wall_s: float = 0.0
    memory_added: int = 0
    warnings: list[str] = field(default_factory=list)
    failed_candidates: list[FailedCandidate] = field(default_factory=list)
    run_id: str = ""
    #: issue 32: every other candidate the search evaluated (correct but not faster, failed,
    #: cut off), as :func:`explored_record` JSON records, so the beam's tree can be drawn.
    explored: list[dict[str, Any]] = field(default_factory=list)
    #: issue 32: the experiences the search added to the memory (:func:`experience_record`).
    experiences: list[dict[str, Any]] = field(default_factory=list)
    #: digest of the kernel module's import closure and harness (issue 13), part of the key
    #: the report is saved under; "" for a standalone file. Not serialised.
    closure: str = ""

    @property
    def best(self) -> Candidate | None:
        """The rank-1 candidate, or None when nothing was verified faster."""
        return self.candidates[0] if self.candidates else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON report of ``accelopt optimize --json`` (and what the server persists)."""
        name = self.path.rsplit("/", 1)[-1]
        return {
            "path": self.path,
            "kernel": self.kernel_name,
            "entry": self.entry,
            "target": self.target,
            "timing": self.timing,
            "proposer": self.proposer,
            "stopped_reason": self.stopped_reason,
            "iterations_run": self.iterations_run,
            "evaluated": self.evaluated,
            "duplicates": self.duplicates,
            "failures": dict(self.failures),
            "failed_candidates": [f.to_dict() for f in self.failed_candidates],
            "run_id": self.run_id,
            "baseline": self.baseline.to_dict(),
            # issue 22: the derived shapes every candidate was checked on, and those skipped
            "derived_inputs": self.baseline.result.metrics.get("derived_inputs"),
            "candidates": [c.to_dict(self.original_source, name) for c in self.candidates],
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "wall_s": round(self.wall_s, 3),
            "memory_added": self.memory_added,
            "experiences": list(self.experiences),
            "explored": list(self.explored),
            "warnings": list(self.warnings),
            "original_source": self.original_source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchReport:
        """The inverse of :meth:`to_dict` (a saved report read back)."""
        return cls(
            path=data["path"],
            kernel_name=data["kernel"],
            entry=data["entry"],
            baseline=Candidate.from_dict(data["baseline"]),
            candidates=[Candidate.from_dict(c) for c in data.get("candidates", [])],
            original_source=data.get("original_source", data["baseline"]["source"]),
            target=data.get("target", ""),
            timing=data.get("timing", ""),
            proposer=data.get("proposer", ""),
            stopped_reason=data.get("stopped_reason", "completed"),
            iterations_run=data.get("iterations_run", 0),
            evaluated=data.get("evaluated", 0),
            duplicates=data.get("duplicates", 0),
            failures=dict(data.get("failures", {})),
            failed_candidates=[
                FailedCandidate.from_dict(f) for f in data.get("failed_candidates") or []
            ],
            run_id=str(data.get("run_id") or ""),
            tokens=dict(data.get("tokens", {})),
            cost_usd=float(data.get("cost_usd", 0.0)),
            wall_s=float(data.get("wall_s", 0.0)),
            memory_added=int(data.get("memory_added", 0)),
            warnings=list(data.get("warnings", [])),
            explored=[e for e in data.get("explored") or [] if isinstance(e, dict)],
            experiences=[e for e in data.get("experiences") or [] if isinstance(e, dict)],
        )

    async def save(self, results: Any) -> None:
        """Store this report in ``results`` (an :class:`accelopt_core.memory.ResultsStore`), keyed
        by file, kernel and original source; best effort: a failure becomes a warning."""
        try:
            await asyncio.to_thread(
                results.save,
                self.path,
                self.kernel_name,
                self.original_source,
                self.to_dict(),
                self.closure,
            )
        except Exception as exc:  # the report is still returned; saving is best effort
            self.warnings.append(f"could not save the search results: {exc}")
