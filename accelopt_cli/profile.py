"""``accelopt profile PATH [PATH ...]``: evaluate kernel files as they are (correctness +
latency).

One evaluation per file through one :class:`accelopt_core.engine.Engine` on the configured
target (several files run at once, as many as it has slots, on the same warm workers); prints
each result's summary and the latency median with p20/p80 (ms), or with ``--json`` one JSON
object (a list of them for several files). Exit status 0 when every kernel came back correct,
or the CPU interpreter cannot run it but it compiles for the GPU (``metrics["not_timed"]``: its
device facts are shown, "not timed"), 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_cli import render
from accelopt_cli.kernel_args import choose_kernel, load_kernel
from accelopt_cli.render_table import print_heading
from accelopt_core import devicefacts
from accelopt_core.configfiles import file_layers, find_project_file, resolve
from accelopt_core.kernelfile import KernelFile
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.settings import Settings


def run_profile_command(
    args: argparse.Namespace, settings: Settings, out: Console, err: Console
) -> int:
    """Run ``accelopt profile`` as parsed into ``args``; returns the exit status: 0 when every
    file came back correct (or compiles for the GPU where the interpreter cannot run it), 1
    otherwise, 2 for a usage error (``--kernel`` with several paths, files whose projects set
    other settings).

    Never raises for a bad file or an unusable target: the reason is printed on ``err``."""
    paths = list(getattr(args, "paths", None) or [args.path])
    if len(paths) > 1:
        problem = _several_paths_problem(args, paths)
        if problem:
            err.print(f"[red]error:[/] {escape(problem)}", highlight=False, soft_wrap=True)
            return 2
    return asyncio.run(profile_paths(args, paths, settings, out, err))


def _several_paths_problem(args: argparse.Namespace, paths: list[str]) -> str | None:
    """Why ``paths`` cannot be profiled in one run, or None: ``--kernel`` names one file's
    kernel; a file whose project (``accelopt.toml``, the user config) gives other settings than
    the first file's would be evaluated with settings not its own. (``--harness`` measures
    each path.)"""
    if getattr(args, "kernel", None):
        return f"--kernel applies to one path; profile {len(paths)} files without it"
    by_project: dict[Path | None, Settings] = {}  # files of one project resolve alike

    def settings_of(path: str) -> Settings:
        project = find_project_file(Path(path))
        if project not in by_project:
            by_project[project] = resolve(*file_layers(Path(path))).settings
        return by_project[project]

    first = settings_of(paths[0])
    for path in paths[1:]:
        if settings_of(path) != first:
            return (
                f"{path}: its project's settings differ from those of {paths[0]}; "
                "profile the two projects' files in separate runs"
            )
    return None


async def profile_paths(
    args: argparse.Namespace, paths: list[str], settings: Settings, out: Console, err: Console
) -> int:
    """Profile each of ``paths`` on one engine (the target's slots run them concurrently, on
    the same warm workers) and print each one's result in the order given; ``--json`` prints
    one object for one path (nothing when it could not be evaluated: the reason is on
    ``err``), a list of them for several (a file that could not be evaluated is
    ``{"path": ..., "error": <the message>}``). Returns 0 when every file's verdict is."""
    several = len(paths) > 1
    files = [_File(p, err, several) for p in paths]
    await asyncio.to_thread(lambda: [f.load(args) for f in files])  # one at a time: imports
    if any(f.kf is not None for f in files):
        from accelopt_core.engine import Engine

        try:
            engine = Engine(settings, log=render.engine_log(err))
        except Exception as exc:  # an unusable target: a message, never a traceback
            err.print(f"[red]error:[/] {type(exc).__name__}: {escape(str(exc))}")
            return 1
        try:
            await asyncio.gather(*(f.evaluate(engine) for f in files if f.kf is not None))
        finally:
            await engine.close()
    objects = []
    for f in files:
        if several and not args.json:
            print_heading(out, f.path)
        said = f.said()
        if said:
            err.print(said, end="", markup=False, highlight=False)
        if f.result is None:
            objects.append({"path": f.path, "error": said.strip() or "not evaluated"})
            continue
        data = {"path": f.path, "kernel": f.kernel, "target": settings.target}
        data["gpu"] = settings.gpu_name  # the configured GPU; metrics["gpu"] has its facts
        data.update(render.workload_fields(f.kf))
        # the derived inputs in words and counted by class (issue 52), beside the raw metrics
        data["derived"] = devicefacts.derived_facts(f.result.metrics)
        objects.append({**data, **f.result.to_dict()})
        if not args.json:
            render.print_workload(out, f.kf)
            render.print_profile(out, err, f.result, f.path)
    if args.json and (several or files[0].result is not None):
        print(json.dumps(objects if several else objects[0], indent=2))
    return max(0 if f.verdict_ok else 1 for f in files)


class _File:
    """One path of a profile run: its kernel file once loaded (None: it cannot be evaluated),
    the kernel asked for, the result, and what was said about it. With several paths that
    text is kept (:meth:`said`, at the width of ``err``) and printed in the order of the
    paths; with one, it goes to ``err`` as it happens."""

    def __init__(self, path: str, err: Console, several: bool) -> None:
        self.path = path
        self._buffer = io.StringIO() if several else None
        self.err = Console(file=self._buffer, width=err.width) if several else err
        self.kf: KernelFile | None = None
        self.kernel: str | None = None
        self.result: EvalResult | None = None

    def load(self, args: argparse.Namespace) -> None:
        """Load the file and choose ``--kernel`` (blocking; run in a thread)."""
        harness, dataset = getattr(args, "harness", None), getattr(args, "dataset", None)
        kf = load_kernel(self.path, self.err, harness, dataset)
        if kf is not None and args.kernel:
            self.kernel = choose_kernel(kf, args.kernel, self.err)
            if self.kernel is None:
                return
        self.kf = kf

    async def evaluate(self, engine: Any) -> None:
        """Profile the loaded kernel (:meth:`Engine.profile`); a file that cannot be evaluated
        or a failed target leaves :attr:`result` None, with the reason said."""
        try:
            self.result = await engine.profile(self.kf, self.kernel)
        except (ValueError, KeyError) as exc:
            self.err.print(f"[red]error:[/] {exc}")
        except Exception as exc:  # target unusable (TargetError), ...: a message, never a traceback
            self.err.print(f"[red]error:[/] {type(exc).__name__}: {exc}")

    def said(self) -> str:
        """The messages kept for this path (empty with one path: they were printed)."""
        return self._buffer.getvalue() if self._buffer is not None else ""

    @property
    def verdict_ok(self) -> bool:
        """Correct, or not timed by the interpreter but compiled for the GPU."""
        r = self.result
        return r is not None and (r.ok or devicefacts.not_timed(r.metrics))
