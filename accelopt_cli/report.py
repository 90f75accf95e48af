"""``accelopt report [FILE_OR_RUN_ID]``: a saved search as one HTML file (issue 32).

The search is a run kept in ``<memory dir>/runs`` (its id or a unique prefix, or the last
search on a kernel file; the newest run without an argument) or a JSON report
(``accelopt optimize --json > FILE.json``). The page (:mod:`accelopt_core.report`) is
self-contained: open it in any browser, no network needed. ``accelopt optimize --report
FILE.html`` writes the same page right after its search (:func:`write_search_report`).

Exit codes: 0 written, 1 no such search, a runs folder that cannot be read, or a file that
cannot be written (the reason on stderr).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_core.settings import Settings

__all__ = ["add_report_parser", "run_report_command", "write_search_report"]


def add_report_parser(sub: Any) -> None:
    """``report [FILE_OR_RUN_ID] [--kernel K] [-o FILE.html]``."""
    rep = sub.add_parser(
        "report",
        help="write a saved search as one self-contained HTML page (tree, charts, candidates)",
        description="Write the picture of a search kept in the memory directory's runs folder "
        "(a run id, the last search on a kernel file, or the newest) or saved as JSON, as one "
        "HTML file that opens offline.",
    )
    rep.add_argument(
        "source",
        nargs="?",
        metavar="FILE_OR_RUN_ID",
        help="a run id (accelopt runs), a kernel file (its last search) or a JSON report; "
        "default: the newest run",
    )
    rep.add_argument("--kernel", help="with a kernel file: the kernel whose search to draw")
    rep.add_argument(
        "-o", "--output", metavar="FILE.html", help="where to write (default: ./<run>.html)"
    )
    rep.add_argument("--memory-dir", help="memory directory (overrides accelopt.memoryDir)")


def write_search_report(report: dict[str, Any], path: str | Path, err: Console) -> Path | None:
    """Write the HTML page of ``report`` (:meth:`SearchReport.to_dict`) to ``path``; the file,
    or None with the reason printed on ``err`` (Plotly missing, a file that cannot be
    written)."""
    from accelopt_core.report import ReportUnavailable, build_view, write_html

    try:
        return write_html(build_view(report), path)
    except ReportUnavailable as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
    except OSError as exc:
        err.print(f"[red]error:[/] cannot write the search report {escape(str(path))}: {exc}")
    return None


def _default_name(report: dict[str, Any], origin: str) -> str:
    run = str(report.get("run_id") or "")
    stem = Path(str(report.get("path") or "search")).stem
    name = f"{stem}-{report.get('kernel') or 'kernel'}" + (f"-{run}" if run else "")
    return re.sub(r"[^\w.-]+", "_", name) + ".html"


def run_report_command(
    args: argparse.Namespace, settings: Settings, out: Console, err: Console
) -> int:
    """Run ``accelopt report``; the exit status (0, or 1 with the reason on ``err``)."""
    from accelopt_core.memory import MemoryUnavailable, RunStore
    from accelopt_core.report import ReportNotFound, find_report

    runs = RunStore.for_settings(settings)
    try:
        report, origin = find_report(args.source, runs, args.kernel)
    except (ReportNotFound, MemoryUnavailable) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return 1
    target = Path(args.output or _default_name(report, origin))
    written = write_search_report(report, target, err)
    if written is None:
        return 1
    out.print(f"search report of {escape(origin)}: {escape(str(written))}", soft_wrap=True)
    return 0
