"""What the editor shows of the GPU facts and the shapes checked (issues 21 and 22): the device
code lens with its tooltip, the profile lens's tooltip and the hover's markdown section.

The words come from :mod:`accelopt_core.devicefacts` (the same as the CLI's); here they get
their markdown form. Text that comes from the user's kernel or the compiler (kernel names,
configs, derived-shape names, reasons) goes through :mod:`accelopt_server.markdown`: code spans
(:func:`~accelopt_server.markdown.code`) or escaped (:func:`~accelopt_server.markdown.escape`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelopt_core import devicefacts
from accelopt_core.onsite.protocol import EvalResult

from .markdown import code, escape

__all__ = ["device_lens", "device_markdown", "profile_tooltip"]


def device_lens(result: EvalResult, kernel: str) -> tuple[str, str] | None:
    """(title, tooltip) of the device lens above ``kernel``: ``sm_90: 44 regs · occupancy 50%
    (registers)``, with every compiled launch's resources and the shapes checked in the
    tooltip; None when the profile carries no device facts for ``kernel``."""
    title = devicefacts.lens_text(result.metrics, kernel)
    if title is None:
        return None
    gpu = result.metrics.get("gpu") if isinstance(result.metrics.get("gpu"), Mapping) else {}
    tips = [f"{kernel} compiled for {gpu.get('device') or '?'} ({gpu.get('arch') or '?'})"]
    for entry in devicefacts.kernel_entries(result.metrics, kernel):
        config = f"[{entry['config']}] " if entry.get("config") else ""
        tips.append(f"{config}{devicefacts.launch_line(entry)}")
    tips += _counts(result.metrics)
    return f"AccelOpt · {title}", "\n".join(tips)


def _counts(metrics: Mapping[str, Any]) -> list[str]:
    """What a lens's tooltip says of the inputs checked, counts only: the summary (checks by
    class, skipped and left to the search) and the search's line (seed, examples tried, checked
    calls of its budget, whether it found a disagreement)."""
    found = (devicefacts.derived_summary(metrics), devicefacts.search_line(metrics))
    return [text for text in found if text]


def profile_tooltip(result: EvalResult) -> str | None:
    """The profile lens's tooltip: for a kernel the interpreter cannot run, ``not timed:
    ...``, then how far the result reaches (``timed on 1 shape, checked on 4 derived inputs: 4
    shapes``) and the search's counts (:func:`_counts`); None when there is nothing to add."""
    untimed = devicefacts.not_timed_line(result.metrics)
    parts = ([untimed] if untimed else []) + _counts(result.metrics)
    return "\n".join(parts) or None


def _launch_markdown(entry: Mapping[str, Any]) -> list[str]:
    """One compiled launch as markdown bullets: config and grid in code spans, its
    resources, and its SASS facts as a sub-bullet."""
    head = code(str(entry["config"])) if entry.get("config") else "launch"
    grid = entry.get("grid")
    if isinstance(grid, list) and grid:
        head += " · grid " + code("×".join(str(g) for g in grid))
    lines = [f"- {head}: {escape(devicefacts.launch_line(entry))}"]
    sass = devicefacts.sass_text(
        entry.get("sass") if isinstance(entry.get("sass"), Mapping) else None
    )
    if sass:
        lines.append(f"  - SASS: {escape(sass)}")
    return lines


def _shapes_markdown(metrics: Mapping[str, Any]) -> list[str]:
    """``Inputs: timed on 1 shape, checked on 10 derived inputs: 4 shapes; values: 4 (...);
    layouts: 2 (...)`` with each derived input used, skipped or left to the search (names in
    code spans, reasons escaped), then the search's seed, counts, counterexample and the
    examples it tried (issue 52)."""
    summary = devicefacts.derived_summary(metrics)
    if not summary:
        return []
    lines = [f"**Inputs:** {escape(summary)}"]
    used, skipped = devicefacts.derived_rows(metrics)
    for name, inputs in used:
        lines.append(f"- checked on {code(name)}" + (f" ({code(inputs)})" if inputs else ""))
    lines += [f"- skipped {code(name)}: {escape(why)}" for name, why in skipped]
    for names, why in devicefacts.grouped_reasons(devicefacts.derived_deferred(metrics)):
        lines.append(f"- left to the search ({escape(why)}): " + ", ".join(code(n) for n in names))
    search = devicefacts.derived_search(metrics)
    line = devicefacts.search_line(metrics)
    if search is not None and line:
        lines.append(f"- {escape(line)}")
        if search["counterexample"]:
            lines.append(f"  - counterexample: {code(search['counterexample'])}")
        if search["examples"]:
            lines.append("  - examples tried: " + ", ".join(code(e) for e in search["examples"]))
    return lines


def device_markdown(result: EvalResult, kernel: str) -> str:
    """The hover's device section for ``kernel``: the GPU and architecture it was compiled
    for, each compiled launch (registers, spills, shared memory, threads, occupancy and its
    limiter, SASS facts), the not-timed note and the inputs checked; ``""`` without any."""
    metrics = result.metrics
    parts: list[str] = []
    untimed = devicefacts.not_timed(metrics)
    if untimed:
        parts.append(f"**Not timed:** {escape(untimed)}; {devicefacts.NOT_TIMED_ADVICE}.")
    entries = devicefacts.kernel_entries(metrics, kernel)
    if entries:
        gpu = metrics.get("gpu") if isinstance(metrics.get("gpu"), Mapping) else {}
        head = (
            f"**GPU facts** of {code(kernel)} on {escape(str(gpu.get('device') or '?'))}"
            f" ({code(str(gpu.get('arch') or '?'))}), compiled ahead of time:"
        )
        lines = [head]
        for entry in entries:
            lines += _launch_markdown(entry)
        parts.append("\n".join(lines))
    shapes = _shapes_markdown(metrics)
    if shapes:
        parts.append("\n".join(shapes))
    return "\n\n".join(parts)
