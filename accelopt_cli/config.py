"""``accelopt config [KERNEL_OR_DIR] [--json]``: the effective settings and where each came from.

Prints every setting as a table (key, value, source: ``default``, ``user config PATH``,
``project file PATH``, ``settings file PATH`` or ``command line``), then the settings files that
were read. The project file is looked for from ``KERNEL_OR_DIR`` (default: the working directory),
as ``accelopt optimize`` / ``profile`` do. Invalid values are printed on stderr by
:func:`accelopt_cli.main.main` (located: file, key, why); ``--json`` also lists them. Exit 0.

API keys are never settings (``llm.apiKeyEnv`` names the environment variable), and unknown keys
are dropped by the model; still, a key that looks like a secret is shown as ``(hidden)``.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelopt_core.configfiles import DEFAULTS, EffectiveSettings, user_config_path

__all__ = ["config_report", "run_config_command"]

#: The last part of a key that would hold a secret value (``apiKey``, ``token``, ...).
_SECRET = re.compile(r"(?i)(api_?key|secret|password|token)$")
HIDDEN = "(hidden)"


def _shown(key: str, value: Any) -> Any:
    return HIDDEN if _SECRET.search(key.rsplit(".", 1)[-1]) and value else value


def config_report(effective: EffectiveSettings) -> dict[str, Any]:
    """The JSON form: ``settings`` (``[{key, value, source}]`` in model order, keys dotted
    camelCase without the ``accelopt.`` prefix), ``files`` (``[{layer, path}]`` of the files
    read, lowest precedence first), ``userConfig`` (where the user config is looked for) and
    ``issues`` (their located texts)."""
    return {
        "settings": [
            {"key": key, "value": _shown(key, value), "source": source}
            for key, value, source in effective.rows()
        ],
        "files": [
            {"layer": layer.name, "path": str(layer.path)}
            for layer in effective.layers
            if layer.path is not None
        ],
        "userConfig": str(user_config_path()),
        "issues": list(dict.fromkeys(str(issue) for issue in effective.issues)),
    }


def _cell(value: Any) -> str:
    if value is None:
        return "[dim]unset[/]"
    return escape(value if isinstance(value, str) else json.dumps(value))


def settings_table(report: dict[str, Any]) -> Table:
    """The ``settings`` rows of :func:`config_report` as a rich table; values set by a layer
    are bold, defaults dim."""
    table = Table(title="effective settings", title_justify="left")
    table.add_column("key", no_wrap=True, style="cyan")
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    for row in report["settings"]:
        default = row["source"] == DEFAULTS
        source = f"[dim]{DEFAULTS}[/]" if default else f"[bold]{escape(row['source'])}[/]"
        table.add_row(row["key"], _cell(row["value"]), source)
    return table


def _print_files(out: Console, report: dict[str, Any]) -> None:
    if not report["files"]:
        out.print("no settings file was read")
    for entry in report["files"]:
        out.print(f"read {escape(entry['layer'])}: {escape(entry['path'])}")
    if not any(entry["layer"] == "user config" for entry in report["files"]):
        out.print(f"[dim]no user config at {escape(report['userConfig'])}[/]")


def run_config_command(
    args: argparse.Namespace,
    effective: EffectiveSettings,
    *,
    out: Console | None = None,
    err: Console | None = None,
) -> int:
    """Print ``effective`` (from :func:`accelopt_cli.main.effective_settings_for`) as a table
    and the files read, or as one JSON object with ``--json``. Returns 0."""
    out = out or Console()
    report = config_report(effective)
    if getattr(args, "json", False):
        out.file.write(json.dumps(report, indent=2) + "\n")
        out.file.flush()
        return 0
    out.print(settings_table(report))
    _print_files(out, report)
    return 0
