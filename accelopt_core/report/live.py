"""The view of a search while it runs, kept from its events (issue 32): :class:`LiveView`.

The language server keeps one per search job and feeds it every
:mod:`~accelopt_core.search.events` event; an editor showing the search asks for the whole
view once (:meth:`LiveView.view`) and then gets only what changed (:meth:`LiveView.delta`:
the nodes whose record changed since the last delta, and the small parts whole). The view is
:func:`~accelopt_core.report.model.build_view` of the report so far, so a running and a finished
search are drawn by the same code. Each candidate's diff is computed once; a snapshot of 200
candidates costs a few ms (``benchmarks/search_report.py``).
"""

from __future__ import annotations

from typing import Any

from accelopt_core.report.model import (
    add_failures,
    assemble,
    baseline_node,
    build_view,
    node_of_candidate,
)
from accelopt_core.search.report import explored_record

__all__ = ["LiveView"]


class LiveView:
    """A search's view, built from its events.

    Args:
        path: the kernel file (shown, and the name in each diff's header).
        kernel: the kernel searched.
        target: where candidates run.
        iterations: the planned iterations T (the x axis), when known.

    Attributes:
        final: the finished search's view, once :class:`SearchFinished` arrived and a view was
            asked for (None before).
        changed: an event arrived since the last :meth:`view` or :meth:`delta`.
    """

    def __init__(self, path: str, kernel: str, target: str = "", iterations: int | None = None):
        self.path = path
        self.kernel = kernel
        self.target = target
        self.iterations = iterations
        self.final: dict[str, Any] | None = None
        self._baseline: Any = None
        self._candidates: dict[str, Any] = {}
        self._failures: list[Any] = []
        self._diffs: dict[str, str] = {}
        self._nodes: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self._iteration = 0
        self._evaluated = 0
        self._sent: dict[str, dict[str, Any]] = {}
        self._report: Any = None
        self._state = "running"
        self.changed = False

    # -- events ----------------------------------------------------------------------------------

    def apply(self, event: Any) -> bool:
        """Take one search event; True when the view changed (something to send)."""
        from accelopt_core.search import (
            CandidateEvaluated,
            CandidateFailed,
            IterationStarted,
            NewBest,
            SearchFinished,
            SearchStarted,
        )

        match event:
            case CandidateEvaluated():
                self._evaluated += 1
                cand = event.candidate
                if cand.parent_id is None:
                    self._baseline = cand
                else:
                    self._candidates[cand.id] = cand
            case CandidateFailed():
                self._failures.append(event.failure)
            case SearchStarted():
                self._baseline = event.baseline
                self.iterations = event.iterations
            case IterationStarted():
                self._iteration = event.iteration
                self.iterations = event.iterations
            case NewBest():
                pass  # the candidate's own record says it (confirmed)
            case SearchFinished():
                self._report = event.report  # drawn when the view is asked for
            case _:
                return False
        self.changed = True
        return True

    def end(self, state: str) -> None:
        """The search ended without a report (its job failed or was cancelled before it
        began): later views say ``state`` instead of ``running``."""
        self._state = state
        self.changed = True

    def finish(self, report: dict[str, Any]) -> dict[str, Any]:
        """The finished search's view from its report (:meth:`SearchReport.to_dict`), kept in
        :attr:`final`; later views and deltas are this one."""
        self.final = build_view(report, iterations=self.iterations)
        self.changed = True
        return self.final

    # -- views -----------------------------------------------------------------------------------

    def _node(self, cand: Any, original: str, name: str) -> dict[str, Any]:
        """The node of ``cand``, made again only when its state changed (a new result, a
        re-timing, its confirmation): the search replaces ``cand.result`` when it re-times."""
        key = (
            id(cand.result),
            cand.result.status,
            cand.result.latency_ms,
            cand.speedup,
            cand.retimed,
            cand.confirmed,
            cand.ignored_by_timing,
        )
        cached = self._nodes.get(cand.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        if cand.parent_id is None:
            node = baseline_node(cand.to_dict(), live=True)
        else:
            record = explored_record(cand, original, name, self._diffs.get(cand.id))
            self._diffs[cand.id] = record["diff"]
            node = node_of_candidate(record, live=True)
        self._nodes[cand.id] = (key, node)
        return node

    def report_so_far(self) -> dict[str, Any]:
        """The report's own fields as the events so far make them, in
        :meth:`SearchReport.to_dict`'s shape, without the candidates (kept as nodes)."""
        base = self._baseline
        return {
            "path": self.path,
            "kernel": self.kernel,
            "target": self.target,
            "timing": base.result.timing if base is not None else "",
            "stopped_reason": self._state,
            "iterations_run": self._iteration,
            "evaluated": self._evaluated,
            "baseline": {"result": base.result.to_dict()} if base is not None else None,
            "failed_candidates": [f.to_dict() for f in self._failures],
        }

    def view(self) -> dict[str, Any]:
        """The whole view now (the final one once the search finished); what it holds counts
        as sent for :meth:`delta`."""
        if self.final is None and self._report is not None:
            self.finish(self._report.to_dict())
        if self.final is not None:
            view = self.final
        else:
            base = self._baseline
            original = base.source if base is not None else ""
            name = self.path.replace("\\", "/").rsplit("/", 1)[-1]
            cands = ([base] if base is not None else []) + list(self._candidates.values())
            nodes = {c.id: self._node(c, original, name) for c in cands}
            report = self.report_so_far()
            view = assemble(
                report,
                add_failures(nodes, report["failed_candidates"]),
                state=self._state,
                iterations=self.iterations,
            )
        self._sent = {n["id"]: n for n in view["nodes"]}
        self.changed = False
        return view

    def delta(self) -> dict[str, Any]:
        """What changed since the last :meth:`view` or :meth:`delta`: ``nodes`` (those whose
        record changed, or new ones) and ``state``, ``meta``, ``best``, ``roofline`` and
        ``experiences`` whole."""
        sent = self._sent
        view = self.view()
        nodes = [n for n in view["nodes"] if sent.get(n["id"]) is not n and sent.get(n["id"]) != n]
        return {
            "state": view["state"],
            "meta": view["meta"],
            "best": view["best"],
            "roofline": view["roofline"],
            "experiences": view["experiences"],
            "nodes": nodes,
        }
