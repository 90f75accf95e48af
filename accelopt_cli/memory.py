"""``accelopt memory ...``: inspect and manage the optimization memory from a terminal.

Sub-commands: ``list``, ``show ID``, ``search TEXT``, ``export FILE.jsonl``, ``import FILE.jsonl``,
``clear``. The memory lives in ``<memory dir>/memory`` (setting ``accelopt.memoryDir``,
``$ACCELOPT_MEMORY_DIR``, else the user cache directory); ``--memory-dir DIR`` overrides it.
Tables are printed with rich; ``--json`` prints machine-readable JSON on stdout instead.

Exit codes: 0 success, 1 failure (memory unusable, unknown id, bad import file, clear refused),
2 bad command line (argparse).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from accelopt_core.memory import Experience, MemoryUnavailable, OptimizationMemory
from accelopt_core.settings import Settings

__all__ = ["add_memory_parser", "run_memory_command"]

_SOURCES = ("slow_source", "fast_source")


def _dir_option(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # The sub-commands accept the option too; SUPPRESS keeps them from overwriting the value
    # given before the sub-command with their default.
    parser.add_argument(
        "--memory-dir",
        metavar="DIR",
        default=None if top else argparse.SUPPRESS,
        help="memory directory (overrides accelopt.memoryDir and $ACCELOPT_MEMORY_DIR)",
    )


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def add_memory_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``memory`` and its sub-commands on an argparse sub-parsers object.

    The chosen sub-command is stored in ``args.memory_command``. Returns the ``memory`` parser.
    """
    mem = subparsers.add_parser(
        "memory",
        help="inspect and manage the optimization memory",
        description="Inspect and manage the optimization memory (experiences: slow->fast "
        "rewrites with their rules).",
    )
    _dir_option(mem, top=True)
    mem.add_argument(
        "--settings", metavar="FILE", help="JSON file with the accelopt settings section"
    )
    msub = mem.add_subparsers(dest="memory_command", required=True, metavar="COMMAND")

    p = msub.add_parser("list", help="list experiences, newest first")
    p.add_argument("--backend", choices=["triton", "nki"], help="only this backend")
    p.add_argument("--device", help="only experiences measured on this device (exact name)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--negative", action="store_true", help="only negative experiences")
    kind.add_argument("--positive", action="store_true", help="only positive experiences")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="show at most N")
    _json_option(p)
    _dir_option(p, top=False)

    p = msub.add_parser("show", help="show one experience with its rule and diff")
    p.add_argument("id", metavar="ID", help="experience id or a unique prefix of it")
    _json_option(p)
    _dir_option(p, top=False)

    p = msub.add_parser("search", help="experiences most similar to a text or code snippet")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("-k", type=int, default=10, metavar="N", help="how many (default 10)")
    p.add_argument("--backend", choices=["triton", "nki"], help="only this backend")
    p.add_argument("--device", help="prefer experiences measured on this device")
    _json_option(p)
    _dir_option(p, top=False)

    p = msub.add_parser("export", help="write every experience to a JSON-lines file")
    p.add_argument("file", metavar="FILE.jsonl")
    _json_option(p)
    _dir_option(p, top=False)

    p = msub.add_parser("import", help="merge experiences from a JSON-lines file")
    p.add_argument("file", metavar="FILE.jsonl")
    _json_option(p)
    _dir_option(p, top=False)

    p = msub.add_parser("clear", help="delete every experience")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    _json_option(p)
    _dir_option(p, top=False)
    return mem


