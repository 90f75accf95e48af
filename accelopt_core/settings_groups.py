"""The groups of the settings model (:class:`accelopt_core.settings.Settings` nests them): the
LLM endpoint and its roles, the beam search, the evaluation of one candidate, the static gate and
the SSH target, on one shared base model (camelCase aliases, extra keys ignored, assignment
validated). Import them from :mod:`accelopt_core.settings`, which re-exports each."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel


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
    counterexample_search: bool = Field(
        True,
        description="Before a candidate faster than its parent or the baseline is ranked, "
        "written or remembered as a positive experience, search for an input on which it "
        "disagrees with the baseline (Hypothesis: seeded, shrinking, at most twice one "
        "evaluation's checked calls); false turns the search off.",
    )
    search_seed: int = Field(
        1234,
        ge=0,
        le=2**32 - 1,
        description="Seed of the counterexample search: the same seed, harness and candidate "
        "draw the same examples (the seed is in every report and message).",
    )
    reference_store_mb: int | None = Field(
        None,
        ge=0,
        description="Memory (MiB) a warm worker may keep the harness's inputs and reference "
        "outputs in between evaluations, so a search computes them once per shape, seed and "
        "derived input instead of once per candidate; unset: a quarter of the memory available "
        "when an evaluation starts (the container's, when it has less), 0: nothing kept (each "
        "evaluation asks the reference again).",
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
