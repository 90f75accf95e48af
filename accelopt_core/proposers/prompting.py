"""The agents' prompts: the prompt files (``accelopt_core/proposers/prompts/*.txt``), how they
are filled, and the values that fill them (the parent's profile, experiences from the
optimization memory, the failing lines for the fixer, the planner's per-call hint).

Each role's file starts with ``ROLE: <role>`` (the LLM test double routes on it), then the
system prompt, a line ``=== USER ===``, and the user-message template. Placeholders are
``{{name}}``; values are inserted in one pass (a value that itself contains ``{{...}}`` is not
expanded again). Files are read with :mod:`importlib.resources`, so they work from a wheel.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

from accelopt_core import devicefacts
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers.base import ROLES, ProposalContext

#: The roles that have a prompt file (``prompts/<role>.txt``): every agent role.
ROLE_FILES = ROLES
USER_MARKER = "=== USER ==="
#: Longest error text passed to the fixer (the tail is kept: tracebacks end with the cause).
MAX_ERROR_CHARS = 4000
#: Reward-hack experiences shown to the planner as "do not" examples (issue 10).
MAX_HACKS_SHOWN = 3
#: What a prompt loses, in this order, when it exceeds the model's context (issue 30): the
#: memory's experiences first, then the profile glossary. (label, prompt values).
TRIMMABLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("experiences", ("positives", "negatives")),
    ("glossary", ("glossary",)),
)
#: What stands in a trimmed value's place.
LEFT_OUT = "(left out: the prompt did not fit the model's context)"
#: What the planner is shown without positive / negative experiences.
NO_POSITIVES, NO_NEGATIVES = "(none yet)", "(none recorded)"
#: Characters per token used to estimate what trimming saves: about 4 for English text and
#: code (OpenAI's rule of thumb, help.openai.com "What are tokens and how to count them").
CHARS_PER_TOKEN = 4
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
#: What each of several planner calls drafted in parallel looks at first, so that they differ.
_ANGLES = [
    "memory traffic (fusion, fewer passes, wider loads)",
    "parallelism and launch configuration (grid, block sizes, num_warps, num_stages)",
    "the algorithm (one-pass / online formulations, fewer operations)",
    "data reuse and tiling (keeping tiles on chip, loop order)",
    "instruction-level work (hoisting invariants, removing masks and conversions)",
]


@cache
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.txt`` (``planner``, ``triton_api``, ``profile_glossary``...).
    Raises FileNotFoundError for an unknown name."""
    path = resources.files("accelopt_core.proposers").joinpath("prompts", f"{name}.txt")
    return path.read_text(encoding="utf-8")


def placeholders(name: str) -> set[str]:
    """The ``{{name}}`` placeholders a prompt file uses."""
    return set(_PLACEHOLDER.findall(load_prompt(name)))


