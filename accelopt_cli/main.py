"""The ``accelopt`` command line: optimize, profile, memory, runs, report, target, config, bench.

This module builds the parser, loads the settings and dispatches to the command's module
(:mod:`~accelopt_cli.optimize`, :mod:`~accelopt_cli.profile`, :mod:`~accelopt_cli.memory`,
:mod:`~accelopt_cli.runs`, :mod:`~accelopt_cli.target`, :mod:`~accelopt_cli.config`); terminal
rendering lives in :mod:`accelopt_cli.render` (and :mod:`accelopt_cli.render_runs`).

Settings come from the same typed model and the same files as the server's
(:mod:`accelopt_core.configfiles`), lowest precedence first: defaults, the user config
(``~/.config/accelopt/config.toml`` or ``$ACCELOPT_CONFIG``), the project file (``[tool.accelopt]``
in the nearest ``pyproject.toml``, or ``accelopt.toml``, found from the kernel file's directory for
``optimize`` / ``profile`` / ``config PATH``, else from the working directory), an optional
``--settings FILE`` (a JSON file holding the ``accelopt`` section, nested or with dotted keys as in
VS Code's settings.json; a ``.toml`` file is read like ``accelopt.toml``), then the command-line
flags. Invalid values are printed once on stderr, located (file, key, why), and the value of the
next lower layer (or the default) is used, exactly as in the editor.

Exit codes: 0 success, 1 the file or the target could not be used, 2 usage errors, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_cli.bench import BENCH_COMMANDS, add_bench_parser
from accelopt_cli.config import run_config_command
from accelopt_cli.memory import add_memory_parser, run_memory_command
from accelopt_cli.optimize import run_optimize_command
from accelopt_cli.profile import run_profile_command
from accelopt_cli.report import add_report_parser, run_report_command
from accelopt_cli.runs import add_runs_parser, run_runs_command
from accelopt_cli.target import add_target_parser, run_target_command
from accelopt_core import __version__
from accelopt_core.configfiles import (
    ConfigLayer,
    EffectiveSettings,
    file_layers,
    read_layer,
    resolve,
)
from accelopt_core.settings import GPU_NAMES, SECTION, Settings, clean_settings

#: ``--flag`` (argparse dest) -> key of the ``search`` settings section.
_SEARCH_FLAGS = (
    ("iterations", "iterations"),
    ("beam", "beamWidth"),
    ("plans", "plansPerCandidate"),
    ("samples", "samplesPerPlan"),
    ("max_tokens", "maxTokens"),
    ("max_wall_s", "maxWallS"),
)
#: ``--flag`` (argparse dest) -> key of the ``llm`` settings section.
_LLM_FLAGS = (("llm_base_url", "baseUrl"), ("llm_model", "model"), ("api_key_env", "apiKeyEnv"))
_LLM_ROLES = ("planner", "executor", "summarizer", "fixer")


def read_settings_file(path: str) -> dict[str, Any]:
    """Read the ``accelopt`` section from a JSON settings file: nested (``{"accelopt": {...}}``)
    or with dotted keys as in VS Code's settings.json (``{"accelopt.search.iterations": 2}``).

    Other top-level keys are ignored (a VS Code settings.json holds the editor's too), except
    the names of AccelOpt's own settings (``{"search": {...}}``), a section left out by mistake.

    Raises SystemExit with a message when the file cannot be read, is not a JSON object or
    holds such a key outside the section."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"accelopt: cannot read settings file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"accelopt: settings file {path} must hold a JSON object")
    known = {f.alias or n for n, f in Settings.model_fields.items()}
    stray = sorted(k for k in data if k in known)
    if stray:  # {"search": {...}} would otherwise be read as no settings at all
        raise SystemExit(
            f"accelopt: settings file {path}: {', '.join(stray)} must be inside the "
            f'"{SECTION}" section ({{"{SECTION}": {{"{stray[0]}": ...}}}}) or dotted '
            f'("{SECTION}.{stray[0]}"); other top-level keys are ignored'
        )
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


