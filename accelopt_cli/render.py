"""Terminal rendering of the ``accelopt`` commands (rich): the live search progress line, the
candidates and experiences tables, the search and profile summaries, the target check report,
kernel-file diagnostics and diffs.

Everything here prints to the :class:`rich.console.Console` it is given (``out`` for results,
``err`` for progress, warnings and errors) and decides nothing: exit codes and ``--json`` output
belong to the command modules.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from accelopt_cli.render_device import (
    checked_lines,
    device_lines,
    ranking_needs_timing,
    result_warnings,
)
from accelopt_cli.render_table import Col, print_table
from accelopt_core import devicefacts
from accelopt_core.kernelfile import KernelFile
from accelopt_core.memory import Experience, timing_label
from accelopt_core.onsite.judge.compare import shape_text
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search.phases import phases_line
from accelopt_core.search.report import HOST_TIMING_NOTES, metrics_lines
from accelopt_core.textdiff import unified_diff

_SEVERITY_COLORS = {"error": "red", "warning": "yellow"}


def engine_log(err: Console) -> Callable[[str, str], None]:
    """The engine's ``log(level, message)`` callback: one dim ``level: message`` line on ``err``."""
    return lambda level, msg: err.print(f"[dim]{level}: {msg}[/]")


def print_diagnostics(err: Console, kf: KernelFile, path: str) -> None:
    """Print every diagnostic of a kernel file, located (``path:line:col: severity: ...``)."""
    for diag in kf.diagnostics:
        color = _SEVERITY_COLORS.get(diag.severity, "blue")
        err.print(f"[{color}]{diag.format(path)}[/]", highlight=False, soft_wrap=True)


# --- optimize ---------------------------------------------------------------------------------


class SearchProgress:
    """Live terminal view of a running search: iteration, candidates evaluated (and correct),
    failed samples and candidates, the best speedup so far and the baseline. Feed it the search's events with :meth:`on_event`;
    rich renders it through :meth:`__rich__`."""

    def __init__(self, kernel: str, iterations: int) -> None:
        self.kernel = kernel
        self.iterations = iterations
        self.iteration = 0
        self.evaluated = 0
        self.ok = 0
        self.failed = 0
        self.best: float | None = None
        self.best_title = ""
        self.baseline = ""

    def on_event(self, event: Any) -> None:
        """Update the counters from one search event (other event types are ignored)."""
        from accelopt_core import search as s

        if isinstance(event, s.SearchStarted):
            self.baseline = event.baseline.result.summary()
        elif isinstance(event, s.IterationStarted):
            self.iteration = event.iteration
        elif isinstance(event, s.CandidateEvaluated):
            self.evaluated += 1
            self.ok += event.candidate.result.ok
        elif isinstance(event, s.CandidateFailed):
            self.failed += 1
        elif isinstance(event, s.NewBest):
            self.best = event.speedup
            self.best_title = event.candidate.plan_title

    def __rich__(self) -> Table:
        table = Table.grid(padding=(0, 2))
        best = f"{self.best:.2f}x ({self.best_title})" if self.best else "-"
        table.add_row(
            f"[bold]{self.kernel}[/]",
            f"iteration {self.iteration}/{self.iterations}",
            f"evaluated {self.evaluated} ({self.ok} correct, {self.failed} failed)",
            f"best {best}",
        )
        if self.baseline:
            table.add_row("", f"baseline {self.baseline}", "", "")
        return table


def live_progress(progress: SearchProgress, err: Console) -> Live:
    """A rich :class:`~rich.live.Live` context that redraws ``progress`` on ``err`` 4x a second
    and leaves its last state on screen."""
    return Live(progress, console=err, refresh_per_second=4, transient=False)


#: The columns of the verified candidates (:func:`candidate_rows`); only the plan wraps.
CANDIDATE_COLUMNS = (
    Col("rank", "right"), Col("speedup", "right"), Col("latency (ms)", "right"),
    Col("% of peak", "right"), Col("plan", wrap=True), Col("tokens", "right"),
    Col("iter", "right"),
)  # fmt: skip


