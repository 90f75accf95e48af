"""``accelopt bench ROOT``: optimize every definition of a FlashInfer-Bench dataset (issue 35).

For each selected definition (``--definition NAME``, ``--op-type T``; all by default) the best
Triton solution (:func:`accelopt_core.kernelfile.fib_data.best_solution`) is bound to the
definition and its workloads and searched exactly as ``accelopt optimize SOLUTION.json`` would,
with ``optimize``'s options; ``--max-wall-s`` and ``--max-tokens`` are budgets per definition.
One line of progress per definition on stderr, then one table row per definition (baseline,
best, speedup, % of peak where known, verdict, time, cost): the "per-task improvement" table of
the AccelOpt paper. ``--json`` prints the rows as one JSON object, ``--csv FILE`` writes them.

Resumable: each finished definition is saved in a state file (``ROOT/.accelopt/bench.json``, or
``--state FILE``; FIB's loader never reads ``.accelopt/``) under a key of the solution's text
and the search settings; a later run with the same key skips it and shows the saved row
(``--fresh`` runs everything again). ``--write`` writes each improvement back as
``optimize --write`` does (a new ``<name>_accelopt`` solution and FIB traces).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_cli.render_table import Col, print_table
from accelopt_core.settings import Settings

__all__ = ["BENCH_COMMANDS", "COLUMNS", "add_bench_parser", "run_bench_command"]

#: The columns of the table, the CSV and every JSON row, in order.
COLUMNS = (
    "definition", "op_type", "solution", "baseline_ms", "best_ms", "speedup", "pct_of_peak",
    "verdict", "wall_s", "cost_usd", "tokens", "timing", "sizes", "written", "resumed",
)  # fmt: skip
_STATE_VERSION = 1
#: The columns of the human table (names never wrap; the verdict and the time may).
TABLE_COLUMNS = (
    Col("definition"), Col("solution"), Col("baseline (ms)"), Col("best (ms)"), Col("speedup"),
    Col("% of peak"), Col("verdict", wrap=True), Col("time (s)", wrap=True), Col("cost ($)"),
)  # fmt: skip


def add_bench_parser(
    sub: Any,
    *,
    search_options: Callable[[argparse.ArgumentParser], None],
    gpu_option: Callable[[argparse.ArgumentParser], None],
    common_options: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Add ``accelopt bench`` with ``optimize``'s search options (the callables of
    :mod:`accelopt_cli.main`)."""
    p = sub.add_parser(
        "bench",
        help="optimize the best Triton solution of each definition of a FlashInfer-Bench dataset",
    )
    p.add_argument("path", metavar="ROOT", help="dataset root (definitions/, solutions/, ...)")
    p.add_argument("--definition", action="append", default=[], metavar="NAME",
                   help="only this definition (repeatable)")  # fmt: skip
    p.add_argument("--op-type", action="append", default=[], metavar="T",
                   help="only definitions of this op_type (repeatable)")  # fmt: skip
    search_options(p)
    p.add_argument("--write", action="store_true",
                   help="add each improvement as a new <name>_accelopt solution with traces")  # fmt: skip
    p.add_argument("--csv", metavar="FILE", help="also write the rows as CSV")
    p.add_argument(
        "--state", metavar="FILE", help="resume state (default ROOT/.accelopt/bench.json)"
    )
    p.add_argument("--fresh", action="store_true", help="ignore the saved state; run everything")
    gpu_option(p)
    common_options(p)
    export = sub.add_parser(
        "export",
        help="write a FlashInfer-Bench solution's sources beside its JSON, to edit them",
        description="Write the sources of SOLUTION.json to SOLUTION/ beside it (main.py, ...). "
        "The exported entry file is bound to the solution's definition and workloads: "
        "`accelopt optimize SOLUTION/main.py` and the language server work on it, and --write "
        "adds a new solution as for the JSON.",
    )
    export.add_argument("path", metavar="SOLUTION.json")


def run_export_command(
    args: argparse.Namespace, settings: Settings, out: Console, err: Console
) -> int:
    """Run ``accelopt export``: 0 when the sources are (already) there, 1 otherwise."""
    from accelopt_core.kernelfile import KernelFileError
    from accelopt_core.kernelfile.fib import export_sources

    try:
        written = export_sources(args.path)
    except KernelFileError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        return 1
    folder = Path(args.path).resolve().with_suffix("")
    for path in written:
        out.print(f"wrote {path}", highlight=False)
    if not written:
        out.print(f"the sources are already in {folder}", highlight=False)
    return 0


