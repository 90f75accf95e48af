"""The one typed settings model shared by the CLI, the language server and the VS Code extension.

Settings live under the section ``accelopt``. Keys are camelCase as editors expect
(``accelopt.search.beamWidth``); Python code uses the snake_case attribute names
(``settings.search.beam_width``). Both spellings are accepted on input.

:func:`load_settings` never raises on bad values: each invalid value is replaced by its
default and reported as a :class:`SettingsIssue` naming the setting and the default used.
:func:`vscode_configuration` renders the same model as the ``contributes.configuration``
properties of ``client-vscode/package.json``, so the extension cannot drift from it.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from accelopt_core.settings_schema import markdown_table, vscode_properties

SECTION = "accelopt"
MEMORY_DIR_ENV = "ACCELOPT_MEMORY_DIR"

#: The GPUs the Triton kernels can be compiled for ahead of time (issue 21), by the names of
#: the roofline's peak table: H100 SXM5 / H100 PCIe / H200 are sm_90, A100 sm_80, B200 sm_100
#: (NVIDIA's datasheets; CUDA C Programming Guide, compute capabilities). ``"none"`` turns
#: the compile stage off.
GpuName = Literal["H100 SXM5", "H100 PCIe", "H200", "A100", "B200", "none"]
GPU_NAMES: tuple[str, ...] = get_args(GpuName)


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        validate_assignment=True,
    )


class RoleSettings(_Model):
    """Per-role override of the LLM endpoint (planner, executor, summarizer, fixer).

    A field left unset inherits the value from :class:`LLMSettings`.
    """

    base_url: str | None = Field(None, description="OpenAI-compatible base URL for this role.")
    model: str | None = Field(None, description="Model name for this role.")
    api_key_env: str | None = Field(
        None, description="Environment variable holding this role's API key."
    )


class ModelPrice(_Model):
    """Price of one model in US dollars per million tokens (from the provider's price list)."""

    input_per_mtok: float = Field(0.0, ge=0, description="USD per 1M prompt tokens.")
    output_per_mtok: float = Field(0.0, ge=0, description="USD per 1M completion tokens.")


class LLMSettings(_Model):
    """The LLM endpoint. With no ``model`` set, the search uses the offline proposer."""

    base_url: str | None = Field(
        None,
        description="OpenAI-compatible base URL (OpenAI, vLLM, Ollama, llama.cpp server). "
        "Empty uses the openai library's default.",
    )
    model: str | None = Field(
        None, description="Model name. Empty: no LLM, the offline launch-parameter proposer runs."
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="Name of the environment variable that holds the API key (the key itself "
        "is never stored in settings).",
    )
    timeout_s: float = Field(120.0, gt=0, description="Timeout of one LLM request in seconds.")
    max_retries: int = Field(
        3, ge=0, le=10, description="Retries with backoff on rate limits, 5xx and timeouts."
    )
    temperature: float = Field(0.7, ge=0, le=2, description="Sampling temperature.")
    planner: RoleSettings = Field(default_factory=RoleSettings, description="Planner override.")
    executor: RoleSettings = Field(default_factory=RoleSettings, description="Executor override.")
    summarizer: RoleSettings = Field(
        default_factory=RoleSettings, description="Summarizer override."
    )
    fixer: RoleSettings = Field(default_factory=RoleSettings, description="Fixer override.")
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="Optional price table, model name -> USD per 1M input/output tokens, "
        "so a run reports its cost.",
    )
    store_prompts: bool = Field(
        True,
        description="Keep each agent call's prompt and reply in its run's transcript "
        "(memoryDir/runs). False keeps only the role, model, tokens, latency, cost and "
        "verdict of each call.",
    )

    def role(self, name: Literal["planner", "executor", "summarizer", "fixer"]) -> RoleSettings:
        """The effective endpoint of one role: its override where set, else the shared value."""
        override: RoleSettings = getattr(self, name)
        return RoleSettings(
            base_url=override.base_url or self.base_url,
            model=override.model or self.model,
            api_key_env=override.api_key_env or self.api_key_env,
        )

    @property
    def configured(self) -> bool:
        """True when at least the shared model or every role's model is set."""
        return bool(self.model) or all(
            getattr(self, r).model for r in ("planner", "executor", "summarizer")
        )


class SearchSettings(_Model):
    """Beam-search parameters, named as in AccelOpt (arXiv 2511.15915): B, N, K, T."""

    beam_width: int = Field(
        2, ge=1, le=64, description="Beam width B: candidates kept per iteration."
    )
    plans_per_candidate: int = Field(
        2, ge=1, le=64, description="Plans per candidate N proposed by the planner."
    )
    samples_per_plan: int = Field(
        1, ge=1, le=64, description="Samples per plan K: implementations of each plan."
    )
    iterations: int = Field(2, ge=1, le=100, description="Iterations T of the beam search.")
    noise_margin: float = Field(
        0.03,
        ge=0,
        lt=1,
        description="A candidate counts as faster only when its latency is below "
        "(1 - margin) x its parent's latency.",
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Token budget for the whole run; the search stops past it."
    )
    max_wall_s: float | None = Field(
        None, gt=0, description="Wall-time budget in seconds; the search stops past it."
    )
    memory_top_k: int = Field(
        3, ge=0, le=20, description="Positive and negative experiences given to the planner."
    )
    fixer_attempts: int = Field(
        1,
        ge=0,
        le=3,
        description="Tries the fixer gets on a compile or correctness error, or on a reply "
        "that held no usable code (the fixer is shown the parse error).",
    )
    keep_runs: int = Field(
        50,
        ge=0,
        le=1000,
        description="Searches whose run folder (plans, candidates, failures and the agents' "
        "transcript, in memoryDir/runs) is kept; older ones are evicted. 0 keeps none.",
    )
    retime_rounds: int = Field(
        3,
        ge=1,
        le=9,
        description="A/B rounds a beam entrant is re-timed in, interleaved with its parent "
        "(parent, child, parent, child, ...); the step counts only when the child wins a clear "
        "majority of the rounds (2 of 3). Rounds stop once the majority is decided.",
    )


