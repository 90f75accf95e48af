"""The search view: what the picture of one beam search shows, as one JSON-ready dict.

:func:`build_view` turns a search report (:meth:`accelopt_core.search.SearchReport.to_dict`,
the JSON of ``accelopt optimize --json`` and of a run's ``report.json``) into the view that the
HTML report (:mod:`.html`), the VS Code webview and ``accelopt report`` draw; a running search's
view is the same function over the report so far (:mod:`.live`). Everything is read
defensively: a report of an older version, a failed search or one without candidates gives a
smaller view, never an exception. The view (``schema`` 1)::

    {"schema": 1, "state": "finished" | "running" | "cancelled",
     "meta": {"path", "file", "kernel", "entry", "target", "timing", "timing_note", "proposer",
              "stopped_reason", "iterations_run", "iterations", "evaluated", "duplicates",
              "wall_s", "cost_usd", "tokens", "run_id", "device", "baseline_ms",
              "best_speedup", "memory_added", "derived": {...} | None, "failures": {stage: n},
              "warnings": [...]},
     "nodes": [node, ...],       # the baseline first, then every candidate and failed sample
     "best": [{"iteration": t, "speedup": x, "id": id}, ...],  # best verified speedup up to t
     "roofline": {"device", "peak": {...} | None, "points": [...]} | None,  # GPU timing only
     "experiences": [...]}       # :func:`accelopt_core.search.report.experience_record`

A node: ``id``, ``parent`` (None for the baseline), ``iteration``, ``plan``, ``plan_text``,
``verdict`` (:data:`VERDICTS`), ``note`` (why a correct one has its verdict), ``status``, ``stage`` (a failure's stage, else None),
``reason`` (in full), ``line``, ``rule``, ``excerpt``, ``speedup`` (baseline latency / its
latency), ``latency_ms`` / ``p20_ms`` / ``p80_ms`` (ms), ``rank``, ``confirmed``, ``fixed``,
``retime``, ``call``, ``diff`` (unified, against the original file), ``gpu`` (device-fact
lines, :func:`accelopt_core.devicefacts.gpu_lines`), ``derived`` (the derived inputs it was
checked on), ``gbps`` (GB/s), ``tflops`` (TFLOP/s), ``pct_of_peak`` (%), ``bound``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelopt_core import devicefacts
from accelopt_core.devicefacts import number

__all__ = [
    "SCHEMA",
    "VERDICTS",
    "add_failures",
    "assemble",
    "baseline_node",
    "build_view",
    "derived_block",
    "node_of_candidate",
]

#: The version of the view's JSON form.
SCHEMA = 1
#: Each node's verdict, as the legend says it.
VERDICTS = {
    "baseline": "baseline",
    "ranked": "ranked: verified faster",
    "pending": "correct, being re-timed",
    "slower": "correct, not ranked",
    "incorrect": "incorrect",
    "failed": "failed",
}
#: Timing modes that say something about the hardware (a roofline needs one of them).
HARDWARE_TIMING = ("cuda", "neuron")
#: Longest text kept of a node's plan text or reason (characters; the rest is cut with a note).
MAX_TEXT = 8000


def _clip(text: Any, limit: int = MAX_TEXT) -> str:
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more)"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _records(value: Any) -> list[Mapping[str, Any]]:
    return [r for r in value if isinstance(r, Mapping)] if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    n = number(value)
    return int(n) if n is not None else None


def derived_block(metrics: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The derived inputs a result was checked on (issues 22, 29 and 52), as
    :func:`accelopt_core.devicefacts.derived_facts` gives them: ``{"summary", "classes":
    {class: n}, "checked": [[name, inputs], ...], "skipped": [[name, why], ...], "deferred":
    [[name, why], ...], "deferred_groups": [[[name, ...], why], ...], "search": {"seed",
    "tried", "usable", "calls", "budget", "seconds", "counterexample", "examples", "skipped"}
    or None, "search_line"}``; None when the result carries none."""
    return devicefacts.derived_facts(metrics)


def _stage_of(result: Mapping[str, Any]) -> str | None:
    """The failure stage of a result dict (:func:`accelopt_core.search.report.failure_stage`),
    None when it is ok."""
    from accelopt_core.onsite.protocol import EvalResult
    from accelopt_core.search.report import failure_stage

    status = result.get("status")
    if status in (None, "ok"):
        return None
    try:
        return failure_stage(EvalResult(status=status, message=result.get("message")))
    except (TypeError, ValueError):
        return "crash"