def candidate_rows(report: Any) -> list[list[str]]:
    """The ranked verified candidates of a search report, one row of :data:`CANDIDATE_COLUMNS`
    each: rank, speedup, latency (ms), % of peak, plan, tokens and the iteration that found
    it."""
    rows = []
    for c in report.candidates:
        pct = f"{c.result.pct_of_peak:.0f}%" if c.result.pct_of_peak is not None else "-"
        rows.append([
            str(c.rank),
            f"{c.speedup:.2f}x" if c.speedup else "-",
            f"{c.latency_ms:.4g}" if c.latency_ms else "-",
            pct,
            escape(c.plan_title),
            str(c.tokens),
            str(c.iteration),
        ])  # fmt: skip
    return rows


def _search_totals(report: Any) -> str:
    fails = ", ".join(f"{k} {v}" for k, v in sorted(report.failures.items())) or "none"
    total = report.tokens.get("total", {})
    return (
        f"stopped: {report.stopped_reason} · iterations {report.iterations_run} · evaluated "
        f"{report.evaluated} · duplicates {report.duplicates} · failures: {fails} · tokens "
        f"{total.get('total_tokens', 0)} · cost ${report.cost_usd:.4f} · memory +{report.memory_added}"
        f" · {report.wall_s:.1f} s"
    )


def print_search_report(
    out: Console, err: Console, report: Any, kf: KernelFile, kernel: str, path: str
) -> None:
    """The human form of ``accelopt optimize``'s result: where it ran, the baseline, the
    candidates table, the totals line, warnings, and the best candidate's diff against ``kf``
    (the file at ``path``)."""
    out.print(
        f"[bold]{escape(kf.path)}[/] :: {escape(kernel)} on {escape(report.target)} "
        f"({report.proposer} proposer)",
        soft_wrap=True,
    )
    out.print(f"baseline: {escape(report.baseline.result.summary())}", soft_wrap=True)
    base = report.baseline.result.metrics
    for line in checked_lines(base):
        out.print(escape(line), highlight=False, soft_wrap=True)
    if devicefacts.not_timed(base):
        for line in devicefacts.gpu_lines(base):
            out.print(escape(line), highlight=False, soft_wrap=True)
        out.print(f"[yellow]{escape(ranking_needs_timing(base))}[/]", soft_wrap=True)
    if report.candidates:
        title = f"{escape(report.kernel_name)}: verified improvements ({report.timing} timing)"
        print_table(out, title, CANDIDATE_COLUMNS, candidate_rows(report))
    else:
        out.print("no verified improvement found")
    out.print(_search_totals(report), soft_wrap=True)
    if report.timing in HOST_TIMING_NOTES:
        out.print(f"[yellow]{HOST_TIMING_NOTES[report.timing]}[/]")
    if report.best and report.best.result.metrics:
        out.print("best candidate's profile:")
        for line in metrics_lines(report.best.result.metrics):
            out.print(f"  {line}")
        for line in devicefacts.gpu_lines(report.best.result.metrics):
            out.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
        for line in devicefacts.search_lines(report.best.result.metrics):
            out.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    for warning in report.warnings:
        err.print(f"[yellow]warning:[/] {warning}")
    if report.best:
        best = f"best ({report.best.speedup:.2f}x): {escape(report.best.plan_title)}"
        out.print(f"\n[bold]{best}[/]", soft_wrap=True)
        diff = unified_diff(kf.source, report.best.source, Path(path).name).rstrip("\n") + "\n"
        print_diff(out, diff, theme="ansi_dark", background_color="default")


def print_diff(out: Console, diff: str, **syntax: Any) -> None:
    """A unified diff: highlighted on a terminal (:class:`rich.syntax.Syntax` with ``syntax``'s
    options), its long lines wrapped rather than cropped; elsewhere (a pipe, a file, a log)
    the text as is, every line whole and unwrapped."""
    if out.is_terminal:
        out.print(Syntax(diff, "diff", word_wrap=True, **syntax))
    else:
        out.print(Text(diff.rstrip("\n")), soft_wrap=True, highlight=False)


# --- profile ----------------------------------------------------------------------------------


