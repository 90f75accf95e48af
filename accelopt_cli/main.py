"""The ``accelopt`` command line: optimize, profile, memory, target.

Settings come from the same typed model as the server's: defaults, then an optional
``--settings FILE`` (a JSON file holding the ``accelopt`` section, nested or with dotted keys as in
VS Code's settings.json), then the command-line flags. Invalid values are reported and replaced by
their defaults, exactly as in the editor.

Exit codes: 0 success, 1 the file or the target could not be used, 2 usage errors, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.syntax import Syntax
from rich.table import Table

from accelopt_core import __version__
from accelopt_core.kernelfile import KernelFile, KernelFileError, load_kernel_file
from accelopt_core.settings import SECTION, Settings, settings_from_sources


def _read_settings_file(path: str) -> dict[str, Any]:
    """Read the ``accelopt`` section from a JSON settings file (nested or dotted keys)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"accelopt: cannot read settings file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"accelopt: settings file {path} must hold a JSON object")
    section: dict[str, Any] = (
        dict(data.get(SECTION, {})) if isinstance(data.get(SECTION), dict) else {}
    )
    for key, value in data.items():
        if key.startswith(SECTION + "."):
            node = section
            parts = key.split(".")[1:]
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = value
    return section


def _settings(args: argparse.Namespace, err: Console) -> Settings:
    layers: list[dict[str, Any]] = []
    if getattr(args, "settings", None):
        layers.append(_read_settings_file(args.settings))
    flags: dict[str, Any] = {"search": {}, "llm": {}}
    for flag, key in (
        ("iterations", "iterations"),
        ("beam", "beamWidth"),
        ("plans", "plansPerCandidate"),
        ("samples", "samplesPerPlan"),
        ("max_tokens", "maxTokens"),
        ("max_wall_s", "maxWallS"),
    ):
        if getattr(args, flag, None) is not None:
            flags["search"][key] = getattr(args, flag)
    if getattr(args, "target", None):
        flags["target"] = args.target
    if getattr(args, "memory_dir", None):
        flags["memoryDir"] = args.memory_dir
    for flag, key in (
        ("llm_base_url", "baseUrl"),
        ("llm_model", "model"),
        ("api_key_env", "apiKeyEnv"),
    ):
        if getattr(args, flag, None):
            flags["llm"][key] = getattr(args, flag)
    if getattr(args, "offline", False):
        flags["llm"]["model"] = None
    layers.append(flags)
    settings, issues = settings_from_sources(*layers)
    if getattr(args, "offline", False):
        settings.llm.model = None
        for role in ("planner", "executor", "summarizer", "fixer"):
            getattr(settings.llm, role).model = None
    for issue in issues:
        err.print(f"[yellow]warning:[/] {issue}")
    return settings


def _load(path: str, err: Console) -> KernelFile | None:
    try:
        kf = load_kernel_file(path)
    except KernelFileError as exc:
        err.print(f"[red]error:[/] {exc}")
        return None
    errors = [d for d in kf.diagnostics if d.severity == "error"]
    for diag in kf.diagnostics:
        color = {"error": "red", "warning": "yellow"}.get(diag.severity, "blue")
        err.print(f"[{color}]{diag.format(path)}[/]", highlight=False)
    if errors or not kf.kernels:
        return None
    return kf


def _kernel_name(kf: KernelFile, requested: str | None, err: Console) -> str | None:
    if requested:
        try:
            kf.kernel(requested)
        except KeyError:
            names = ", ".join(k.name for k in kf.kernels)
            err.print(f"[red]error:[/] {kf.path}: no kernel named {requested!r} (kernels: {names})")
            return None
        return requested
    entry = kf.harness.entry if kf.harness else None
    launched = next((launcher.kernels for launcher in kf.launchers if launcher.name == entry), [])
    for kernel in kf.kernels:
        if kernel.name in launched:
            return kernel.name
    return kf.kernels[0].name


# --- optimize ---------------------------------------------------------------------------------


