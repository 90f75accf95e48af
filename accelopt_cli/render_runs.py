"""Terminal rendering of why candidates failed and of kept runs (issue 30): the failures table
of ``accelopt optimize`` (reasons in full with ``--verbose``), the runs table of ``accelopt
runs`` and one run in full for ``accelopt runs show ID``.

Failures come as :class:`accelopt_core.search.FailedCandidate` records or their JSON form (a
saved run's report); everything prints to the :class:`rich.console.Console` it is given.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_cli.render_table import Col, print_table
from accelopt_core import devicefacts
from accelopt_core.search.report import FailedCandidate, failure_counts

#: Failures the short table shows; the rest are counted under it.
TABLE_ROWS = 10
#: Characters of a reason's first line shown in the short table.
REASON_WIDTH = 100


def _records(failed: Iterable[FailedCandidate | Mapping[str, Any]]) -> list[FailedCandidate]:
    return [f if isinstance(f, FailedCandidate) else FailedCandidate.from_dict(f) for f in failed]


def _first_line(text: str, width: int = REASON_WIDTH) -> str:
    """The first line of ``text``, its whitespace collapsed, shortened to ``width`` characters
    between words (``...`` marks the cut: no word, name or number is cut in half; one word
    longer than ``width`` is kept whole)."""
    lines = text.strip().splitlines()
    line = " ".join(lines[0].split()) if lines else ""
    short = textwrap.shorten(line, width, placeholder=" ...")
    return line if short == "..." or short == line else short


#: The columns of the failures table: plans and reasons wrap between words.
FAILURE_COLUMNS = (Col("stage"), Col("line"), Col("plan", wrap=True),
                   Col("reason", wrap=True))  # fmt: skip


def failure_rows(records: list[FailedCandidate]) -> list[list[str]]:
    """One row of :data:`FAILURE_COLUMNS` per failed candidate (at most :data:`TABLE_ROWS`):
    stage (with ``(fixer)`` / ``(re-timing)``), line, plan and the first line of the reason."""
    rows = []
    for f in records[:TABLE_ROWS]:
        stage = f.stage + (" (fixer)" if f.fixed else "") + (" (re-timing)" if f.retime else "")
        line = str(f.line) if f.line else ""
        rows.append([escape(stage), line, escape(f.plan), escape(_first_line(f.reason))])
    return rows


def print_failures(
    out: Console, failed: Iterable[FailedCandidate | Mapping[str, Any]], *, verbose: bool
) -> None:
    """The short failures table (:func:`failure_rows`, the rest counted under it; nothing when
    nothing failed), or with ``verbose`` every failure in full: its headline, the reason with
    all its lines and the numbered source lines around the failing one."""
    records = _records(failed)
    if not verbose:
        if records:
            counts = ", ".join(f"{stage} {n}" for stage, n in failure_counts(records).items())
            more = len(records) - TABLE_ROWS
            caption = f"{more} more: --verbose or --json lists them all" if more > 0 else None
            title = f"failed candidates: {counts}"
            print_table(out, title, FAILURE_COLUMNS, failure_rows(records),
                        caption=caption, title_justify="left")  # fmt: skip
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


#: The columns of the runs table: only the stopped reason wraps.
RUN_COLUMNS = (
    Col("id"), Col("file"), Col("kernel"), Col("date"), Col("best"), Col("calls"), Col("cost"),
    Col("stopped", wrap=True),
)  # fmt: skip


def run_rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    """Kept runs, newest first, one row of :data:`RUN_COLUMNS` each: id, file, kernel, date,
    best speedup, calls, cost ($) and why it stopped."""
    return [
        [
            escape(str(run.get("id", ""))),
            escape(str(run.get("path", ""))),
            escape(str(run.get("kernel", ""))),
            _when(run.get("started_at")),
            _speedup(run.get("best_speedup")),
            str(run.get("calls", 0)),
            f"${float(run.get('cost_usd') or 0):.4f}",
            escape(str(run.get("stopped_reason") or "running or interrupted")),
        ]
        for run in runs
    ]


def print_runs(out: Console, runs: list[dict[str, Any]]) -> None:
    """The runs table (:func:`run_rows`), never cutting a path, a name or a number."""
    print_table(out, "runs (newest first)", RUN_COLUMNS, run_rows(runs), title_justify="left")


def print_run(out: Console, run: dict[str, Any], *, prompts: bool) -> None:
    """One kept run (:meth:`accelopt_core.memory.RunStore.load`): its summary, the plans, the
    ranked candidates (with the property-based search's seed and counts,
    :func:`accelopt_core.devicefacts.search_line`), the failures in full, and the transcript (each call's reply; its
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
        out.print(f"  call {plan.get('call')}: {escape(str(plan.get('title')))}", soft_wrap=True)
    cands = report.get("candidates") or []
    out.print(f"\n[bold]ranked candidates ({len(cands)})[/]")
    for c in cands:
        out.print(
            f"  {c.get('rank')}. {_speedup(c.get('speedup'))} {escape(str(c.get('plan')))} "
            f"(id {c.get('id')}, call {c.get('call')})",
            soft_wrap=True,
        )
        result = c.get("result") if isinstance(c.get("result"), Mapping) else {}
        searched = devicefacts.search_line(result.get("metrics"))  # issue 52: its seed
        if searched:
            out.print(f"     {escape(searched)}", soft_wrap=True, highlight=False)
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
    for note in call.get("notes") or []:  # what reading the reply changed (issue 53)
        out.print(f"  note: {escape(str(note))}", highlight=False, soft_wrap=True)
    if prompts:
        for message in call.get("prompt") or []:
            out.print(f"[dim]--- {message.get('role')} ---[/]")
            out.print(escape(str(message.get("content", ""))), highlight=False, soft_wrap=True)
    if call.get("reply") is not None:
        out.print("[dim]--- reply ---[/]")
        out.print(escape(str(call["reply"])), highlight=False, soft_wrap=True)
    elif not call.get("prompt"):
        out.print("[dim](prompt and reply not stored)[/]")