def print_profile(out: Console, err: Console, result: EvalResult, path: str) -> None:
    """The human form of ``accelopt profile``: the result's summary, then the latency median
    with p20/p80 (ms), GB/s and TFLOP/s (not when timed on the host: the Triton interpreter or
    the NKI simulator), device and timing, the NKI profile metrics
    (:func:`accelopt_core.search.report.metrics_lines`), the GPU facts of the compile stage
    and the shapes checked (:mod:`accelopt_core.devicefacts`) and the host-timing note. A kernel
    the CPU interpreter cannot run but the GPU compiles is headed ``not timed: ...``."""
    untimed = devicefacts.not_timed_line(result.metrics)
    if untimed:
        out.print(f"[bold]{path}[/]: {escape(untimed)}", soft_wrap=True)
        out.print(f"[dim]interpreter run: {escape(result.summary())}[/]", soft_wrap=True)
    else:
        out.print(f"[bold]{escape(path)}[/]: {escape(result.summary())}", soft_wrap=True)
    if result.ok and result.p20_ms is not None:
        line = f"latency median {result.latency_ms:.4g} ms (p20 {result.p20_ms:.4g}, p80 {result.p80_ms:.4g})"
        if result.timing not in HOST_TIMING_NOTES and result.gbps is not None:
            line += f" · {result.gbps:.1f} GB/s · {result.tflops or 0:.3f} TFLOP/s"
        out.print(
            escape(f"{line} · device {result.device} · timing {result.timing}"), soft_wrap=True
        )
    elif result.ok:
        out.print(escape(f"device {result.device} · timing {result.timing}"), soft_wrap=True)
    for line in metrics_lines(result.metrics) if result.ok else []:
        out.print(line)
    for line in shape_lines(result.metrics) if result.ok else []:
        out.print(line)
    for line in device_lines(result.metrics):
        out.print(escape(line), highlight=False, soft_wrap=True)
    if result.ok and result.timing in HOST_TIMING_NOTES:
        out.print(f"[yellow]{HOST_TIMING_NOTES[result.timing]}[/]")
    spent = phases_line(result)
    if spent:
        out.print(f"[dim]{spent}[/]", soft_wrap=True)
    for warning in result_warnings(result):
        err.print(f"[yellow]warning:[/] {escape(warning)}")


def workload_fields(kf: KernelFile) -> dict:
    """Where the kernel lives, for ``--json``: ``module`` (the kernel module's file, what
    ``--write`` rewrites), ``module_name``, ``harness`` (a harness in its own file),
    ``closure`` (the files shipped with every request), ``kernelbench`` (the problem's
    name) and ``fib`` (a FlashInfer-Bench solution's definition and workloads); ``{}`` for a
    standalone file."""
    ctx = kf.context
    if ctx is None:
        return {}
    return {
        "module": kf.path,
        "module_name": ctx.kernel_module,
        "harness": ctx.harness_file,
        "closure": sorted(ctx.files),
        "kernelbench": ctx.kernelbench,
        "fib": _fib_fields(ctx.fib),
    }


def _fib_fields(ref: Any) -> dict | None:
    """A FlashInfer-Bench solution's dataset, definition, solution and the workloads of
    ``BENCH["shapes"]`` (the last one held out), for ``--json``; None for other files."""
    if ref is None:
        return None
    return {
        "root": ref.root,
        "definition": ref.definition,
        "solution": ref.solution,
        "workloads": list(ref.workloads),
    }


def print_workload(out: Console, kf: KernelFile) -> None:
    """One line naming the kernel module and its harness when they are not one standalone
    file: ``kernel module mypkg.ops.rms_norm (ops/rms_norm.py) · harness bench_rms.py ·
    3 files shipped``, and the KernelBench problem."""
    ctx = kf.context
    if ctx is None:
        return
    parts = [f"kernel module {ctx.kernel_module} ({kf.path})"]
    if ctx.kernelbench:
        parts.append(f"KernelBench problem {ctx.kernelbench}")
    elif ctx.fib is not None:
        fib = ctx.fib
        parts.append(f"FlashInfer-Bench {fib.definition} ({len(fib.workloads)} workloads)")
    elif ctx.harness_file:
        parts.append(f"harness {ctx.harness_file}")
    parts.append(f"{len(ctx.files)} files shipped")
    out.print(escape(" · ".join(parts)), soft_wrap=True)


