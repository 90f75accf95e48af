"""Terminal text of the GPU facts and the shapes checked (issues 21 and 22) for ``accelopt
profile`` and ``accelopt optimize``; the words come from :mod:`accelopt_core.devicefacts`."""

from __future__ import annotations

from accelopt_core import devicefacts
from accelopt_core.onsite.protocol import EvalResult

__all__ = ["checked_lines", "device_lines", "ranking_needs_timing", "result_warnings"]


def ranking_needs_timing(metrics: dict) -> str:
    """What ``accelopt optimize`` says about a baseline the CPU interpreter cannot run:
    ``not ranked: ranking needs timing on a GPU target; the CPU interpreter cannot run this
    kernel (...). Its GPU facts are above; run on a CUDA target (--target ssh://HOST)``."""
    reason = devicefacts.not_timed(metrics) or "the baseline was not timed"
    return (
        f"not ranked: ranking needs timing on a GPU target; {reason}. It compiles for the GPU "
        "(facts above): run the search on a CUDA target (--target ssh://HOST or ray://HOST:PORT)."
    )


def device_lines(metrics: dict) -> list[str]:
    """The GPU facts of the compile stage (:func:`accelopt_core.devicefacts.gpu_lines`), then
    the inputs the result was checked on (``timed on 1 shape, checked on 10 derived inputs: 4
    shapes; values: 4 (...); layouts: 2 (...)``) with each derived input used, skipped or
    left to the search and the property-based search's seed, counts, counterexample and
    examples (:func:`accelopt_core.devicefacts.derived_detail_lines`); ``[]`` without
    either."""
    lines = devicefacts.gpu_lines(metrics)
    summary = devicefacts.derived_summary(metrics)
    if summary:
        lines.append(summary)
        lines += [f"  {line}" for line in devicefacts.derived_detail_lines(metrics)]
    return lines


def checked_lines(metrics: dict) -> list[str]:
    """What every candidate of a search is checked on (the baseline's ``metrics``): ``inputs:
    timed on 1 shape, checked on 9 derived inputs: 4 shapes; values: 4 (...); layouts: 1 (...)
    (every candidate)``, each derived input skipped, with why (issue 29), and those a budget
    left to the property-based search, with why (issue 52); ``[]`` without derived inputs."""
    summary = devicefacts.derived_summary(metrics)
    if not summary:
        return []
    skipped = devicefacts.derived_rows(metrics)[1]
    return (
        [f"inputs: {summary} (every candidate)"]
        + [f"  skipped: {n}: {w}" for n, w in skipped]
        + [f"  {line}" for line in devicefacts.deferred_lines(metrics)]
    )


def result_warnings(result: EvalResult) -> list[str]:
    """The result's warnings and the compile stage's (``metrics["gpu"]["warnings"]``: spills,
    a CUDA device other than the configured one), each once."""
    gpu = result.metrics.get("gpu") if isinstance(result.metrics.get("gpu"), dict) else {}
    extra = gpu.get("warnings") if isinstance(gpu.get("warnings"), list) else []
    return list(dict.fromkeys([*result.warnings, *(str(w) for w in extra)]))