def run_bench_command(
    args: argparse.Namespace, settings: Settings, out: Console, err: Console
) -> int:
    """Run ``accelopt bench``; 0 when every selected definition ran (whatever its verdict), 1
    when the dataset cannot be read or a definition failed (its row says why)."""
    return asyncio.run(bench(args, settings, out, err))


def _selected(root: Path, args: argparse.Namespace, err: Console) -> list[tuple[str, str]] | None:
    """(definition, op_type) to run, or None (reason printed) for an unknown name."""
    from accelopt_core.kernelfile.fib_data import list_definitions

    found = [(name, op) for name, op, _ in list_definitions(root)]
    known = {name for name, _ in found}
    unknown = [n for n in args.definition if n not in known]
    if unknown:
        err.print(f"[red]error:[/] {escape(str(root))}: no definition named "
                  f"{', '.join(unknown)} (known: {', '.join(sorted(known)) or 'none'})")  # fmt: skip
        return None
    if args.definition:
        found = [f for f in found if f[0] in args.definition]
    if args.op_type:
        found = [f for f in found if f[1] in args.op_type]
    return found


def _signature(settings: Settings, solution: Path) -> str:
    """What a saved row depends on: the solution's bytes and the search settings."""
    parts = {
        "solution": hashlib.sha256(solution.read_bytes()).hexdigest(),
        "search": settings.search.model_dump(mode="json"),
        "llm": settings.llm.model if settings.llm.configured else None,
        "target": settings.target,
        "gpu": settings.gpu_name,
        "sizes": settings.evaluation.sizes,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class _State:
    """The resume state file: definition -> {"key", "row"}; unreadable or unwritable files
    become a warning, never a failure."""

    def __init__(self, path: Path, err: Console, fresh: bool) -> None:
        self.path, self.err, self.rows = path, err, {}
        try:
            data = json.loads(path.read_text("utf-8")) if not fresh else {}
            if data.get("version") == _STATE_VERSION and isinstance(data.get("rows"), dict):
                self.rows = data["rows"]
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError) as exc:
            err.print(f"[yellow]warning:[/] ignoring the bench state {path}: {escape(str(exc))}")

    def saved(self, definition: str, key: str) -> dict | None:
        entry = self.rows.get(definition)
        return dict(entry["row"]) if isinstance(entry, dict) and entry.get("key") == key else None

    def save(self, definition: str, key: str, row: dict) -> None:
        self.rows[definition] = {"key": key, "row": row}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"version": _STATE_VERSION, "rows": self.rows}, indent=1))
            os.replace(tmp, self.path)
        except OSError as exc:
            self.err.print(f"[yellow]warning:[/] cannot save the bench state: {escape(str(exc))}")


def _row(definition: str, op_type: str, **fields: Any) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(definition=definition, op_type=op_type, resumed=False, **fields)
    return row


def _report_row(definition: str, op_type: str, solution: str, report: Any) -> dict:
    """The row of a finished search."""
    base = report.baseline.result
    best = report.best
    if best is not None:
        verdict = f"faster: {best.plan_title}"
    elif base.ok:
        verdict = "no faster candidate"
    else:
        verdict = f"baseline {base.status}: {base.message or ''}".strip()
    chosen = best.result if best is not None else base
    return _row(
        definition, op_type,
        solution=solution,
        baseline_ms=base.latency_ms if base.ok else None,
        best_ms=chosen.latency_ms if chosen.ok else None,
        speedup=round(best.speedup, 4) if best is not None else (1.0 if base.ok else None),
        pct_of_peak=chosen.pct_of_peak,
        verdict=verdict,
        wall_s=round(report.wall_s, 1),
        cost_usd=round(report.cost_usd, 6),
        tokens=int((report.tokens.get("total") or {}).get("total_tokens", 0) or 0),
        timing=report.timing,
        sizes=base.metrics.get("sizes"),
    )  # fmt: skip


