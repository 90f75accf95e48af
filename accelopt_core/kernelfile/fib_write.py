"""Writing a search's outcome back into a FlashInfer-Bench dataset (issue 35).

The user's solution is never overwritten: :func:`write_results` adds a new solution beside it
(``<name>_accelopt``, author ``accelopt``, the description naming the speedup, what it was
measured on and the plan) and appends the evaluation of both the user's solution and the new
one, per timed workload, to ``traces/<op_type>/<definition>.jsonl`` as FIB ``Trace`` records,
all through the ``flashinfer-bench`` package (``Solution``, ``Trace``, ``TraceSet.add_traces``,
``save_json_file``), so FIB's own loader and tools read them.

What a trace says: ``status`` ``PASSED``; ``correctness`` the largest absolute and relative
errors AccelOpt measured over all seeds and workloads of that evaluation (AccelOpt keeps one
maximum per evaluation, not one per workload); ``performance.latency_ms`` the median latency on
that workload. ``reference_latency_ms`` and ``speedup_factor`` stay 0 (FIB's defaults): AccelOpt
times the solutions, not the definition's PyTorch reference, and the speedup it reports is over
the user's solution (in the new solution's description and in both traces' ``log``).
``environment.hardware`` is the device that timed it; interpreter timings say so. The held-out
workload is checked, never timed, so it gets no trace.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from accelopt_core.kernelfile.fib import FibRef
from accelopt_core.kernelfile.fib_data import FibError, fib_data, find_definition, read_workloads

__all__ = ["new_solution_name", "write_results"]

#: The ``author`` of every solution AccelOpt writes.
AUTHOR = "accelopt"


def new_solution_name(ref: FibRef, taken: set[str]) -> str:
    """``<solution>_accelopt``, or ``<solution>_accelopt_2``, ``_3``... when that name is
    ``taken`` (solution names are unique across a dataset)."""
    base = f"{ref.solution}_accelopt"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def _taken_names(root: Path) -> set[str]:
    import json

    names = set()
    for path in sorted((root / "solutions").rglob("*.json")):
        try:
            names.add(json.loads(path.read_text("utf-8")).get("name"))
        except (OSError, ValueError, AttributeError):
            continue
    return names


def _hardware(result: Any) -> str:
    device = str(getattr(result, "device", None) or "unknown")
    timing = getattr(result, "timing", "none")
    if timing == "interpreter":
        return f"{device} (Triton interpreter, CPU time: says nothing about GPU speed)"
    return device.replace(" ", "_")


def describe(ref: FibRef, report: Any) -> str:
    """The new solution's description: speedup, over what, measured how, and the plan."""
    best = report.best
    result = best.result
    timed = [r for r in result.metrics.get("shapes") or [] if r.get("timed")]
    plan = best.plan_title + (f": {best.plan_text.strip()}" if best.plan_text.strip() else "")
    return (
        f"AccelOpt: {best.speedup:.2f}x faster than {ref.solution} (geometric mean of the "
        f"median latency over {len(timed) or 1} workloads of {ref.definition}; timed "
        f"{result.timing} on {result.device or 'unknown device'}). Plan: {plan}"
    )


def _traces(ref: FibRef, solution: str, result: Any, workloads: dict, note: str) -> list:
    data = fib_data()
    versions = {k: str(v) for k, v in (getattr(result, "versions", None) or {}).items()}
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat()
    out = []
    for row in result.metrics.get("shapes") or []:
        uuid = (row.get("shape") or {}).get("workload")
        latency = row.get("latency_ms")
        if not row.get("timed") or uuid not in workloads or not isinstance(latency, float):
            continue
        evaluation = data.Evaluation(
            status=data.EvaluationStatus.PASSED,
            environment=data.Environment(hardware=_hardware(result), libs=versions),
            timestamp=stamp,
            log=note,
            correctness=data.Correctness(
                max_absolute_error=float(result.max_abs_error or 0.0),
                max_relative_error=float(result.max_rel_error or 0.0),
            ),
            performance=data.Performance(latency_ms=latency),
        )
        out.append(
            data.Trace(
                definition=ref.definition,
                workload=workloads[uuid],
                solution=solution,
                evaluation=evaluation,
            )
        )
    return out


def write_results(ref: FibRef, report: Any) -> tuple[Path, int]:
    """Add the best candidate of ``report`` (a :class:`~accelopt_core.search.SearchReport`
    with a best) as a new solution beside ``ref``'s and append the traces of the baseline and
    the best. Returns (the new solution's file, the number of traces appended).

    Raises:
        FibError: the dataset changed under us (the solution or definition is gone) or cannot
            be written.
    """
    data = fib_data()
    root, source = Path(ref.root), Path(ref.solution_file)
    original = data.load_json_file(data.Solution, source)
    name = new_solution_name(ref, _taken_names(root))
    sources = [
        {"path": s.path, "content": report.best.source if s.path == ref.entry_file else s.content}
        for s in original.sources
    ]
    solution = data.Solution(
        name=name,
        definition=original.definition,
        author=AUTHOR,
        spec=original.spec,
        sources=sources,
        description=describe(ref, report),
    )
    target = source.with_name(f"{name}.json")
    try:
        data.save_json_file(solution, target)
    except OSError as exc:
        raise FibError(str(target), f"cannot write the new solution: {exc}") from None
    definition, _ = find_definition(root, ref.definition, source, "")
    workloads = {w.uuid: w for w, _, _ in read_workloads(root, definition)}
    note = f"accelopt: {report.best.speedup:.2f}x of {name} over {ref.solution}, same run"
    traces = _traces(ref, ref.solution, report.baseline.result, workloads, note)
    traces += _traces(ref, name, report.best.result, workloads, note)
    trace_set = data.TraceSet(root=root, definitions={definition.name: definition})
    try:
        trace_set.add_traces(traces)
    except OSError as exc:
        raise FibError(str(root / "traces"), f"cannot append the traces: {exc}") from None
    return target, len(traces)
