"""``accelopt runs``: the searches kept in ``<memory dir>/runs`` (issue 30).

``accelopt runs`` lists them, newest first (id, file, kernel, date, best speedup, agent calls,
cost); ``accelopt runs show ID`` (an id or a unique prefix of one) prints one run: its plans,
ranked candidates, failed candidates with their reasons, and the agents' transcript (each
call's reply; ``--prompts`` adds the prompts). ``--json`` prints the same as JSON on stdout.

Exit codes: 0 success, 1 unknown or ambiguous id, or a runs folder that cannot be read.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_cli import render_runs
from accelopt_core.memory import MemoryUnavailable, RunStore
from accelopt_core.settings import Settings

__all__ = ["add_runs_parser", "run_runs_command"]


def add_runs_parser(sub: Any) -> None:
    """``runs`` and ``runs show ID``."""
    runs = sub.add_parser(
        "runs",
        help="list kept searches, or show one (plans, candidates, failures, transcript)",
        description="List the searches kept in the memory directory's runs folder, newest "
        "first, or show one with 'runs show ID'.",
    )
    runs.add_argument("--memory-dir", help="memory directory (overrides accelopt.memoryDir)")
    runs.add_argument("--json", action="store_true", help="print machine-readable JSON")
    rsub = runs.add_subparsers(dest="runs_command")
    show = rsub.add_parser("show", help="one run in full")
    show.add_argument("run_id", metavar="ID", help="a run id, or a unique prefix of one")
    show.add_argument("--prompts", action="store_true", help="print each call's prompt too")
    show.add_argument(  # SUPPRESS: `runs --json show ID` keeps the flag given before
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON"
    )


def run_runs_command(
    args: argparse.Namespace, settings: Settings, out: Console, err: Console
) -> int:
    """Run ``accelopt runs [show ID]``; the exit status (0, or 1 with the reason on ``err``)."""
    store = RunStore.for_settings(settings)
    try:
        if getattr(args, "runs_command", None) == "show":
            run = store.load(args.run_id)
            if args.json:
                print(json.dumps(run, indent=2))
            else:
                render_runs.print_run(out, run, prompts=args.prompts)
            return 0
        runs = store.list()
    except KeyError as exc:
        err.print(f"[red]error:[/] {escape(str(exc.args[0]))}")
        return 1
    except MemoryUnavailable as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return 1
    if args.json:
        print(json.dumps(runs, indent=2))
    elif runs:
        render_runs.print_runs(out, runs)
    else:
        out.print(f"no runs kept in {escape(str(store.directory))}")
    return 0