async def _one(
    args: argparse.Namespace, settings: Settings, root: Path, definition: str, op_type: str,
    solution: tuple[str, Path], err: Console,
) -> dict:  # fmt: skip
    """Search the solution of one definition; its row (an error row when it cannot run)."""
    from accelopt_cli.kernel_args import choose_kernel, load_kernel
    from accelopt_cli.optimize import run_search, write_best

    name, path = solution
    kf = load_kernel(str(path), err, None, str(root))
    kernel = choose_kernel(kf, None, err) if kf is not None else None
    if kernel is None:
        return _row(definition, op_type, solution=name, verdict="error: cannot bind (see above)")
    search_args = argparse.Namespace(**{**vars(args), "kernel": None})
    report = await run_search(search_args, settings, kf, kernel, err)
    if report is None:
        return _row(definition, op_type, solution=name, verdict="error: search failed (see above)")
    row = _report_row(definition, op_type, name, report)
    written = write_best(kf, report, err) if args.write and report.best is not None else None
    if written is not None:
        row["written"] = Path(written).stem
    return row


async def bench(args: argparse.Namespace, settings: Settings, out: Console, err: Console) -> int:
    """The body of :func:`run_bench_command`, on a running event loop."""
    from accelopt_core.kernelfile import KernelFileError
    from accelopt_core.kernelfile.fib_data import best_solution, triton_solutions

    root = Path(args.path).resolve()
    if not (root / "definitions").is_dir():
        err.print(f"[red]error:[/] {escape(args.path)}: not a FlashInfer Trace dataset (no "
                  "definitions/); give the dataset root")  # fmt: skip
        return 1
    selected = _selected(root, args, err)
    if selected is None:
        return 1
    try:
        solutions, broken = triton_solutions(root)
    except KernelFileError as exc:  # the package is missing
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        return 1
    state = _State(Path(args.state) if args.state else root / ".accelopt" / "bench.json", err,
                   args.fresh)  # fmt: skip
    rows = []
    for index, (definition, op_type) in enumerate(selected, 1):
        where = f"[{index}/{len(selected)}] {definition}"
        if definition not in solutions:
            why = broken.get(definition) or "no Triton solution"
            err.print(f"{escape(where)}: {escape(why)}", highlight=False)
            rows.append(_row(definition, op_type, verdict=f"error: {why}"))
            continue
        solution = best_solution(root, definition, solutions[definition])
        key = _signature(settings, solution[1])
        saved = state.saved(definition, key)
        if saved is not None:
            err.print(f"{escape(where)}: finished earlier, skipped ({saved['verdict']})")
            rows.append({**saved, "resumed": True})
            continue
        err.print(f"{escape(where)}: optimizing {escape(solution[0])}", highlight=False)
        row = await _one(args, settings, root, definition, op_type, solution, err)
        rows.append(row)
        if not str(row["verdict"]).startswith("error"):
            state.save(definition, key, row)
    _emit(args, out, err, root, rows)
    return 1 if any(str(r["verdict"]).startswith("error") for r in rows) else 0


def _cell(value: Any, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def _emit(args: argparse.Namespace, out: Console, err: Console, root: Path, rows: list) -> None:
    """The table (or ``--json``), the CSV file, and the notes on timing and scaled sizes."""
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            for row in rows:
                writer.writerow({k: json.dumps(v) if isinstance(v, dict) else v
                                 for k, v in row.items() if k in COLUMNS})  # fmt: skip
    if args.json:
        print(json.dumps({"root": str(root), "rows": rows}, indent=2))
        return
    table_rows = [
        [
            escape(str(r["definition"])), escape(_cell(r["solution"])),
            _cell(r["baseline_ms"], "{:.4g}"), _cell(r["best_ms"], "{:.4g}"),
            _cell(r["speedup"], "{:.2f}x"), _cell(r["pct_of_peak"], "{:.1f}"),
            escape(str(r["verdict"])),
            _cell(r["wall_s"], "{:.0f}") + (" (earlier)" if r.get("resumed") else ""),
            _cell(r["cost_usd"], "{:.4f}"),
        ]
        for r in rows
    ]  # fmt: skip
    print_table(out, f"FlashInfer-Bench: {escape(root.name)}", TABLE_COLUMNS, table_rows)
    for r in rows:
        sizes = r.get("sizes") or {}
        if sizes:
            pairs = ", ".join(f"{k} {v[0]}\u2192{v[1]}" for k, v in sizes.items())
            line = f"{r['definition']}: sizes scaled for the CPU interpreter: {pairs}"
            out.print(escape(line), soft_wrap=True)
    if any(r.get("timing") == "interpreter" for r in rows):
        out.print("timed under the Triton interpreter on CPU: these latencies say nothing about "
                  "GPU speed, and % of peak is not computed")  # fmt: skip


#: The commands of this module (``accelopt_cli.main.COMMANDS`` takes them).
BENCH_COMMANDS = {"bench": run_bench_command, "export": run_export_command}
