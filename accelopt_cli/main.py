"""The ``accelopt`` command line: optimize, profile, memory, target.

This module builds the parser, loads the settings and dispatches to the command's module
(:mod:`~accelopt_cli.optimize`, :mod:`~accelopt_cli.profile`, :mod:`~accelopt_cli.memory`,
:mod:`~accelopt_cli.target`); terminal rendering lives in :mod:`accelopt_cli.render`.

Settings come from the same typed model as the server's: defaults, then an optional
``--settings FILE`` (a JSON file holding the ``accelopt`` section, nested or with dotted keys as in
VS Code's settings.json), then the command-line flags. Invalid values are reported and replaced by
their defaults, exactly as in the editor.

Exit codes: 0 success, 1 the file or the target could not be used, 2 usage errors, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from accelopt_cli.memory import add_memory_parser, run_memory_command
from accelopt_cli.optimize import run_optimize_command
from accelopt_cli.profile import run_profile_command
from accelopt_cli.target import add_target_parser, run_target_command
from accelopt_core import __version__
from accelopt_core.settings import SECTION, Settings, settings_from_sources

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

    Raises SystemExit with a message when the file cannot be read or is not a JSON object."""
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


def _flag_layer(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as command-line flags, as a nested settings mapping."""
    flags: dict[str, Any] = {"search": {}, "llm": {}}
    for flag, key in _SEARCH_FLAGS:
        if getattr(args, flag, None) is not None:
            flags["search"][key] = getattr(args, flag)
    if getattr(args, "target", None):
        flags["target"] = args.target
    if getattr(args, "memory_dir", None):
        flags["memoryDir"] = args.memory_dir
    for flag, key in _LLM_FLAGS:
        if getattr(args, flag, None):
            flags["llm"][key] = getattr(args, flag)
    return flags


def load_settings(args: argparse.Namespace, err: Console) -> Settings:
    """The settings of one run: defaults, then ``--settings FILE``, then the flags; invalid
    values are printed as warnings on ``err`` and replaced by their defaults. ``--offline``
    clears every LLM model (the offline proposer runs)."""
    layers: list[dict[str, Any]] = []
    if getattr(args, "settings", None):
        layers.append(read_settings_file(args.settings))
    layers.append(_flag_layer(args))
    settings, issues = settings_from_sources(*layers)
    if getattr(args, "offline", False):
        settings.llm.model = None
        for role in _LLM_ROLES:
            getattr(settings.llm, role).model = None
    for issue in issues:
        err.print(f"[yellow]warning:[/] {issue}")
    return settings


# --- parser -----------------------------------------------------------------------------------


def _add_common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--settings", metavar="FILE", help="JSON file with the accelopt settings section"
    )
    p.add_argument("--target", help="local | ssh://[user@]host[:port] | ray://host:port | ray:auto")
    p.add_argument("--memory-dir", help="optimization memory and evaluation cache directory")
    p.add_argument("--json", action="store_true", help="print one JSON report on stdout")


def _add_optimize_parser(sub: Any) -> None:
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
    _add_common_options(opt)


def _add_profile_parser(sub: Any) -> None:
    prof = sub.add_parser("profile", help="evaluate the file as it is (correctness + latency)")
    prof.add_argument("path")
    prof.add_argument("--kernel")
    _add_common_options(prof)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``accelopt`` (sub-commands optimize, profile, memory, target)."""
    parser = argparse.ArgumentParser(
        prog="accelopt",
        description="Optimize Triton and NKI kernels with beam search and an optimization memory.",
    )
    parser.add_argument("--version", action="version", version=f"accelopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_optimize_parser(sub)
    _add_profile_parser(sub)
    add_memory_parser(sub)
    add_target_parser(sub)
    return parser


# --- dispatch ---------------------------------------------------------------------------------

#: command -> handler(args, settings, out=, err=) -> exit status.
COMMANDS = {
    "optimize": run_optimize_command,
    "profile": run_profile_command,
    "memory": run_memory_command,
    "target": run_target_command,
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
        return handler(args, load_settings(args, err), out=out, err=err)
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
