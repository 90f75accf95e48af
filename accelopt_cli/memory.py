"""``accelopt memory ...``: inspect and manage the optimization memory from a terminal.

Sub-commands: ``list`` (``--hacks``: only the reward-hack experiences), ``show ID``,
``search TEXT``, ``export FILE.jsonl``, ``import FILE.jsonl``, ``clear``, ``recheck``
(experiences verified by a judge older than the current ``JUDGE_VERSION``; ``--drop`` removes
them). The memory lives in ``<memory dir>/memory`` (setting ``accelopt.memoryDir``,
``$ACCELOPT_MEMORY_DIR``, else the user cache directory); ``--memory-dir DIR`` overrides it.
Tables are printed with rich on a terminal; when stdout is a pipe or a file, ``list`` and ``search``
print tab-separated lines under a header instead (no width to fit); ``--json`` prints
machine-readable JSON on stdout.

Exit codes: 0 success, 1 failure (memory unusable, unknown id, bad import file, clear refused),
2 bad command line (argparse).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_cli import render
from accelopt_core.memory import Experience, MemoryUnavailable, OptimizationMemory
from accelopt_core.onsite.protocol import JUDGE_VERSION
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


def _sub_options(parser: argparse.ArgumentParser) -> None:
    """The options every sub-command takes after its own: ``--json`` and ``--memory-dir``."""
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    _dir_option(parser, top=False)


def _add_list_parser(msub: Any) -> None:
    """``memory list`` and its filters."""
    p = msub.add_parser("list", help="list experiences, newest first")
    p.add_argument("--backend", choices=["triton", "nki"], help="only this backend")
    p.add_argument("--device", help="only experiences measured on this device (exact name)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--negative", action="store_true", help="only negative experiences")
    kind.add_argument("--positive", action="store_true", help="only positive experiences")
    kind.add_argument(
        "--hacks",
        action="store_true",
        help="only reward-hack experiences (candidates the judge caught): rule, kernel, when, plan",
    )
    p.add_argument("--limit", type=int, default=None, metavar="N", help="show at most N")
    _sub_options(p)


def _add_recheck_parser(msub: Any) -> None:
    """``memory recheck [--drop]``."""
    p = msub.add_parser(
        "recheck",
        help=f"list experiences verified by a judge older than version {JUDGE_VERSION}",
        description="List the experiences verified by a judge older than the current one "
        f"(version {JUDGE_VERSION}); a weaker judge may have let a reward hack through. Without "
        "--drop nothing changes.",
    )
    p.add_argument("--drop", action="store_true", help="remove them from the memory")
    _sub_options(p)


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
        "--settings",
        metavar="FILE",
        help="settings file over the project file: JSON (the accelopt section) or TOML",
    )
    msub = mem.add_subparsers(dest="memory_command", required=True, metavar="COMMAND")

    _add_list_parser(msub)

    p = msub.add_parser("show", help="show one experience with its rule and diff")
    p.add_argument("id", metavar="ID", help="experience id or a unique prefix of it")
    _sub_options(p)

    p = msub.add_parser("search", help="experiences most similar to a text or code snippet")
    p.add_argument("text", metavar="TEXT")
    p.add_argument("-k", type=int, default=10, metavar="N", help="how many (default 10)")
    p.add_argument("--backend", choices=["triton", "nki"], help="only this backend")
    p.add_argument("--device", help="prefer experiences measured on this device")
    _sub_options(p)

    p = msub.add_parser("export", help="write every experience to a JSON-lines file")
    p.add_argument("file", metavar="FILE.jsonl")
    _sub_options(p)

    p = msub.add_parser("import", help="merge experiences from a JSON-lines file")
    p.add_argument("file", metavar="FILE.jsonl")
    _sub_options(p)

    p = msub.add_parser("clear", help="delete every experience")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    _sub_options(p)

    _add_recheck_parser(msub)
    return mem


def _summary(exp: Experience) -> dict[str, Any]:
    return {k: v for k, v in exp.to_dict().items() if k not in _SOURCES}


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


@dataclass
class _Session:
    """What every sub-command handler works with: the open memory and the two consoles."""

    memory: OptimizationMemory
    out: Console
    err: Console
    as_json: bool

    @property
    def where(self) -> str:
        return str(self.memory.directory)

    def fail(self, message: str) -> int:
        """Print ``error: message`` on stderr (``message`` is rich markup); exit status 1."""
        self.err.print(f"[red]error:[/] {message}")
        return 1


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
    try:
        memory = OptimizationMemory(directory)
    except MemoryUnavailable as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return 1
    session = _Session(memory, out, err, bool(getattr(args, "json", False)))
    try:
        handler = _HANDLERS.get(command or "")
        if handler is None:
            return session.fail(f"unknown memory command {command!r}")
        return handler(args, session)
    except MemoryUnavailable as exc:
        return session.fail(escape(str(exc)))
    finally:
        memory.close()


def _list(args: argparse.Namespace, s: _Session) -> int:
    positive = False if args.negative else True if args.positive else None
    hacks = bool(getattr(args, "hacks", False))
    exps = s.memory.all(
        backend=args.backend, device=args.device, positive=positive, hack=True if hacks else None
    )
    if args.limit is not None:
        exps = exps[: max(args.limit, 0)]
    what = "reward-hack experiences" if hacks else "experiences"
    if s.as_json:
        _print_json([_summary(e) for e in exps])
    elif not exps:
        s.out.print(f"no {what} in the optimization memory at {escape(s.where)}")
    elif hacks:
        render.print_hacks(s.out, exps, f"{len(exps)} of {len(s.memory)} experiences are {what}")
    else:
        title = f"{len(exps)} of {len(s.memory)} experiences"
        render.print_experiences(s.out, [(e, None) for e in exps], title)
    return 0


def _recheck(args: argparse.Namespace, s: _Session) -> int:
    old = s.memory.older_judged(JUDGE_VERSION)
    dropped = s.memory.remove_many([e.id for e in old]) if args.drop and old else 0
    if s.as_json:
        rows = [_summary(e) for e in old]
        _print_json({"judge_version": JUDGE_VERSION, "older": rows, "dropped": dropped})
        return 0
    if not old:
        s.out.print(f"every experience was verified by judge version {JUDGE_VERSION}")
        return 0
    title = (
        f"{len(old)} of {len(s.memory) + dropped} experiences judged before version {JUDGE_VERSION}"
    )
    render.print_experiences(s.out, [(e, None) for e in old], title)
    if args.drop:
        s.out.print(f"dropped {dropped} experiences judged before version {JUDGE_VERSION}")
    else:
        s.out.print(
            f"nothing changed; run `accelopt memory recheck --drop` to remove these {len(old)}"
        )
    return 0


def _show(args: argparse.Namespace, s: _Session) -> int:
    try:
        exp = s.memory.get(args.id)
    except ValueError as exc:
        return s.fail(escape(str(exc)))
    if exp is None:
        return s.fail(f"no experience with id {escape(args.id)} in {escape(s.where)}")
    if s.as_json:
        _print_json(exp.to_dict())
    else:
        render.print_experience(s.out, exp)
    return 0


def _search(args: argparse.Namespace, s: _Session) -> int:
    if args.k < 1:
        return s.fail("-k must be >= 1")
    hits = s.memory.search(args.text, args.k, backend=args.backend, device=args.device)
    if s.as_json:
        _print_json([{"similarity": round(sim, 6), **_summary(e)} for e, sim in hits])
    elif not hits:
        s.out.print("no similar experience")
    else:
        render.print_experiences(s.out, list(hits), f"best {len(hits)} matches")
    return 0


def _export(args: argparse.Namespace, s: _Session) -> int:
    try:
        n = s.memory.export_jsonl(args.file)
    except OSError as exc:
        return s.fail(f"cannot write {escape(args.file)}: {escape(str(exc))}")
    if s.as_json:
        _print_json({"exported": n, "file": args.file})
    else:
        s.out.print(f"exported {n} experiences to {escape(args.file)}")
    return 0


def _import(args: argparse.Namespace, s: _Session) -> int:
    try:
        n = s.memory.import_jsonl(args.file)
    except OSError as exc:
        return s.fail(f"cannot read {escape(args.file)}: {escape(str(exc))}")
    except ValueError as exc:
        return s.fail(escape(str(exc)))
    if s.as_json:
        _print_json({"imported": n, "file": args.file, "total": len(s.memory)})
    else:
        s.out.print(
            f"imported {n} experiences from {escape(args.file)} ({len(s.memory)} in memory)"
        )
    return 0


def _clear(args: argparse.Namespace, s: _Session) -> int:
    count = len(s.memory)
    if not args.yes:
        if not sys.stdin.isatty():
            return s.fail(
                f"refusing to clear {count} experiences in {escape(s.where)} "
                "without --yes (stdin is not a terminal)"
            )
        from rich.prompt import Confirm

        question = f"Delete all {count} experiences in {escape(s.where)}?"
        if not Confirm.ask(question, default=False, console=s.out):
            s.out.print("nothing deleted")
            return 1
    n = s.memory.clear()
    if s.as_json:
        _print_json({"cleared": n})
    else:
        s.out.print(f"deleted {n} experiences")
    return 0


#: The ``memory`` sub-commands: name -> handler(args, session) -> exit status.
_HANDLERS: dict[str, Callable[[argparse.Namespace, _Session], int]] = {
    "list": _list,
    "show": _show,
    "search": _search,
    "export": _export,
    "import": _import,
    "clear": _clear,
    "recheck": _recheck,
}