def _verdict(record: Mapping[str, Any], stage: str | None, *, ranked: bool, live: bool) -> str:
    if record.get("parent_id") is None:
        return "baseline"
    if ranked:
        return "ranked"
    if record.get("status") == "ok":
        if live and not record.get("retimed"):
            return "pending"
        confirmed = record.get("confirmed") and not record.get("ignored_by_timing")
        if live and confirmed and (number(record.get("speedup")) or 0) > 1:
            return "ranked"  # confirmed by re-timing; the final ranking may still differ
        return "slower"
    return "incorrect" if stage == "incorrect" else "failed"


def _note(record: Mapping[str, Any], verdict: str) -> str:
    """Why a correct candidate has its verdict, in one sentence ("" for failed ones)."""
    if verdict == "baseline":
        return "the file as it was: every speedup is against its latency"
    if verdict == "ranked":
        return (
            "correct, confirmed faster than its parent by re-timing, and faster than the baseline"
        )
    if verdict == "pending":
        return "correct; entered the beam and is being re-timed against its parent"
    if verdict != "slower":
        return ""
    if record.get("ignored_by_timing"):
        return "differs from its parent only in launch parameters its timing ignores"
    if record.get("confirmed"):
        return "confirmed faster than its parent, but not verified faster than the baseline"
    if record.get("retimed"):
        return "re-timed against its parent: the step was not confirmed"
    return "not faster than its parent past the noise margin, so it did not enter the beam"


def node_of_candidate(
    record: Mapping[str, Any], *, ranked: bool = False, live: bool = False
) -> dict[str, Any]:
    """The node of one candidate record (:meth:`accelopt_core.search.Candidate.to_dict`, or
    an :func:`~accelopt_core.search.report.explored_record`). ``ranked``: it is in the
    report's ranking; ``live``: the search still runs (a correct candidate not yet re-timed
    is ``pending``, one confirmed faster is ``ranked`` before the final ranking)."""
    result = _mapping(record.get("result"))
    metrics = _mapping(result.get("metrics"))
    stage = _stage_of(result)
    ok = result.get("status") == "ok"
    hardware = ok and result.get("timing") in HARDWARE_TIMING  # interpreter figures mean nothing
    verdict = _verdict(record, stage, ranked=ranked, live=live)
    gpu = devicefacts.gpu_lines(metrics)
    untimed = devicefacts.not_timed_line(metrics)
    return {
        "id": str(record.get("id", "")),
        "parent": record.get("parent_id"),
        "iteration": _int(record.get("iteration")) or 0,
        "plan": _clip(record.get("plan") or "", 400),
        "plan_text": _clip(record.get("plan_text")),
        "verdict": verdict,
        "note": _note(record, verdict),
        "status": str(result.get("status") or record.get("status") or ""),
        "stage": stage,
        "reason": _clip(result.get("message")),
        "line": _int(result.get("line")),
        "rule": result.get("rule") if isinstance(result.get("rule"), str) else None,
        "excerpt": "",
        "speedup": number(record.get("speedup")) if ok else None,
        "latency_ms": number(result.get("latency_ms")) if ok else None,
        "p20_ms": number(result.get("p20_ms")) if ok else None,
        "p80_ms": number(result.get("p80_ms")) if ok else None,
        "rank": _int(record.get("rank")) if ranked else None,
        "confirmed": bool(record.get("confirmed")),
        "fixed": bool(record.get("fixed")),
        "retime": False,
        "call": _int(record.get("call")),
        "diff": record.get("diff") if isinstance(record.get("diff"), str) else "",
        "gpu": gpu + ([untimed] if untimed else []),
        "derived": derived_block(metrics),
        "gbps": number(result.get("gbps")) if hardware else None,
        "tflops": number(result.get("tflops")) if hardware else None,
        "pct_of_peak": number(result.get("pct_of_peak")) if hardware else None,
        "bound": result.get("bound") if hardware else None,
        "warnings": [_clip(w, 600) for w in result.get("warnings") or [] if isinstance(w, str)],
    }