class _Progress:
    """Live terminal view of a running search (rich)."""

    def __init__(self, kernel: str, iterations: int) -> None:
        self.kernel = kernel
        self.iterations = iterations
        self.iteration = 0
        self.evaluated = 0
        self.ok = 0
        self.best: float | None = None
        self.best_title = ""
        self.baseline = ""

    def on_event(self, event: Any) -> None:
        from accelopt_core import search as s

        if isinstance(event, s.SearchStarted):
            self.baseline = event.baseline.result.summary()
        elif isinstance(event, s.IterationStarted):
            self.iteration = event.iteration
        elif isinstance(event, s.CandidateEvaluated):
            self.evaluated += 1
            self.ok += event.candidate.result.ok
        elif isinstance(event, s.NewBest):
            self.best = event.speedup
            self.best_title = event.candidate.plan_title

    def __rich__(self) -> Table:
        table = Table.grid(padding=(0, 2))
        best = f"{self.best:.2f}x ({self.best_title})" if self.best else "-"
        table.add_row(
            f"[bold]{self.kernel}[/]",
            f"iteration {self.iteration}/{self.iterations}",
            f"evaluated {self.evaluated} ({self.ok} correct)",
            f"best {best}",
        )
        if self.baseline:
            table.add_row("", f"baseline {self.baseline}", "", "")
        return table


def _candidates_table(report: Any) -> Table:
    table = Table(title=f"{report.kernel_name}: verified improvements ({report.timing} timing)")
    for col in ("rank", "speedup", "latency (ms)", "% of peak", "plan", "tokens", "iter"):
        table.add_column(col, justify="right" if col not in ("plan",) else "left")
    for c in report.candidates:
        pct = f"{c.result.pct_of_peak:.0f}%" if c.result.pct_of_peak is not None else "-"
        table.add_row(
            str(c.rank),
            f"{c.speedup:.2f}x" if c.speedup else "-",
            f"{c.latency_ms:.4g}" if c.latency_ms else "-",
            pct,
            c.plan_title,
            str(c.tokens),
            str(c.iteration),
        )
    return table


