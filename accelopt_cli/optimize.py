"""``accelopt optimize PATH``: beam-search faster versions of a kernel, from a terminal.

Runs one search through :class:`accelopt_core.engine.Engine` with a live progress line on a
terminal (none with ``--json`` or when stderr is not a terminal), then prints the ranked verified
candidates, the failed candidates (a short table; every reason in full with ``--verbose``) and the
best one's diff, or one JSON report with ``--json`` (``failed_candidates`` lists every failure);
``--write`` writes the best candidate into the kernel module (PATH, or the module a harness PATH
measures; never the harness); ``--report FILE.html`` also writes the search as one
self-contained page (:mod:`accelopt_cli.report`). Exit status 0 when the baseline was usable, 1 otherwise (file,
kernel or target unusable, an incorrect baseline, or an LLM no call can reach: a missing or
rejected API key, said once).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_cli import render, render_runs
from accelopt_cli.kernel_args import choose_kernel, load_kernel
from accelopt_cli.render_device import ranking_needs_timing
from accelopt_cli.report import write_search_report
from accelopt_core import devicefacts
from accelopt_core.kernelfile import KernelFile
from accelopt_core.settings import Settings


def run_optimize_command(
    args: argparse.Namespace, settings: Settings, out: Console, err: Console
) -> int:
    """Run ``accelopt optimize`` as parsed into ``args``; returns the exit status (0 or 1).

    Never raises for a bad file or an unusable target: the reason is printed on ``err``."""
    return asyncio.run(optimize(args, settings, out, err))


async def optimize(args: argparse.Namespace, settings: Settings, out: Console, err: Console) -> int:
    """The body of :func:`run_optimize_command`, on a running event loop."""
    kf = load_kernel(args.path, err, getattr(args, "harness", None), getattr(args, "dataset", None))
    if kf is None:
        return 1
    kernel = choose_kernel(kf, args.kernel, err)
    if kernel is None:
        return 1
    report = await run_search(args, settings, kf, kernel, err)
    if report is None:
        return 1
    unusable = report.stopped_reason.startswith("LLM unusable")
    if getattr(args, "report", None):  # issue 32: the search as a page
        written = write_search_report(report.to_dict(), args.report, err)
        if written is not None:
            err.print(f"search report: {escape(str(written))}", soft_wrap=True, highlight=False)
    if args.json:
        data = report.to_dict()
        data["tokens"] = report.tokens
        data.update(render.workload_fields(kf))
        data.pop("original_source", None)
        print(json.dumps(data, indent=2))
    elif not unusable:  # no LLM call can succeed: the one message below says why
        render.print_workload(out, kf)
        render.print_search_report(out, err, report, kf, report.kernel_name, kf.path)
        render_runs.print_failures(
            out, report.failed_candidates, verbose=getattr(args, "verbose", False)
        )
        if report.run_id:
            out.print(f"[dim]run kept: accelopt runs show {report.run_id}[/]")
    if unusable:
        err.print(f"[red]error:[/] {escape(report.stopped_reason)}", soft_wrap=True)
        return 1
    if args.write and report.best and write_best(kf, report, err) is None:
        return 1
    if report.baseline.result.status != "ok":
        if devicefacts.not_timed(report.baseline.result.metrics):
            reason = ranking_needs_timing(report.baseline.result.metrics)
            err.print(f"[red]error:[/] {escape(reason)}", soft_wrap=True)
            return 1
        err.print(f"[red]error:[/] the baseline is not usable: {report.baseline.result.summary()}")
        return 1
    return 0


def write_best(kf: KernelFile, report: Any, err: Console) -> str | None:
    """``--write``: the best candidate into the kernel module (never a harness in its own
    file); for a FlashInfer-Bench solution, a new solution beside it and the traces
    (:func:`accelopt_core.kernelfile.fib_write.write_results`), the user's file untouched.
    The file written, or None (reason printed) when it could not be written."""
    ref = kf.context.fib if kf.context is not None else None
    if ref is None:
        Path(kf.path).write_text(report.best.source, encoding="utf-8")
        err.print(f"wrote the best candidate ({report.best.speedup:.2f}x) to {kf.path}")
        return kf.path
    from accelopt_core.kernelfile import KernelFileError
    from accelopt_core.kernelfile.fib_write import write_results

    try:
        target, traces = write_results(ref, report)
    except KernelFileError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        return None
    err.print(
        f"wrote the best candidate ({report.best.speedup:.2f}x) as the solution {target.stem} "
        f"({target}) and {traces} traces under {Path(ref.root) / 'traces'}",
        highlight=False,
    )
    return str(target)


async def run_search(
    args: argparse.Namespace, settings: Settings, kf: KernelFile, kernel: str, err: Console
) -> Any:
    """Run the search; its :class:`~accelopt_core.search.SearchReport`, or None (reason printed)
    when it could not start or the target failed."""
    from accelopt_core.engine import Engine

    engine = Engine(settings, log=render.engine_log(err))
    try:
        try:
            if not args.kernel:
                kernel = await busiest_kernel(engine, kf) or kernel
            search = engine.new_search(kf, kernel)
        except (ValueError, KeyError) as exc:
            err.print(f"[red]error:[/] {exc}")
            return None
        progress = render.SearchProgress(kernel, settings.search.iterations)
        search.subscribe(progress.on_event)
        if args.json or not err.is_terminal:
            return await search.run()
        return await _run_live(search, progress, err)
    except Exception as exc:  # target unusable (TargetError), ...: a message, never a traceback
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        return None
    finally:
        await engine.close()


async def busiest_kernel(engine: Any, kf: KernelFile) -> str | None:
    """The kernel of ``kf`` the harness entry spends the most time in, when the entry launches
    several: from a profile of the file (the evaluation cache's when it has one), by the
    interpreter's per-kernel ms, else by launches (the compiled path counts launches only).
    None when the entry launches at most one kernel or the profile has no per-kernel figures."""
    entry = kf.harness.entry if kf.harness else None
    launched = [k for k in kf.kernel_names if entry and kf.launches(entry, k)]
    if len(launched) < 2:
        return None
    result = await engine.profile(kf)
    kernels = result.metrics.get("kernels") if result.ok else None
    if not isinstance(kernels, dict):
        return None
    timed = {k: v for k, v in kernels.items() if k in launched and isinstance(v, dict)}
    if not timed:
        return None
    return max(timed, key=lambda k: (timed[k].get("ms", 0.0), timed[k].get("launches", 0)))


async def _run_live(search: Any, progress: render.SearchProgress, err: Console) -> Any:
    """Run the search under the live progress line; the last summaries reach the memory (after
    the ranking is final) before the report is returned."""
    with render.live_progress(progress, err):
        task = asyncio.ensure_future(search.run(wait_for_memory=False))
        while not task.done():
            await asyncio.sleep(0.25)
        report = task.result()
    report.memory_added = await search.drain()
    return report