def _node_of_failure(failure: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The node of a failed sample that made no candidate (``parse``, ``llm``): a leaf under
    its parent, with a made-up id ``failed-<index>``."""
    return {
        "id": f"failed-{index}",
        "parent": failure.get("parent_id"),
        "iteration": _int(failure.get("iteration")) or 0,
        "plan": _clip(failure.get("plan") or "", 400),
        "plan_text": "",
        "verdict": "failed",
        "note": "",
        "status": str(failure.get("status") or "no_code"),
        "stage": str(failure.get("stage") or "parse"),
        "reason": _clip(failure.get("reason")),
        "line": _int(failure.get("line")),
        "rule": failure.get("rule") if isinstance(failure.get("rule"), str) else None,
        "excerpt": _clip(failure.get("excerpt")),
        "speedup": None,
        "latency_ms": None,
        "p20_ms": None,
        "p80_ms": None,
        "rank": None,
        "confirmed": False,
        "fixed": bool(failure.get("fixed")),
        "retime": bool(failure.get("retime")),
        "call": _int(failure.get("call")),
        "diff": "",
        "gpu": [],
        "derived": None,
        "gbps": None,
        "tflops": None,
        "pct_of_peak": None,
        "bound": None,
        "warnings": [],
    }


def _merge_failure(node: dict[str, Any], failure: Mapping[str, Any]) -> None:
    """A candidate's failure record completes its node: the stage, the reason in full, the
    numbered excerpt, and whether it failed at its re-timing."""
    stage = str(failure.get("stage") or node["stage"] or "crash")
    node["stage"] = stage
    node["reason"] = _clip(failure.get("reason") or node["reason"])
    node["excerpt"] = _clip(failure.get("excerpt"))
    node["retime"] = bool(failure.get("retime"))
    node["line"] = _int(failure.get("line")) or node["line"]
    if node["verdict"] != "baseline":
        node["verdict"] = "incorrect" if stage == "incorrect" else "failed"
        node["note"] = ""


def add_failures(
    nodes: dict[str, dict[str, Any]], failures: list[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The nodes with the failure records applied: a candidate's record completes a copy of
    its node (``nodes`` itself is left as it is: a live view keeps its nodes), a sample
    without a candidate becomes a leaf of its own. In ``nodes``' order, new leaves last."""
    out = dict(nodes)
    for i, failure in enumerate(failures):
        cid = failure.get("candidate_id")
        if isinstance(cid, str) and cid in out:
            node = out[cid] = dict(out[cid])
            _merge_failure(node, failure)
        else:
            node = _node_of_failure(failure, i)
            out[node["id"]] = node
    return list(out.values())


def _nodes(report: Mapping[str, Any], live: bool) -> list[dict[str, Any]]:
    nodes: dict[str, dict[str, Any]] = {}
    baseline = _mapping(report.get("baseline"))
    if baseline:
        base = baseline_node(baseline, live=live)
        nodes[base["id"]] = base
    for record in _records(report.get("candidates")):
        node = node_of_candidate(record, ranked=True, live=live)
        nodes.setdefault(node["id"], node)
    for record in _records(report.get("explored")):
        node = node_of_candidate(record, live=live)
        nodes.setdefault(node["id"], node)
    return add_failures(nodes, _records(report.get("failed_candidates")))


def baseline_node(record: Mapping[str, Any], *, live: bool = False) -> dict[str, Any]:
    """The baseline's node (speedup 1 when it was timed)."""
    base = node_of_candidate({**record, "parent_id": None}, live=live)
    base["speedup"] = 1.0 if base["status"] == "ok" else None
    return base


def _best_per_iteration(nodes: list[dict[str, Any]], iterations: int) -> list[dict[str, Any]]:
    """The best verified speedup found up to each iteration (1.0 at iteration 0, the
    baseline's); empty when the baseline was not timed."""
    base = next((n for n in nodes if n["verdict"] == "baseline"), None)
    if base is None or base["status"] != "ok":
        return []
    last = max([iterations, *(n["iteration"] for n in nodes)])
    ranked = [n for n in nodes if n["verdict"] == "ranked" and n["speedup"]]
    best, best_id, out = 1.0, base["id"], []
    for t in range(last + 1):
        for n in ranked:
            if n["iteration"] == t and n["speedup"] > best:
                best, best_id = n["speedup"], n["id"]
        out.append({"iteration": t, "speedup": best, "id": best_id})
    return out


def _roofline(nodes: list[dict[str, Any]], timing: str, device: str) -> dict[str, Any] | None:
    """Each correct candidate's achieved GB/s and TFLOP/s against the device's datasheet
    peaks (:func:`accelopt_core.onsite.judge.roofline.match_peak`): only for ``cuda`` and
    ``neuron`` timing (interpreter and simulator timings say nothing about the hardware) and
    when some candidate has a figure. ``intensity`` is FLOP/B = TFLOP/s x 1e12 / (GB/s x 1e9)."""
    if timing not in HARDWARE_TIMING:
        return None
    points = []
    for n in nodes:
        if n["verdict"] in ("incorrect", "failed") or (n["gbps"] is None and n["tflops"] is None):
            continue
        intensity = None
        if n["gbps"] and n["tflops"] is not None:
            intensity = n["tflops"] * 1e12 / (n["gbps"] * 1e9)
        points.append(
            {
                "id": n["id"],
                "gbps": n["gbps"],
                "tflops": n["tflops"],
                "intensity": intensity,
                "pct_of_peak": n["pct_of_peak"],
                "bound": n["bound"],
                "verdict": n["verdict"],
            }
        )
    if not points:
        return None
    from accelopt_core.onsite.judge.roofline import match_peak

    peak = match_peak(device or "")
    peak_data = None
    if peak is not None:
        peak_data = {
            "name": peak.name,
            "hbm_gbps": peak.hbm_gbps,
            "bf16_tflops": peak.bf16_tflops,
            "fp32_tflops": peak.fp32_tflops,
            "source": peak.source,
        }
    return {"device": device, "peak": peak_data, "points": points}


def _failure_counts(report: Mapping[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for failure in _records(report.get("failed_candidates")):
        stage = str(failure.get("stage") or "crash")
        counts[stage] = counts.get(stage, 0) + 1
    return counts


def _meta(report: Mapping[str, Any], nodes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    from accelopt_core.search.report import HOST_TIMING_NOTES

    baseline = _mapping(report.get("baseline"))
    result = _mapping(baseline.get("result"))
    timing = str(report.get("timing") or result.get("timing") or "")
    tokens = _mapping(_mapping(report.get("tokens")).get("total"))
    ranked = [n["speedup"] for n in nodes if n["verdict"] == "ranked" and n["speedup"]]
    path = str(report.get("path") or "")
    return {
        "path": path,
        "file": path.replace("\\", "/").rsplit("/", 1)[-1],
        "kernel": str(report.get("kernel") or ""),
        "entry": str(report.get("entry") or ""),
        "target": str(report.get("target") or ""),
        "timing": timing,
        "timing_note": HOST_TIMING_NOTES.get(timing),
        "proposer": str(report.get("proposer") or ""),
        "stopped_reason": str(report.get("stopped_reason") or ""),
        "iterations_run": _int(report.get("iterations_run")) or 0,
        "evaluated": _int(report.get("evaluated")) or 0,
        "duplicates": _int(report.get("duplicates")) or 0,
        "wall_s": number(report.get("wall_s")),
        "cost_usd": number(report.get("cost_usd")),
        "tokens": _int(tokens.get("total_tokens")) or 0,
        "run_id": str(report.get("run_id") or ""),
        "device": str(result.get("device") or ""),
        "baseline_ms": number(result.get("latency_ms")) if result.get("status") == "ok" else None,
        "baseline_status": _clip(
            result.get("message") if result.get("status") != "ok" else "", 2000
        ),
        "best_speedup": max(ranked) if ranked else None,
        "memory_added": _int(report.get("memory_added")) or 0,
        "derived": derived_block(_mapping(result.get("metrics"))),
        "failures": _failure_counts(report),
        "warnings": [_clip(w, 2000) for w in report.get("warnings") or [] if isinstance(w, str)],
        **extra,
    }


def build_view(
    report: Mapping[str, Any],
    *,
    state: str | None = None,
    iterations: int | None = None,
    live: bool = False,
) -> dict[str, Any]:
    """The view of one search (module docstring) from its report dict.

    Args:
        report: :meth:`accelopt_core.search.SearchReport.to_dict` (or a run's
            ``report.json``; keys of older versions may be missing).
        state: ``running``, ``finished`` or ``cancelled``; default from the report's
            ``stopped_reason``.
        iterations: the search's planned iterations T (the x axis), when known.
        live: the search still runs (see :func:`node_of_candidate`).

    Never raises for missing or mistyped keys: what cannot be read is left out.
    """
    return assemble(report, _nodes(report, live), state=state, iterations=iterations)


def assemble(
    report: Mapping[str, Any],
    nodes: list[dict[str, Any]],
    *,
    state: str | None = None,
    iterations: int | None = None,
) -> dict[str, Any]:
    """The view from the report's own fields and its ``nodes`` (made by :func:`_nodes`, or
    kept by a live view): the meta, the best speedup per iteration, the roofline and the
    experiences (see :func:`build_view`)."""
    stopped = str(report.get("stopped_reason") or "")
    if state is None:
        state = "cancelled" if stopped == "cancelled" else "finished"
    iterations_run = _int(report.get("iterations_run")) or 0
    meta = _meta(report, nodes, iterations=iterations)
    experiences = [
        {
            "id": str(e.get("id") or ""),
            "title": _clip(e.get("title") or "", 400),
            "positive": bool(e.get("positive")),
            "speedup": number(e.get("speedup")),
            "hack": e.get("hack") if isinstance(e.get("hack"), str) else None,
            "rule": _clip(e.get("rule"), 4000),
            "reason": _clip(e.get("reason"), 2000),
        }
        for e in _records(report.get("experiences"))
    ]
    return {
        "schema": SCHEMA,
        "state": state,
        "meta": meta,
        "nodes": nodes,
        "best": _best_per_iteration(nodes, max(iterations_run, iterations or 0)),
        "roofline": _roofline(nodes, meta["timing"], meta["device"]),
        "experiences": experiences,
    }