async def _optimize(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelopt_core.engine import Engine
    from accelopt_core.kernelfile import unified_diff

    settings = _settings(args, err)
    kf = _load(args.path, err)
    if kf is None:
        return 1
    kernel = _kernel_name(kf, args.kernel, err)
    if kernel is None:
        return 1
    engine = Engine(settings, log=lambda level, msg: err.print(f"[dim]{level}: {msg}[/]"))
    try:
        try:
            search = engine.new_search(kf, kernel)
        except (ValueError, KeyError) as exc:
            err.print(f"[red]error:[/] {exc}")
            return 1
        progress = _Progress(kernel, settings.search.iterations)
        search.subscribe(progress.on_event)
        if args.json or not err.is_terminal:
            report = await search.run()
        else:
            with Live(progress, console=err, refresh_per_second=4, transient=False):
                task = asyncio.ensure_future(search.run(wait_for_memory=False))
                while not task.done():
                    await asyncio.sleep(0.25)
                report = task.result()
            # the ranking is final; the last summaries reach the memory before the process ends
            report.memory_added = await search.drain()
    except Exception as exc:  # target unusable (TargetError), ...: a message, never a traceback
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        return 1
    finally:
        await engine.close()

    data = report.to_dict()
    data["tokens"] = report.tokens
    if args.json:
        data.pop("original_source", None)
        print(json.dumps(data, indent=2))
    else:
        base = report.baseline.result
        out.print(f"[bold]{kf.path}[/] :: {kernel} on {report.target} ({report.proposer} proposer)")
        out.print(f"baseline: {base.summary()}")
        if report.candidates:
            out.print(_candidates_table(report))
        else:
            out.print("no verified improvement found")
        fails = ", ".join(f"{k} {v}" for k, v in sorted(report.failures.items())) or "none"
        total = report.tokens.get("total", {})
        out.print(
            f"stopped: {report.stopped_reason} · iterations {report.iterations_run} · evaluated "
            f"{report.evaluated} · duplicates {report.duplicates} · failures: {fails} · tokens "
            f"{total.get('total_tokens', 0)} · cost ${report.cost_usd:.4f} · memory +{report.memory_added}"
            f" · {report.wall_s:.1f} s"
        )
        if report.timing == "interpreter":
            out.print(
                "[yellow]timed under the Triton interpreter on CPU: these latencies say nothing "
                "about GPU speed[/]"
            )
        for warning in report.warnings:
            err.print(f"[yellow]warning:[/] {warning}")
        if report.best:
            out.print(f"\n[bold]best ({report.best.speedup:.2f}x): {report.best.plan_title}[/]")
            diff = unified_diff(kf.source, report.best.source, Path(args.path).name)
            out.print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
    if args.write and report.best:
        Path(args.path).write_text(report.best.source, encoding="utf-8")
        err.print(f"wrote the best candidate ({report.best.speedup:.2f}x) to {args.path}")
    if report.baseline.result.status != "ok":
        err.print(f"[red]error:[/] the baseline is not usable: {report.baseline.result.summary()}")
        return 1
    return 0


async def _profile(args: argparse.Namespace, out: Console, err: Console) -> int:
    from accelopt_core.engine import Engine

    settings = _settings(args, err)
    kf = _load(args.path, err)
    if kf is None:
        return 1
    kernel = _kernel_name(kf, args.kernel, err) if args.kernel else None
    if args.kernel and kernel is None:
        return 1
    engine = Engine(settings, log=lambda level, msg: err.print(f"[dim]{level}: {msg}[/]"))
    try:
        result = await engine.profile(kf, kernel)
    except (ValueError, KeyError) as exc:
        err.print(f"[red]error:[/] {exc}")
        return 1
    except Exception as exc:
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        return 1
    finally:
        await engine.close()
    if args.json:
        print(
            json.dumps(
                {
                    "path": args.path,
                    "kernel": kernel,
                    "target": settings.target,
                    **result.to_dict(),
                },
                indent=2,
            )
        )
    else:
        out.print(f"[bold]{args.path}[/]: {result.summary()}")
        if result.ok and result.p20_ms is not None:
            line = f"latency median {result.latency_ms:.4g} ms (p20 {result.p20_ms:.4g}, p80 {result.p80_ms:.4g})"
            if result.timing != "interpreter" and result.gbps is not None:
                line += f" · {result.gbps:.1f} GB/s · {result.tflops or 0:.3f} TFLOP/s"
            out.print(f"{line} · device {result.device} · timing {result.timing}")
        for warning in result.warnings:
            err.print(f"[yellow]warning:[/] {warning}")
    return 0 if result.ok else 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``accelopt`` (sub-commands optimize, profile, memory, target)."""
    parser = argparse.ArgumentParser(
        prog="accelopt",
        description="Optimize Triton and NKI kernels with beam search and an optimization memory.",
    )
    parser.add_argument("--version", action="version", version=f"accelopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--settings", metavar="FILE", help="JSON file with the accelopt settings section"
        )
        p.add_argument(
            "--target", help="local | ssh://[user@]host[:port] | ray://host:port | ray:auto"
        )
        p.add_argument("--memory-dir", help="optimization memory and evaluation cache directory")
        p.add_argument("--json", action="store_true", help="print one JSON report on stdout")

    opt = sub.add_parser("optimize", help="beam-search faster versions of a kernel")
    opt.add_argument("path")
    opt.add_argument(
        "--kernel", help="kernel to optimize (default: the one BENCH's entry launches)"
    )
    opt.add_argument("--iterations", "-T", type=int, help="iterations T")
    opt.add_argument("--beam", "-B", type=int, help="beam width B")
    opt.add_argument("--plans", "-N", type=int, help="plans per candidate N")
    opt.add_argument("--samples", "-K", type=int, help="samples per plan K")
    opt.add_argument("--max-tokens", type=int, help="token budget")
    opt.add_argument("--max-wall-s", type=float, help="wall-time budget in seconds")
    opt.add_argument("--llm-base-url", help="OpenAI-compatible endpoint")
    opt.add_argument("--llm-model", help="model name (enables the LLM agents)")
    opt.add_argument("--api-key-env", help="environment variable holding the API key")
    opt.add_argument(
        "--offline", action="store_true", help="ignore any LLM settings; tune launch parameters"
    )
    opt.add_argument("--write", action="store_true", help="write the best candidate into PATH")
    common(opt)

    prof = sub.add_parser("profile", help="evaluate the file as it is (correctness + latency)")
    prof.add_argument("path")
    prof.add_argument("--kernel")
    common(prof)

    try:
        from accelopt_cli.memory import add_memory_parser

        add_memory_parser(sub)
    except ImportError:  # pragma: no cover - during development only
        pass
    try:
        from accelopt_cli.target import add_target_parser

        add_target_parser(sub)
    except ImportError:  # pragma: no cover
        pass
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``accelopt`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Console()
    err = Console(stderr=True)
    try:
        if args.command == "optimize":
            return asyncio.run(_optimize(args, out, err))
        if args.command == "profile":
            return asyncio.run(_profile(args, out, err))
        if args.command == "memory":
            from accelopt_cli.memory import run_memory_command

            return run_memory_command(args, _settings(args, err))
        if args.command == "target":
            from accelopt_cli.target import run_target_command

            return run_target_command(args, _settings(args, err))
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