def fill(template: str, values: dict[str, str]) -> str:
    """Replace every ``{{key}}`` in ``template``. Raises KeyError naming a missing value."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise KeyError(f"prompt placeholder {{{{{key}}}}} has no value")
        return str(values[key])

    return _PLACEHOLDER.sub(sub, template)


def render(role: str, values: dict[str, str]) -> list[dict[str, str]]:
    """Chat messages ``[system, user]`` for ``role`` with ``values`` filled in.

    Raises KeyError when a placeholder has no value (a programming error, caught by tests)."""
    text = load_prompt(role)
    system, sep, user = text.partition(f"\n{USER_MARKER}\n")
    if not sep:
        raise ValueError(f"prompt file {role}.txt has no '{USER_MARKER}' line")
    return [
        {"role": "system", "content": fill(system, values).strip() + "\n"},
        {"role": "user", "content": fill(user, values).strip() + "\n"},
    ]


_NOTHING = (LEFT_OUT, NO_POSITIVES, NO_NEGATIVES)


def trim_prompt(
    values: dict[str, str], excess_tokens: int | None
) -> tuple[dict[str, str], list[str]]:
    """The prompt values with :data:`TRIMMABLE` parts replaced by :data:`LEFT_OUT`, in order,
    until the characters removed cover ``excess_tokens`` x :data:`CHARS_PER_TOKEN` (every part
    the prompt has when the excess is unknown; a part that is empty or says there is nothing,
    "(none yet)", is not a part). Returns (values, labels of what was left out); no label when
    the prompt has nothing left to trim."""
    out = dict(values)
    cut: list[str] = []
    saved = 0
    for label, keys in TRIMMABLE:
        present = [k for k in keys if out.get(k) not in (None, "", *_NOTHING)]
        if not present:
            continue
        saved += sum(len(out[k]) for k in present)
        out.update({k: LEFT_OUT for k in present})
        cut.append(label)
        if excess_tokens is not None and saved >= excess_tokens * CHARS_PER_TOKEN:
            break
    return out, cut


def api_note(backend: str) -> str:
    """The short API note for ``triton`` or ``nki`` (Triton's for anything else)."""
    return load_prompt("nki_api" if backend == "nki" else "triton_api").strip()


# -- the values ------------------------------------------------------------------------------
def common_values(ctx: ProposalContext) -> dict[str, str]:
    """The values every role's prompt uses: backend name, its API note, kernel and launcher."""
    backend = getattr(ctx.original, "backend", None)
    backend = backend if backend in ("triton", "nki") else "triton"
    return {
        "backend": "NKI" if backend == "nki" else "Triton",
        "api_note": api_note(backend),
        "kernel_name": ctx.kernel_name,
        "entry": ctx.entry,
    }


def proposal_hint(i: int, n: int) -> str:
    """The planner's hint for call ``i`` (0-based) of ``n`` drafted in parallel: which angle to
    look at first, so that the plans differ; empty when only one plan is asked for."""
    if n <= 1:
        return ""
    return (
        f"This is proposal {i + 1} of {n} drafted in parallel; to make them differ, "
        f"look first at {_ANGLES[i % len(_ANGLES)]}.\n"
    )


def format_profile(result: EvalResult, baseline: EvalResult | None = None) -> str:
    """The planner's view of one evaluation: latency (ms, median with p20/p80), timing mode,
    device, % of peak and bound, achieved GB/s and TFLOP/s, the NKI profile metrics, the GPU
    facts of the compile stage and the shapes checked
    (:func:`accelopt_core.devicefacts.prompt_lines`), and the speedup over the baseline
    (baseline latency / this latency). Missing numbers are left out."""
    lines: list[str] = []
    if not result.ok:
        lines.append(f"status: {result.status} ({result.message or 'no message'})")
    lines += _timing_lines(result) + _roofline_lines(result) + _metric_lines(result)
    lines += devicefacts.prompt_lines(getattr(result, "metrics", None))
    if (
        baseline is not None
        and baseline.latency_ms
        and result.latency_ms
        and baseline is not result
    ):
        speedup = baseline.latency_ms / result.latency_ms
        lines.append(
            f"baseline latency: {baseline.latency_ms:.4g} ms; speedup so far {speedup:.2f}x"
        )
    return "\n".join(lines)


def _timing_lines(result: EvalResult) -> list[str]:
    """Latency (median, p20/p80) and how and where it was measured."""
    lines: list[str] = []
    if result.latency_ms is not None:
        spread = ""
        if result.p20_ms is not None and result.p80_ms is not None:
            spread = f" (p20 {result.p20_ms:.4g} ms, p80 {result.p80_ms:.4g} ms)"
        lines.append(f"latency: {result.latency_ms:.4g} ms median{spread}")
    where = f" on {result.device}" if result.device else ""
    lines.append(f"timing: {result.timing}{where}")
    if result.timing == "interpreter":
        lines.append(
            "note: measured with the Triton interpreter on a CPU; the latency says nothing "
            "about GPU speed, so reason from the code and the byte/flop counts; the "
            "interpreter ignores num_warps and num_stages, so a change to them alone is not "
            "credited"
        )
    elif result.timing == "simulated":
        lines.append(
            "note: measured in the NKI CPU simulator; the latency counts instructions, not "
            "Trainium speed, so reason from the code, the tiles and the byte/flop counts"
        )
    return lines


def _roofline_lines(result: EvalResult) -> list[str]:
    """% of peak with the bound, and the achieved GB/s and TFLOP/s."""
    lines: list[str] = []
    if result.pct_of_peak is not None:
        bound = f", {result.bound}-bound" if result.bound else ""
        lines.append(f"% of peak: {result.pct_of_peak:.1f}%{bound}")
    elif result.bound:
        lines.append(f"bound: {result.bound}")
    achieved = []
    if result.gbps is not None:
        achieved.append(f"{result.gbps:.4g} GB/s")
    if result.tflops is not None:
        achieved.append(f"{result.tflops:.4g} TFLOP/s")
    if achieved:
        lines.append("achieved: " + ", ".join(achieved))
    return lines


def _metric_lines(result: EvalResult) -> list[str]:
    """The Neuron profile metrics (``result.metrics``, from ``neuron-profile``): memory traffic
    by level, spills, hardware FLOPs, arithmetic intensity and engine active-time %."""
    m = getattr(result, "metrics", None) or {}
    lines: list[str] = []
    traffic = [
        f"{level.upper()} read {m[f'{level}_read_bytes'] / 1e6:.3g} MB / write "
        f"{m.get(f'{level}_write_bytes', 0) / 1e6:.3g} MB"
        for level in ("hbm", "sbuf", "psum")
        if isinstance(m.get(f"{level}_read_bytes"), (int, float))
    ]
    if traffic:
        lines.append("memory traffic: " + "; ".join(traffic))
    spill = m.get("spill_save_bytes", 0) + m.get("spill_reload_bytes", 0)
    if spill:
        lines.append(f"spills: {spill / 1e6:.3g} MB saved + reloaded (SBUF overflow to HBM)")
    if m.get("hardware_flops"):
        intensity = m.get("arithmetic_intensity")
        extra = f", arithmetic intensity {intensity:.3g} FLOP/B" if intensity else ""
        lines.append(f"hardware FLOPs: {m['hardware_flops']:.4g}{extra}")
    engines = [
        f"{e} {m[f'{e}_engine_active_time_percent']:.0f}%"
        for e in ("tensor", "vector", "scalar", "gpsimd")
        if isinstance(m.get(f"{e}_engine_active_time_percent"), (int, float))
    ]
    if engines:
        lines.append("engine active time: " + ", ".join(engines))
    return lines


def format_experiences(experiences: list[Any], *, positive: bool) -> str:
    """Memory items for the planner, one per line: ``- [1.8x, softmax on H100] title: rule``.

    Items are duck-typed (``accelopt_core.memory.Experience``: ``title``, ``rule``,
    ``speedup``, ``kernel_name``, ``device``, ``timing``, ``hack``, ``gpu_facts``: what the
    rewrite changed on the GPU, e.g. ``GPU: k on sm_90: registers 44→32, occupancy
    50%→75% ...``; missing attributes are skipped). Reward-hack experiences (``hack`` set) are not rules: they follow the others as
    a separate :func:`format_hacks` section (at most :data:`MAX_HACKS_SHOWN`)."""
    hacks = [e for e in experiences if getattr(e, "hack", None)]
    rules = [e for e in experiences if not getattr(e, "hack", None)]
    text = "\n".join(_experience_line(exp) for exp in rules)
    if not rules:
        text = NO_POSITIVES if positive else NO_NEGATIVES
    return f"{text}\n\n{format_hacks(hacks)}" if hacks else text


def format_hacks(hacks: list[Any]) -> str:
    """The planner's "do not" examples: a heading, then up to :data:`MAX_HACKS_SHOWN` lines
    ``- <rule>: <plan>`` (the trust rule that caught a candidate and the plan it implemented,
    first line, at most 200 characters). Empty for no hacks."""
    if not hacks:
        return ""
    lines = []
    for exp in hacks[:MAX_HACKS_SHOWN]:
        plan = str(getattr(exp, "plan", "") or getattr(exp, "title", "")).strip()
        first = " ".join(plan.splitlines()[0].split())[:200] if plan else "(no plan)"
        lines.append(f"- {getattr(exp, 'hack', '')}: {first}")
    return "# Do not (caught as reward hacks)\n" + "\n".join(lines)


def _experience_line(exp: Any) -> str:
    title = str(getattr(exp, "title", "") or "untitled")
    rule = " ".join(str(getattr(exp, "rule", "") or "").split())
    tags = []
    speedup = getattr(exp, "speedup", None)
    if isinstance(speedup, int | float):
        tags.append(f"{speedup:.2f}x")
    kernel = getattr(exp, "kernel_name", None)
    device = getattr(exp, "device", None)
    if kernel and device:
        tags.append(f"{kernel} on {device}")
    elif kernel or device:
        tags.append(str(kernel or device))
    timing = getattr(exp, "timing", None)
    if timing in ("interpreter", "simulated"):
        tags.append("interpreter-timed" if timing == "interpreter" else "simulator-timed")
    tag = f"[{', '.join(tags)}] " if tags else ""
    line = f"- {tag}{title}: {rule}" if rule and rule != title else f"- {tag}{title}"
    facts = getattr(exp, "gpu_facts", None) or {}
    change = devicefacts.facts_change(facts.get("before"), facts.get("after"))
    return line + "".join(f"\n  GPU: {c}" for c in change[:2])


def format_error(result: EvalResult) -> str:
    """The fixer's view of a failure: the failing line (when known) and the message, cut to
    its last :data:`MAX_ERROR_CHARS` characters."""
    message = result.message or "(no message)"
    if len(message) > MAX_ERROR_CHARS:
        message = "...\n" + message[-MAX_ERROR_CHARS:]
    where = f"line: {result.line}\n" if result.line else ""
    return f"{where}message:\n{message}"


def error_excerpt(source: str, line: int | None, context: int = 3) -> str:
    """Numbered source lines around ``line`` (1-based), the failing one marked ``>>``; empty
    when the line is unknown or out of range."""
    lines = source.splitlines()
    if not line or line < 1 or line > len(lines):
        return ""
    lo, hi = max(1, line - context), min(len(lines), line + context)
    width = len(str(hi))
    out = [f"# Failing line {line}:"]
    for n in range(lo, hi + 1):
        mark = ">>" if n == line else "  "
        out.append(f"{mark} {n:>{width}} | {lines[n - 1]}")
    return "\n".join(out) + "\n"