class EvaluationSettings(_Model):
    """How one candidate is evaluated (DESIGN.md, 'Evaluating a candidate')."""

    seeds: int = Field(5, ge=1, le=50, description="Correctness trials on distinct seeds.")
    timeout_s: float = Field(
        120.0, gt=0, description="Hard timeout of one candidate's evaluation in seconds."
    )
    memory_limit_mb: int = Field(
        8192, ge=256, description="Memory limit of one candidate's process in MiB."
    )
    warmup_ms: float = Field(25.0, gt=0, description="Warm-up time before timing, ms (do_bench).")
    rep_ms: float = Field(
        100.0, gt=0, description="Time spent on timed repetitions, ms (do_bench)."
    )
    cpu_slots: int = Field(
        2, ge=1, le=256, description="Concurrent evaluations on a machine without GPUs."
    )
    warm_workers: bool = Field(
        True,
        description="Keep a warm worker that serves every evaluation slot (torch and triton "
        "imported once, one forked process per candidate); false starts a fresh Python per "
        "candidate.",
    )
    max_interpreter_speedup: float = Field(
        50.0,
        gt=1,
        description="A candidate timed by the Triton interpreter more than this many times "
        "faster than the baseline is evaluated again, and rejected (implausible speedup) if "
        "it stands.",
    )
    sizes: str = Field(
        "auto",
        description="The harness's module-level sizes (batch_size, dim, ...; KernelBench "
        "problems keep theirs there): 'auto' scales them down for the CPU interpreter until "
        "the inputs of one call fit 256 KiB (a GPU gets the published sizes), 'published' "
        "never scales, 'batch_size=16,dim=1536' pins those sizes on every target (the rest as "
        "'auto').",
    )

    environment: list[str] = Field(
        default_factory=list,
        description="Extra environment variables passed to the processes that run candidates "
        "(names, or prefixes as 'MYLIB_*'), beyond the sandbox's allowlist (PATH, locale, "
        "LD_LIBRARY_PATH, PYTHON*, TRITON_*, CUDA_*, NVIDIA_*, NEURON_*, ...). The API-key "
        "variables of accelopt.llm are never passed.",
    )

    @field_validator("environment")
    @classmethod
    def _check_environment(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", v.strip())]
        if bad:
            raise ValueError(f"not a variable name or NAME_* prefix: {', '.join(bad)}")
        return [v.strip() for v in value]

    @field_validator("sizes")
    @classmethod
    def _check_sizes(cls, value: str) -> str:
        value = value.strip()
        pin = r"\s*[A-Za-z_]\w*\s*=\s*[1-9]\d*\s*"
        if value in ("auto", "published") or re.fullmatch(rf"{pin}(,{pin})*", value):
            return value
        raise ValueError("must be 'auto', 'published' or pins like 'batch_size=16,dim=1536'")


class GateSettings(_Model):
    """The static gate a candidate passes before it runs (issue 53)."""

    allow_modules: list[str] = Field(
        default_factory=list,
        description="Modules a candidate may import besides those its original file imports, "
        "the kernel stack (torch, triton, numpy, math, nki) and the modules without side "
        "effects (typing, dataclasses, enum, itertools, collections, functools, operator), "
        "e.g. 'einops'; a module's submodules are included. Any other import is rejected as "
        "'gate: module not allowed'. The gate's denylist still applies inside an allowed "
        "module.",
    )

    @field_validator("allow_modules")
    @classmethod
    def _check_allow_modules(cls, value: list[str]) -> list[str]:
        names = [v.strip() for v in value]
        bad = [v for v in names if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", v)]
        if bad:
            raise ValueError(f"not a module name (like 'einops' or 'pkg.sub'): {', '.join(bad)}")
        return names


class SSHSettings(_Model):
    """Options of an ``ssh://`` target."""

    python: str = Field("python3", description="Python interpreter on the remote machine.")
    workdir: str | None = Field(None, description="Working directory on the remote machine.")
    devices: str = Field(
        "0",
        description="Devices to use on the remote, comma separated: CUDA device indices or "
        "Neuron core ids. One evaluation runs per device at a time.",
    )
    identity_file: str | None = Field(None, description="Private key file (else the SSH agent).")
    known_hosts: str | None = Field(
        None, description="known_hosts file used to verify the host key (else ~/.ssh/known_hosts)."
    )
    connect_timeout_s: float = Field(15.0, gt=0, description="Connection timeout in seconds.")


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
    """The README's markdown table of every setting (``python -m accelopt_core.settings``; a
    test checks the README holds it): :mod:`accelopt_core.settings_schema`."""
    return markdown_table(vscode_configuration())


if __name__ == "__main__":
    print(settings_markdown())
