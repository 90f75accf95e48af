"""The one typed settings model shared by the CLI, the language server and the VS Code extension.

Settings live under the section ``accelopt``. Keys are camelCase as editors expect
(``accelopt.search.beamWidth``); Python code uses the snake_case attribute names
(``settings.search.beam_width``). Both spellings are accepted on input.

:func:`load_settings` never raises on bad values: each invalid value is replaced by its
default and reported as a :class:`SettingsIssue` naming the setting and the default used.
:func:`vscode_configuration` renders the same model as the ``contributes.configuration``
properties of ``client-vscode/package.json``, so the extension cannot drift from it. The groups
the model nests (``llm``, ``search``, ``evaluation``, ``gate``, ``ssh``) live in
:mod:`accelopt_core.settings_groups` and are re-exported here.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from accelopt_core.settings_groups import (
    EvaluationSettings,
    GateSettings,
    LLMSettings,
    ModelPrice,
    RoleSettings,
    SearchSettings,
    SSHSettings,
    _Model,
)
from accelopt_core.settings_schema import markdown_table, vscode_properties

__all__ = [
    "GPU_NAMES",
    "MEMORY_DIR_ENV",
    "SECTION",
    "EvaluationSettings",
    "GateSettings",
    "GpuName",
    "LLMSettings",
    "ModelPrice",
    "RoleSettings",
    "SSHSettings",
    "SearchSettings",
    "Settings",
    "SettingsIssue",
    "clean_settings",
    "deep_merge",
    "load_settings",
    "settings_markdown",
    "vscode_configuration",
]

SECTION = "accelopt"
MEMORY_DIR_ENV = "ACCELOPT_MEMORY_DIR"

#: The GPUs the Triton kernels can be compiled for ahead of time (issue 21), by the names of
#: the roofline's peak table: H100 SXM5 / H100 PCIe / H200 are sm_90, A100 sm_80, B200 sm_100
#: (NVIDIA's datasheets; CUDA C Programming Guide, compute capabilities). ``"none"`` turns
#: the compile stage off.
GpuName = Literal["H100 SXM5", "H100 PCIe", "H200", "A100", "B200", "none"]
GPU_NAMES: tuple[str, ...] = get_args(GpuName)


class Settings(_Model):
    """Everything AccelOpt can be configured with (section ``accelopt``)."""

    target: str = Field(
        "local",
        description="Where candidates run: 'local', 'ssh://[user@]host[:port]', "
        "'ray://host:port' or 'ray:auto'.",
    )
    gpu: GpuName = Field(
        "H100 SXM5",
        description="The GPU the Triton kernels are for: every launch is also compiled for its "
        "architecture (H100 SXM5, H100 PCIe and H200 sm_90, A100 sm_80, B200 sm_100), a kernel "
        "that does not compile or cannot launch there is rejected, and its registers, spills, "
        "shared memory and occupancy are reported. On a CUDA target the GPU found there is used "
        "(a mismatch is a warning). 'none' turns this off.",
    )
    ssh: SSHSettings = Field(default_factory=SSHSettings, description="SSH target options.")
    evaluation: EvaluationSettings = Field(
        default_factory=EvaluationSettings, description="Evaluation of one candidate."
    )
    search: SearchSettings = Field(default_factory=SearchSettings, description="Beam search.")
    gate: GateSettings = Field(
        default_factory=GateSettings, description="The static gate in front of every evaluation."
    )
    llm: LLMSettings = Field(default_factory=LLMSettings, description="LLM endpoint and roles.")
    profile_on_save: bool = Field(
        True, description="Profile the kernels of a file with a harness when it is saved."
    )
    max_code_actions: int = Field(
        5, ge=0, le=50, description="Most ranked improvements offered as code actions per kernel."
    )
    harness_globs: list[str] = Field(
        ["**/bench_*.py", "**/*_bench.py", "**/benchmarks/**/*.py"],
        description="Glob patterns, relative to each workspace folder, of the files the server "
        "searches for a benchmark harness that imports a kernel module without one of its own.",
    )
    memory_dir: str | None = Field(
        None,
        description=f"Directory of the optimization memory and evaluation cache. Empty: "
        f"${MEMORY_DIR_ENV}, else the user cache directory.",
    )
    log_level: Literal["error", "warning", "info", "debug"] = Field(
        "info", description="Server log level (window/logMessage)."
    )

    @field_validator("target")
    @classmethod
    def _check_target(cls, value: str) -> str:
        value = value.strip()
        if value == "local" or value == "ray:auto":
            return value
        for scheme in ("ssh://", "ray://"):
            if value.startswith(scheme) and len(value) > len(scheme):
                return value
        raise ValueError(
            "must be 'local', 'ssh://[user@]host[:port]', 'ray://host:port' or 'ray:auto'"
        )

    @property
    def gpu_name(self) -> str | None:
        """The GPU the kernels are compiled for (``EvalRequest.gpu``): the ``gpu`` setting,
        None for ``"none"`` (no compile stage)."""
        return None if self.gpu == "none" else self.gpu

    def resolved_memory_dir(self) -> Path:
        """The memory directory: the setting, else ``$ACCELOPT_MEMORY_DIR``, else the user
        cache directory from platformdirs (``~/.cache/accelopt`` on Linux)."""
        if self.memory_dir:
            return Path(self.memory_dir).expanduser()
        env = os.environ.get(MEMORY_DIR_ENV)
        if env:
            return Path(env).expanduser()
        from platformdirs import user_cache_dir

        return Path(user_cache_dir("accelopt", appauthor=False))


@dataclass(frozen=True)
class SettingsIssue:
    """One invalid setting: its dotted key (``accelopt.search.beamWidth``), why, the default
    that was used instead, and where the value came from when that is a file
    (``/repo/pyproject.toml [tool.accelopt]``)."""

    key: str
    message: str
    default: Any
    source: str | None = None

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return (
            f"{where}Invalid setting {self.key}: {self.message}; using the default "
            f"{self.default!r}."
        )


def _camel_path(loc: tuple[Any, ...]) -> list[str]:
    return [to_camel(p) if isinstance(p, str) else str(p) for p in loc]


def _default_at(path: list[str]) -> Any:
    node: Any = Settings()
    for part in path:
        if isinstance(node, BaseModel):
            name = next(
                (
                    n
                    for n, f in type(node).model_fields.items()
                    if (f.alias or n) == part or n == part
                ),
                None,
            )
            if name is None:
                return None
            node = getattr(node, name)
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    if isinstance(node, BaseModel):
        return node.model_dump(by_alias=True)
    return node


def _delete_path(data: dict[str, Any], loc: tuple[Any, ...]) -> bool:
    """Remove the value at ``loc`` (trying both spellings of each key). True when removed."""
    node: Any = data
    for i, part in enumerate(loc):
        candidates = [part, to_camel(part)] if isinstance(part, str) else [part]
        key = next((c for c in candidates if isinstance(node, dict) and c in node), None)
        if key is None:
            return False
        if i == len(loc) - 1:
            del node[key]
            return True
        node = node[key]
    return False


def clean_settings(
    raw: Mapping[str, Any] | None, source: str | None = None
) -> tuple[dict[str, Any], list[SettingsIssue]]:
    """``raw`` (the ``accelopt`` section, camelCase or snake_case keys) without its invalid values.

    Every value that fails validation is dropped (its default applies) and yields one
    :class:`SettingsIssue` naming the key, why, the default, and ``source`` (where ``raw`` came
    from, e.g. a file path). Unknown keys are kept and ignored later. Never raises on user input.
    """
    data: dict[str, Any] = copy.deepcopy(dict(raw)) if isinstance(raw, Mapping) else {}
    issues: list[SettingsIssue] = []
    for _ in range(200):
        try:
            Settings.model_validate(data)
            return data, issues
        except ValidationError as exc:
            found = _drop_invalid(data, exc, source)
            if not found:
                break
            issues.extend(found)
    issues.append(
        SettingsIssue(key=SECTION, message="unreadable settings", default="defaults", source=source)
    )
    return {}, issues


def _drop_invalid(
    data: dict[str, Any], exc: ValidationError, source: str | None
) -> list[SettingsIssue]:
    issues = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        # A bad element inside a dict/list: drop the whole top-most container entry.
        while loc and not _delete_path(data, loc):
            loc = loc[:-1]
        if not loc:
            continue
        path = _camel_path(loc)
        issues.append(
            SettingsIssue(
                key=".".join([SECTION, *path]),
                message=str(err["msg"]),
                default=_default_at(path),
                source=source,
            )
        )
    return issues


def load_settings(raw: Mapping[str, Any] | None) -> tuple[Settings, list[SettingsIssue]]:
    """Validate a settings mapping (the ``accelopt`` section), falling back per value.

    ``raw`` may use camelCase or snake_case keys and may be ``None``. Every value that fails
    validation is dropped and replaced by its default; each such value yields one
    :class:`SettingsIssue` (:func:`clean_settings`). Unknown keys are ignored. Never raises on
    user input.
    """
    data, issues = clean_settings(raw)
    return Settings.model_validate(data), issues


def deep_merge(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """Merge ``other`` into ``into`` in place: nested mappings merge, other values replace,
    ``None`` values are skipped."""
    for key, value in other.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value) if isinstance(value, Mapping) else value


def vscode_configuration() -> dict[str, dict[str, Any]]:
    """The settings model as VS Code ``contributes.configuration.properties`` (dotted keys,
    JSON type, default, bounds, enum, description): :mod:`accelopt_core.settings_schema`."""
    return vscode_properties(Settings, SECTION)


def settings_markdown() -> str:
    """The markdown table of every setting (``python -m accelopt_core.settings``; the docs'
    generated settings page holds it, and a test checks that):
    :mod:`accelopt_core.settings_schema`."""
    return markdown_table(vscode_configuration())


if __name__ == "__main__":
    print(settings_markdown())