def _summary(exp: Experience) -> dict[str, Any]:
    return {k: v for k, v in exp.to_dict().items() if k not in _SOURCES}


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _table(rows: list[tuple[Experience, float | None]], title: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("id", no_wrap=True, min_width=16, style="cyan")
    table.add_column("±", no_wrap=True)
    if any(sim is not None for _, sim in rows):
        table.add_column("similarity", justify="right", no_wrap=True)
    table.add_column("speedup", justify="right", no_wrap=True)
    table.add_column("seen", justify="right", no_wrap=True)
    table.add_column("backend", no_wrap=True)
    table.add_column("kernel")
    table.add_column("device / timing")
    table.add_column("title")
    table.add_column("observed", no_wrap=True)
    for exp, sim in rows:
        cells = [exp.id, "[green]+[/]" if exp.positive else "[red]-[/]"]
        if sim is not None:
            cells.append(f"{sim:.3f}")
        cells += [
            f"{exp.speedup:.2f}x",
            str(exp.seen),
            exp.backend,
            escape(exp.kernel_name),
            escape(f"{exp.device} / {exp.timing}"),
            escape(exp.title),
            _when(exp.updated_at),
        ]
        table.add_row(*cells)
    return table


def _show(out: Console, exp: Experience) -> None:
    sign = "positive" if exp.positive else "negative"
    head = (
        f"[bold]{escape(exp.title)}[/]  ({sign}, {exp.speedup:.2f}x, seen {exp.seen}x)\n"
        f"id {exp.id} · {exp.backend} · kernel {escape(exp.kernel_name)} · "
        f"{escape(exp.device)} ({escape(exp.timing)} timing)\n"
        f"first {_when(exp.created_at)} · last {_when(exp.updated_at)} · "
        f"source {exp.source_fingerprint[:12]}"
    )
    out.print(Panel(head, title="experience", title_align="left"))
    out.print("[bold]rule[/]")
    out.print(escape(exp.rule) or "(none)")
    if exp.plan.strip():
        out.print("[bold]plan[/]")
        out.print(escape(exp.plan))
    diff = "".join(
        difflib.unified_diff(
            exp.slow_source.splitlines(keepends=True),
            exp.fast_source.splitlines(keepends=True),
            fromfile="slow",
            tofile="fast",
        )
    )
    out.print("[bold]slow -> fast[/]")
    if diff:
        out.print(Syntax(diff, "diff", word_wrap=True))
    else:
        out.print("(identical sources)")


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def run_memory_command(
    args: argparse.Namespace,
    settings: Settings,
    *,
    out: Console | None = None,
    err: Console | None = None,
) -> int:
    """Run the ``memory`` sub-command parsed into ``args`` against ``settings``; returns the
    exit code (0 ok, 1 failure). Never raises for bad input or an unusable memory: the reason
    is printed on stderr. ``out`` / ``err`` default to consoles on stdout / stderr."""
    out = out or Console()
    err = err or Console(stderr=True)
    if getattr(args, "memory_dir", None):
        settings = settings.model_copy(update={"memory_dir": args.memory_dir})
    directory = settings.resolved_memory_dir() / "memory"
    command = getattr(args, "memory_command", None)
    as_json = bool(getattr(args, "json", False))
    try:
        memory = OptimizationMemory(directory)
    except MemoryUnavailable as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return 1
    try:
        return _run(command, args, memory, out, err, as_json)
    except MemoryUnavailable as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return 1
    finally:
        memory.close()


def _run(
    command: str | None,
    args: argparse.Namespace,
    memory: OptimizationMemory,
    out: Console,
    err: Console,
    as_json: bool,
) -> int:
    where = str(memory.directory)
    if command == "list":
        positive = False if args.negative else True if args.positive else None
        exps = memory.all(backend=args.backend, device=args.device, positive=positive)
        if args.limit is not None:
            exps = exps[: max(args.limit, 0)]
        if as_json:
            _print_json([_summary(e) for e in exps])
        elif not exps:
            out.print(f"no experiences in the optimization memory at {escape(where)}")
        else:
            total = len(memory)
            out.print(_table([(e, None) for e in exps], f"{len(exps)} of {total} experiences"))
        return 0

    if command == "show":
        try:
            exp = memory.get(args.id)
        except ValueError as exc:
            err.print(f"[red]error:[/] {escape(str(exc))}")
            return 1
        if exp is None:
            err.print(f"[red]error:[/] no experience with id {escape(args.id)} in {escape(where)}")
            return 1
        if as_json:
            _print_json(exp.to_dict())
        else:
            _show(out, exp)
        return 0

    if command == "search":
        if args.k < 1:
            err.print("[red]error:[/] -k must be >= 1")
            return 1
        hits = memory.search(args.text, args.k, backend=args.backend, device=args.device)
        if as_json:
            _print_json([{"similarity": round(s, 6), **_summary(e)} for e, s in hits])
        elif not hits:
            out.print("no similar experience")
        else:
            out.print(_table([(e, s) for e, s in hits], f"best {len(hits)} matches"))
        return 0

    if command == "export":
        try:
            n = memory.export_jsonl(args.file)
        except OSError as exc:
            err.print(f"[red]error:[/] cannot write {escape(args.file)}: {escape(str(exc))}")
            return 1
        if as_json:
            _print_json({"exported": n, "file": args.file})
        else:
            out.print(f"exported {n} experiences to {escape(args.file)}")
        return 0

    if command == "import":
        try:
            n = memory.import_jsonl(args.file)
        except OSError as exc:
            err.print(f"[red]error:[/] cannot read {escape(args.file)}: {escape(str(exc))}")
            return 1
        except ValueError as exc:
            err.print(f"[red]error:[/] {escape(str(exc))}")
            return 1
        if as_json:
            _print_json({"imported": n, "file": args.file, "total": len(memory)})
        else:
            out.print(
                f"imported {n} experiences from {escape(args.file)} ({len(memory)} in memory)"
            )
        return 0

    if command == "clear":
        count = len(memory)
        if not args.yes:
            if not sys.stdin.isatty():
                err.print(
                    f"[red]error:[/] refusing to clear {count} experiences in {escape(where)} "
                    "without --yes (stdin is not a terminal)"
                )
                return 1
            from rich.prompt import Confirm

            if not Confirm.ask(
                f"Delete all {count} experiences in {escape(where)}?", default=False, console=out
            ):
                out.print("nothing deleted")
                return 1
        n = memory.clear()
        if as_json:
            _print_json({"cleared": n})
        else:
            out.print(f"deleted {n} experiences")
        return 0

    err.print(f"[red]error:[/] unknown memory command {command!r}")
    return 1