def _flag_layer(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as command-line flags, as a nested settings mapping (sections
    without a flag left out)."""
    flags: dict[str, Any] = {"search": {}, "llm": {}}
    for flag, key in _SEARCH_FLAGS:
        if getattr(args, flag, None) is not None:
            flags["search"][key] = getattr(args, flag)
    if getattr(args, "target", None):
        flags["target"] = args.target
    if getattr(args, "memory_dir", None):
        flags["memoryDir"] = args.memory_dir
    if getattr(args, "gpu", None):
        flags["gpu"] = args.gpu
    for flag, key in _LLM_FLAGS:
        if getattr(args, flag, None):
            flags["llm"][key] = getattr(args, flag)
    return {key: value for key, value in flags.items() if value != {}}


def settings_file_layer(path: str) -> ConfigLayer:
    """``--settings FILE`` as a layer named ``settings file``: a ``.toml`` file is read like
    ``accelopt.toml`` (problems become issues), anything else as JSON
    (:func:`read_settings_file`, which exits with a message on an unreadable file)."""
    if path.endswith(".toml"):
        return read_layer(Path(path), "settings file")
    data, issues = clean_settings(read_settings_file(path), source=path)
    return ConfigLayer(name="settings file", data=data, path=Path(path), issues=issues)


def settings_start(args: argparse.Namespace) -> Path:
    """Where the project file is looked for: the kernel file (or directory) of ``optimize``,
    ``profile``, ``config PATH`` and ``report FILE``; else the working directory."""
    path = getattr(args, "path", None) or (getattr(args, "paths", None) or [None])[0]
    source = getattr(args, "source", None)  # ``report FILE``: the kernel file's project
    if not path and source and Path(source).is_file():
        path = source
    return Path(path) if path else Path.cwd()


def effective_settings_for(args: argparse.Namespace) -> EffectiveSettings:
    """The layers of one run, lowest first: user config, project file (from
    :func:`settings_start`), ``--settings FILE``, flags; merged with provenance."""
    layers = file_layers(settings_start(args))
    if getattr(args, "settings", None):
        layers.append(settings_file_layer(args.settings))
    flags = _flag_layer(args)
    if flags:
        data, issues = clean_settings(flags, source="command line")
        layers.append(ConfigLayer(name="command line", data=data, issues=issues))
    return resolve(*layers)


def print_issues(effective: EffectiveSettings, err: Console) -> None:
    """Each settings issue once, as a located warning on ``err``."""
    for text in dict.fromkeys(str(issue) for issue in effective.issues):
        err.print(f"[yellow]warning:[/] {escape(text)}", soft_wrap=True)  # one line per issue


def run_settings(args: argparse.Namespace, effective: EffectiveSettings) -> Settings:
    """The settings a command runs with: ``--offline`` clears every LLM model (the offline
    proposer runs)."""
    settings = effective.settings
    if getattr(args, "offline", False):
        settings = settings.model_copy(deep=True)
        settings.llm.model = None
        for role in _LLM_ROLES:
            getattr(settings.llm, role).model = None
    return settings


def load_settings(args: argparse.Namespace, err: Console) -> Settings:
    """The settings of one run (:func:`effective_settings_for`, then :func:`run_settings`);
    invalid values are printed as warnings on ``err`` and replaced by the next lower layer's
    value or the default."""
    effective = effective_settings_for(args)
    print_issues(effective, err)
    return run_settings(args, effective)


# --- parser -----------------------------------------------------------------------------------


def _add_common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--settings",
        metavar="FILE",
        help="settings file over the project file: JSON (the accelopt section) or TOML",
    )
    p.add_argument("--target", help="local | ssh://[user@]host[:port] | ray://host:port | ray:auto")
    p.add_argument("--memory-dir", help="optimization memory and evaluation cache directory")
    p.add_argument("--json", action="store_true", help="print one JSON report on stdout")


def _add_gpu_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpu",
        choices=GPU_NAMES,
        metavar="GPU",
        help="the GPU the Triton kernels are compiled for and checked against (registers, "
        "spills, occupancy; a kernel that cannot compile or launch there is rejected): "
        + ", ".join(repr(name) for name in GPU_NAMES)
        + "; default: the setting accelopt.gpu ('H100 SXM5')",
    )


_HARNESS_HELP = (
    "harness file that measures the kernel module PATH (get_inputs/reference/BENCH importing "
    "the entry from PATH), or a KernelBench problem whose Model is the reference of PATH's ModelNew"
)

_DATASET_HELP = (
    "the FlashInfer-Bench dataset (definitions/, workloads/) of a solution JSON PATH "
    "(default: the dataset the solution sits in)"
)


def _add_optimize_parser(sub: Any) -> None:
    opt = sub.add_parser("optimize", help="beam-search faster versions of a kernel")
    opt.add_argument("path", help="kernel file, or a harness file that imports its kernel")
    opt.add_argument("--harness", help=_HARNESS_HELP)
    opt.add_argument("--dataset", metavar="ROOT", help=_DATASET_HELP)
    opt.add_argument(
        "--kernel", help="kernel to optimize (default: the one BENCH's entry launches)"
    )
    add_search_options(opt)
    opt.add_argument(
        "--write", action="store_true", help="write the best candidate into the kernel module"
    )
    opt.add_argument(
        "--verbose", "-v", action="store_true", help="print every failed candidate's reason in full"
    )
    opt.add_argument(
        "--report",
        metavar="FILE.html",
        help="also write the search as one self-contained HTML page (tree, charts, candidates)",
    )
    _add_gpu_option(opt)
    _add_common_options(opt)


def add_search_options(p: argparse.ArgumentParser) -> None:
    """The search's flags (``-T/-B/-N/-K``, budgets, the LLM, ``--offline``) of ``optimize``
    and ``bench``."""
    p.add_argument("--iterations", "-T", type=int, help="iterations T")
    p.add_argument("--beam", "-B", type=int, help="beam width B")
    p.add_argument("--plans", "-N", type=int, help="plans per candidate N")
    p.add_argument("--samples", "-K", type=int, help="samples per plan K")
    p.add_argument("--max-tokens", type=int, help="token budget")
    p.add_argument("--max-wall-s", type=float, help="wall-time budget in seconds")
    p.add_argument("--llm-base-url", help="OpenAI-compatible endpoint")
    p.add_argument("--llm-model", help="model name (enables the LLM agents)")
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument(
        "--offline", action="store_true", help="ignore any LLM settings; tune launch parameters"
    )


def _add_profile_parser(sub: Any) -> None:
    prof = sub.add_parser(
        "profile",
        help="evaluate the files as they are (correctness + latency)",
        description="Evaluate each kernel file as it is (correctness + latency). Several files "
        "are evaluated at once, as many as the target has slots, on the same warm workers "
        "(with --harness, each is measured by that harness); the settings are those of the "
        "first file's project, and files whose projects set others are refused.",
    )
    prof.add_argument(
        "paths",
        nargs="+",
        metavar="path",
        help="kernel file, or a harness file that imports its kernel (several: each profiled)",
    )
    prof.add_argument("--harness", help=_HARNESS_HELP + " (with several paths: of each)")
    prof.add_argument("--dataset", metavar="ROOT", help=_DATASET_HELP)
    prof.add_argument("--kernel", help="the kernel to profile (one path only)")
    _add_gpu_option(prof)
    _add_common_options(prof)


def _add_config_parser(sub: Any) -> None:
    conf = sub.add_parser(
        "config",
        help="print the effective settings and where each came from",
        description="Print the effective settings (key, value, source) and the settings files "
        "that were read, for a kernel file or directory (default: the working directory).",
    )
    conf.add_argument("path", nargs="?", metavar="KERNEL_OR_DIR")
    _add_common_options(conf)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``accelopt`` (sub-commands optimize, profile, memory, runs,
    target, config, bench)."""
    parser = argparse.ArgumentParser(
        prog="accelopt",
        description="Optimize Triton and NKI kernels with beam search and an optimization memory.",
    )
    parser.add_argument("--version", action="version", version=f"accelopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_optimize_parser(sub)
    _add_profile_parser(sub)
    add_memory_parser(sub)
    add_runs_parser(sub)
    add_report_parser(sub)
    add_target_parser(sub)
    _add_config_parser(sub)
    add_bench_parser(
        sub,
        search_options=add_search_options,
        gpu_option=_add_gpu_option,
        common_options=_add_common_options,
    )
    return parser


# --- dispatch ---------------------------------------------------------------------------------

#: command -> handler(args, settings, out=, err=) -> exit status; ``config``'s handler gets the
#: :class:`~accelopt_core.configfiles.EffectiveSettings` (it prints where each value came from).
COMMANDS: dict[str, Any] = {
    "optimize": run_optimize_command,
    "profile": run_profile_command,
    "memory": run_memory_command,
    "runs": run_runs_command,
    "report": run_report_command,
    "target": run_target_command,
    "config": run_config_command,
    **BENCH_COMMANDS,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``accelopt`` console script; returns the exit status (0 success, 1
    the file or the target could not be used, 2 usage errors, 130 interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Console()
    err = Console(stderr=True)
    handler = COMMANDS.get(args.command)
    if handler is None:
        parser.error(f"unknown command {args.command}")
    try:
        effective = effective_settings_for(args)
        print_issues(effective, err)
        if args.command == "config":
            return handler(args, effective, out=out, err=err)
        return handler(args, run_settings(args, effective), out=out, err=err)
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
