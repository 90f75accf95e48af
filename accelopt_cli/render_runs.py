"""Terminal rendering of why candidates failed and of kept runs (issue 30): the failures table
of ``accelopt optimize`` (reasons in full with ``--verbose``), the runs table of ``accelopt
runs`` and one run in full for ``accelopt runs show ID``.

Failures come as :class:`accelopt_core.search.FailedCandidate` records or their JSON form (a
saved run's report); everything prints to the :class:`rich.console.Console` it is given.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelopt_core.search.report import FailedCandidate, failure_counts

#: Failures the short table shows; the rest are counted under it.
TABLE_ROWS = 10
#: Characters of a reason's first line shown in the short table.
REASON_WIDTH = 100


def _records(failed: Iterable[FailedCandidate | Mapping[str, Any]]) -> list[FailedCandidate]:
    return [f if isinstance(f, FailedCandidate) else FailedCandidate.from_dict(f) for f in failed]


def _first_line(text: str, width: int = REASON_WIDTH) -> str:
    lines = text.strip().splitlines()
    line = " ".join(lines[0].split()) if lines else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def failures_table(failed: Iterable[FailedCandidate | Mapping[str, Any]]) -> Table | None:
    """The failed candidates, one row each (at most :data:`TABLE_ROWS`): stage, line, plan,
    fixer, and the first line of the reason; None when nothing failed."""
    records = _records(failed)
    if not records:
        return None
    counts = ", ".join(f"{stage} {n}" for stage, n in failure_counts(records).items())
    table = Table(title=f"failed candidates: {counts}", title_justify="left")
    for col in ("stage", "line", "plan", "reason"):
        table.add_column(col, overflow="fold", no_wrap=col in ("stage", "line"))
    for f in records[:TABLE_ROWS]:
        stage = f.stage + (" (fixer)" if f.fixed else "") + (" (re-timing)" if f.retime else "")
        table.add_row(
            escape(stage),
            str(f.line) if f.line else "",
            escape(f.plan),
            escape(_first_line(f.reason)),
        )
    if len(records) > TABLE_ROWS:
        table.caption = f"{len(records) - TABLE_ROWS} more: --verbose or --json lists them all"
    return table


def print_failures(
    out: Console, failed: Iterable[FailedCandidate | Mapping[str, Any]], *, verbose: bool
) -> None:
    """The short failures table, or with ``verbose`` every failure in full: its headline,
    the reason with all its lines and the numbered source lines around the failing one."""
    records = _records(failed)
    if not verbose:
        table = failures_table(records)
        if table is not None:
            out.print(table)
        return
    for n, f in enumerate(records, 1):
        ids = f" · candidate {f.candidate_id}" if f.candidate_id else ""
        call = f" · call {f.call}" if f.call else ""
        out.print(f"[bold]failure {n}[/]: {escape(f.headline())}{ids}{call}", soft_wrap=True)
        out.print(escape(f.reason), highlight=False, soft_wrap=True)
        if f.excerpt:
            out.print(escape(f.excerpt), highlight=False, soft_wrap=True)


# --- accelopt runs ----------------------------------------------------------------------------


def _when(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else ""


def _speedup(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "-"


def runs_table(runs: list[dict[str, Any]]) -> Table:
    """Kept runs, newest first: id, file, kernel, date, best speedup, calls, cost."""
    table = Table(title="runs (newest first)", title_justify="left")
    for col in ("id", "file", "kernel", "date", "best", "calls", "cost", "stopped"):
        table.add_column(col, overflow="fold", no_wrap=col in ("id", "date", "best", "calls"))
    for run in runs:
        table.add_row(
            escape(str(run.get("id", ""))),
            escape(str(run.get("path", ""))),
            escape(str(run.get("kernel", ""))),
            _when(run.get("started_at")),
            _speedup(run.get("best_speedup")),
            str(run.get("calls", 0)),
            f"${float(run.get('cost_usd') or 0):.4f}",
            escape(str(run.get("stopped_reason") or "running or interrupted")),
        )
    return table


def print_run(out: Console, run: dict[str, Any], *, prompts: bool) -> None:
    """One kept run (:meth:`accelopt_core.memory.RunStore.load`): its summary, the plans, the
    ranked candidates, the failures in full, and the transcript (each call's reply; its
    prompt too with ``prompts``)."""
    summary, report = run["run"], run["report"]
    out.print(
        f"[bold]run {escape(summary.get('id', ''))}[/] · {escape(str(summary.get('path', '')))}"
        f" :: {escape(str(summary.get('kernel', '')))} · {_when(summary.get('started_at'))} · "
        f"best {_speedup(summary.get('best_speedup'))} · {summary.get('calls', 0)} calls · "
        f"${float(summary.get('cost_usd') or 0):.4f} · "
        f"{escape(str(summary.get('stopped_reason') or 'running or interrupted'))}",
        soft_wrap=True,
    )
    plans = report.get("plans") or []
    out.print(f"\n[bold]plans ({len(plans)})[/]")
    for plan in plans:
        out.print(f"  call {plan.get('call')}: {escape(str(plan.get('title')))}")
    cands = report.get("candidates") or []
    out.print(f"\n[bold]ranked candidates ({len(cands)})[/]")
    for c in cands:
        out.print(
            f"  {c.get('rank')}. {_speedup(c.get('speedup'))} {escape(str(c.get('plan')))} "
            f"(id {c.get('id')}, call {c.get('call')})"
        )
    failed = report.get("failed_candidates") or []
    out.print(f"\n[bold]failed candidates ({len(failed)})[/]")
    print_failures(out, failed, verbose=True)
    out.print(f"\n[bold]transcript ({len(run['transcript'])} calls)[/]")
    for call in run["transcript"]:
        _print_call(out, call, prompts=prompts)


def _print_call(out: Console, call: dict[str, Any], *, prompts: bool) -> None:
    """One agent call: header line, then its prompt (with ``prompts``) and reply."""
    trimmed = f" · trimmed {', '.join(call['trimmed'])}" if call.get("trimmed") else ""
    detail = f": {call['detail']}" if call.get("detail") else ""
    out.print(
        f"\n[bold]call {call.get('n')}[/] {call.get('role')} · {escape(str(call.get('model')))} · "
        f"{call.get('prompt_tokens', 0)}+{call.get('completion_tokens', 0)} tokens · "
        f"{float(call.get('latency_s') or 0):.2f} s · ${float(call.get('cost_usd') or 0):.4f}"
        f"{trimmed} · {call.get('verdict')}{escape(detail)}",
        soft_wrap=True,
    )
    if prompts:
        for message in call.get("prompt") or []:
            out.print(f"[dim]--- {message.get('role')} ---[/]")
            out.print(escape(str(message.get("content", ""))), highlight=False, soft_wrap=True)
    if call.get("reply") is not None:
        out.print("[dim]--- reply ---[/]")
        out.print(escape(str(call["reply"])), highlight=False, soft_wrap=True)
    elif not call.get("prompt"):
        out.print("[dim](prompt and reply not stored)[/]")