def shape_lines(metrics: dict) -> list[str]:
    """The per-shape table of a result timed on several shapes (``metrics["shapes"]``, issue
    13: latency median and p20/p80 in ms per shape, the held-out shape marked) and the config
    each ``@triton.autotune`` kernel used (``metrics["autotune"]``); ``[]`` without them."""
    lines = []
    rows = metrics.get("shapes") if isinstance(metrics.get("shapes"), list) else []
    if rows:
        lines.append("per shape (speed: geometric mean of the timed shapes):")
    for row in rows:
        shape = shape_text(row.get("shape"))
        if not row.get("timed"):
            lines.append(f"  {shape}: checked, never timed (held out)")
        elif isinstance(row.get("latency_ms"), (int, float)):
            lines.append(
                f"  {shape}: {row['latency_ms']:.4g} ms (p20 {row.get('p20_ms') or 0:.4g}, "
                f"p80 {row.get('p80_ms') or 0:.4g})"
            )
    tuned = metrics.get("autotune") if isinstance(metrics.get("autotune"), dict) else {}
    lines += [f"autotune {kernel}: {config}" for kernel, config in tuned.items()]
    return lines


# --- memory -----------------------------------------------------------------------------------


def when(ts: float) -> str:
    """A Unix time (s) as local ``YYYY-MM-DD HH:MM``."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


#: Narrower terminals get the compact experiences table (id, sign, speedup, kernel, title).
WIDE_TABLE_COLUMNS = 120


def experiences_table(
    rows: list[tuple[Experience, float | None]], title: str, *, wide: bool = True
) -> Table:
    """Experiences, one per row, for a terminal; the similarity column appears when any row has
    one. ``wide`` False leaves out seen, backend, device / timing and observed, so that the
    kernel and title stay readable on a narrow terminal."""
    similarity = any(sim is not None for _, sim in rows)
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("id", no_wrap=True, min_width=16, style="cyan")
    table.add_column("±", no_wrap=True)
    if similarity:
        table.add_column("similarity" if wide else "sim", justify="right", no_wrap=True)
    table.add_column("speedup", justify="right", no_wrap=True)
    if wide:
        table.add_column("seen", justify="right", no_wrap=True)
        table.add_column("backend", no_wrap=True)
    table.add_column("kernel", overflow="fold")
    if wide:
        table.add_column("device / timing", overflow="fold")
    table.add_column("title", overflow="fold")
    if wide:
        table.add_column("observed", no_wrap=True)
    for exp, sim in rows:
        cells = [exp.id, "[green]+[/]" if exp.positive else "[red]-[/]"]
        cells += [f"{sim:.3f}"] if similarity else []
        cells.append(f"{exp.speedup:.2f}x")
        cells += [str(exp.seen), exp.backend] if wide else []
        cells.append(escape(exp.kernel_name))
        cells += [escape(f"{exp.device} / {exp.timing}")] if wide else []
        cells.append(escape(labelled_title(exp)))
        cells += [when(exp.updated_at)] if wide else []
        table.add_row(*cells)
    return table


def labelled_title(exp: Experience) -> str:
    """The title with the timing label of a host-timed experience appended:
    ``single-pass softmax (interpreter-timed)`` (:func:`accelopt_core.memory.timing_label`)."""
    label = timing_label(exp.timing)
    return f"{exp.title} ({label})" if label else exp.title


def _plain_cell(text: str) -> str:
    return " ".join(text.split())  # no tab or newline inside a cell


def experiences_plain(rows: list[tuple[Experience, float | None]]) -> str:
    """Experiences as tab-separated lines under a header line (for a pipe, a file or CI, where
    a table has no terminal width to fit): id, sign, [similarity], speedup, seen, backend,
    kernel, device, timing, title, observed. Every cell is one line without tabs."""
    similarity = any(sim is not None for _, sim in rows)
    header = ["id", "sign", *(["similarity"] if similarity else [])]
    header += ["speedup", "seen", "backend", "kernel", "device", "timing", "title", "observed"]
    lines = ["\t".join(header)]
    for exp, sim in rows:
        cells = [exp.id, "+" if exp.positive else "-"]
        if similarity:
            cells.append(f"{sim:.3f}" if sim is not None else "")
        cells += [f"{exp.speedup:.2f}x", str(exp.seen), exp.backend, exp.kernel_name]
        cells += [exp.device, exp.timing, labelled_title(exp), when(exp.updated_at)]
        lines.append("\t".join(_plain_cell(c) for c in cells))
    return "\n".join(lines)


def print_experiences(
    out: Console, rows: list[tuple[Experience, float | None]], title: str
) -> None:
    """A table (:func:`experiences_table`, compact below :data:`WIDE_TABLE_COLUMNS` columns) on
    a terminal; elsewhere ``# title`` and :func:`experiences_plain`, written as is (no
    wrapping, no markup)."""
    if out.is_terminal:
        out.print(experiences_table(rows, title, wide=out.width >= WIDE_TABLE_COLUMNS))
        return
    out.file.write(f"# {title}\n{experiences_plain(rows)}\n")
    out.file.flush()


def _first_line(text: str, limit: int = 200) -> str:
    lines = text.strip().splitlines()
    return " ".join(lines[0].split())[:limit] if lines else ""


def print_hacks(out: Console, exps: list[Experience], title: str) -> None:
    """Reward-hack experiences (``Experience.hack`` set): the rule that caught the candidate,
    the kernel, when it was last caught, the judge version and the plan's first line; a table
    on a terminal, else ``# title`` and tab-separated lines under a header (id, rule, kernel,
    observed, judge, seen, plan)."""
    rows = [
        [e.id, e.hack or "", e.kernel_name, when(e.updated_at), e.judge_version, str(e.seen)]
        + [_first_line(e.plan) or "(no plan)"]
        for e in exps
    ]
    if not out.is_terminal:
        header = ["id", "rule", "kernel", "observed", "judge", "seen", "plan"]
        lines = ["\t".join(header)] + ["\t".join(_plain_cell(c) for c in r) for r in rows]
        out.file.write(f"# {title}\n" + "\n".join(lines) + "\n")
        out.file.flush()
        return
    table = Table(title=title, title_justify="left")
    table.add_column("id", no_wrap=True, min_width=16, style="cyan")
    table.add_column("rule", style="red", overflow="fold")
    table.add_column("kernel", overflow="fold")
    table.add_column("observed", no_wrap=True)
    table.add_column("judge", justify="right", no_wrap=True)
    table.add_column("seen", justify="right", no_wrap=True)
    table.add_column("plan", overflow="fold")
    for r in rows:
        table.add_row(*(escape(c) for c in r))
    out.print(table)


def print_experience(out: Console, exp: Experience) -> None:
    """One experience in full: a header panel, its rule, why a negative failed (issue 30), its
    plan, what it changed on the GPU (registers, occupancy, spills, shared memory, SASS; issue
    21) and the slow -> fast diff."""
    sign = "positive" if exp.positive else "negative"
    if exp.hack:
        sign = f"reward hack caught by: {exp.hack}"
    label = timing_label(exp.timing)
    head = (
        f"[bold]{escape(exp.title)}[/]  ({escape(sign)}, {exp.speedup:.2f}x, seen {exp.seen}x)\n"
        f"id {exp.id} · {exp.backend} · kernel {escape(exp.kernel_name)} · "
        f"{escape(exp.device)} ({escape(exp.timing)} timing{', ' + label if label else ''}) · "
        f"judge {escape(exp.judge_version)}\n"
        f"first {when(exp.created_at)} · last {when(exp.updated_at)} · "
        f"source {exp.source_fingerprint[:12]}"
    )
    out.print(Panel(head, title="experience", title_align="left"))
    out.print("[bold]rule[/]")
    out.print(escape(exp.rule) or "(none)")
    if exp.reason:
        out.print("[bold]why it failed[/]")
        out.print(escape(exp.reason), highlight=False)
    if exp.plan.strip():
        out.print("[bold]plan[/]")
        out.print(escape(exp.plan))
    facts = exp.gpu_facts or {}
    change = devicefacts.facts_change(facts.get("before"), facts.get("after"))
    if change:
        out.print("[bold]on the GPU (slow → fast)[/]")
        for line in change:
            out.print(escape(line), highlight=False)
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
        print_diff(out, diff)
    else:
        out.print("(identical sources)")
