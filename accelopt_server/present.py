"""Text the user sees: code-action titles, hover and ``accelopt.showMemory`` markdown."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from accelopt_core.devicefacts import not_timed
from accelopt_core.kernelfile import KernelInfo
from accelopt_core.memory.experience import timing_label
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search.phases import phases_line
from accelopt_core.search.report import HOST_TIMING_NOTES, busiest_engine, metrics_lines

from .device_present import device_markdown
from .markdown import code, escape

if TYPE_CHECKING:
    from accelopt_core.memory import Experience
    from accelopt_core.search import Candidate, SearchReport


def candidate_title(candidate: Candidate, *, preview: bool = False) -> str:
    """``AccelOpt: 2.3x faster — single-pass online softmax`` (plain text, a code action's
    title); with ``preview``: ``AccelOpt: preview 2.3x faster — ...``."""
    speedup = candidate.speedup
    verb = "AccelOpt: preview" if preview else "AccelOpt:"
    head = f"{verb} {speedup:.2f}x faster" if speedup else f"{verb} faster"
    plan = (candidate.plan_title or "").strip().splitlines()
    return f"{head} — {plan[0][:80]}" if plan else head


def _experience_line(exp: Experience) -> str:
    title = (exp.title or "untitled").strip()
    speedup = exp.speedup
    seen = exp.seen
    device = exp.device or "unknown device"
    timing = exp.timing
    mark = "✅" if exp.positive else "❌"
    speed = f"{speedup:.2f}x" if isinstance(speedup, (int, float)) else "?x"
    label = timing_label(timing)
    where = f"{device} ({label})" if label else device
    line = f"- {mark} **{escape(title)}** — {speed} on {escape(where)}, seen {seen}×"
    if exp.kernel_name:
        line += f" (from {code(exp.kernel_name)})"
    rule = (exp.rule or "").strip()
    if rule and rule != title:
        first = rule.splitlines()[0][:200]
        line += f"\n  {escape(first, line_start=True)}"
    return line


def experiences_markdown(
    positives: Iterable[Experience], negatives: Iterable[Experience], problem: str | None = None
) -> str:
    """Bullets of positive then negative experiences, or a note when there are none."""
    pos, neg = list(positives), list(negatives)
    parts: list[str] = []
    if problem:
        parts.append(f"_{escape(problem)}_")
    if pos:
        parts.append(
            "What worked on kernels like this:\n" + "\n".join(_experience_line(e) for e in pos)
        )
    if neg:
        parts.append("What did not help:\n" + "\n".join(_experience_line(e) for e in neg))
    if not pos and not neg and not problem:
        parts.append("_The optimization memory holds nothing for kernels like this yet._")
    return "\n\n".join(parts)


def lens_summary(result: EvalResult) -> str:
    """A profile as a code lens says it: ``0.41 ms · 62% of HBM peak · correct`` or, for a
    failure, its status and line only (``compile error · line 12``); the message goes to the
    diagnostic and the hover. A kernel the CPU interpreter cannot run (issue 21) says ``not
    timed``."""
    if result.ok:
        engine = busiest_engine(result.metrics)
        return f"{result.summary()} · {engine}" if engine else result.summary()
    if not_timed(result.metrics):
        return "not timed: the CPU interpreter cannot run it · time it on a GPU target"
    status = result.status.replace("_", " ")
    return f"{status} · line {result.line}" if result.line else status


def profile_line(result: EvalResult | None, version: int | None, current: int | None) -> str:
    """``Last profile: 0.41 ms · 62% of HBM peak · correct`` (with a staleness note)."""
    if result is None:
        return "_Not profiled yet (save the file, or run **AccelOpt: Profile**)._"
    text = f"Last profile: {escape(result.summary())}"
    if result.device:
        text += f" on {escape(result.device)}"
    if version is not None and current is not None and version != current:
        text += " _(before your latest edits)_"
    extra = profile_details(result)
    return f"{text}\n\n{extra}" if extra else text


def profile_details(result: EvalResult) -> str:
    """Markdown under a profile's summary line: the NKI profile metrics
    (:func:`accelopt_core.search.report.metrics_lines`: HBM/SBUF/PSUM bytes, spills, FLOPs,
    engine active-time %), for a result timed on the host (``interpreter``, ``simulated``),
    what that says about the hardware, and for a fresh verdict where its time went
    (:func:`accelopt_core.search.phases.phases_line`); ``""`` when there is none of them."""
    lines = [f"- {escape(line)}" for line in metrics_lines(result.metrics)]
    note = HOST_TIMING_NOTES.get(result.timing)
    if note and result.ok:
        lines.append(f"_{escape(note[0].upper() + note[1:])}._")
    spent = phases_line(result)
    if spent:
        lines.append("\n" + escape(spent[0].upper() + spent[1:]) + ".")  # its own paragraph
    return "\n".join(lines)


def kernel_hover(
    kernel: KernelInfo,
    result: EvalResult | None,
    version: int | None,
    current: int | None,
    memory_md: str,
    job_line: str | None,
) -> str:
    """The hover on a kernel's name: its last profile, the GPU facts of its compiled launches
    and the shapes checked (:func:`accelopt_server.device_present.device_markdown`), a running
    search, and the memory."""
    parts = [
        f"**AccelOpt · {code(kernel.name)}** ({kernel.backend})",
        profile_line(result, version, current),
    ]
    device = device_markdown(result, kernel.name) if result is not None else ""
    if device:
        parts.append(device)
    if job_line:
        parts.append(f"Search: {escape(job_line)}")
    parts.append(memory_md)
    return "\n\n".join(parts)


def api_hover(api_name: str, experiences: list[Experience], problem: str | None) -> str:
    """The hover on a Triton/NKI API call inside a kernel."""
    head = f"**AccelOpt · {code(api_name)}**"
    if problem:
        return f"{head}\n\n_{escape(problem)}_"
    if not experiences:
        return (
            f"{head}\n\n_No experience in the optimization memory mentions {code(api_name)} yet._"
        )
    return f"{head}\n\nExperiences that mention it:\n" + "\n".join(
        _experience_line(e) for e in experiences
    )


def memory_document(
    kernel: KernelInfo,
    positives: list[Experience],
    negatives: list[Experience],
    problem: str | None,
    report: SearchReport | None,
) -> str:
    """``accelopt.showMemory``: the memory for one kernel, and its last search, as markdown."""
    parts = [f"# AccelOpt memory for {code(kernel.name)} ({kernel.backend})"]
    parts.append(experiences_markdown(positives, negatives, problem))
    if report is not None:
        cands = report.candidates
        parts.append(
            f"## Last search\n\nstopped: {escape(str(report.stopped_reason))}, "
            f"{len(cands)} verified improvement(s), target {escape(str(report.target))}, "
            f"timing {escape(str(report.timing))}"
        )
        if report.timing in HOST_TIMING_NOTES:
            parts.append(f"_{escape(HOST_TIMING_NOTES[report.timing])}_")
        for c in cands:
            title = escape(candidate_title(c))
            parts.append(f"- {title} ({code(c.id)}, {escape(c.result.summary())})")
            parts.extend(f"  - {escape(line)}" for line in metrics_lines(c.result.metrics))
    return "\n\n".join(parts)
