"""Where one evaluation's time went, as one line (issue 50): the judge's phases
(``metrics["phases_s"]``) and a warm worker's kept inputs and references
(``metrics["reference_store"]``). The last line of ``accelopt profile`` and of the language
server's profile hover."""

from __future__ import annotations

from ..onsite.protocol import EvalResult

#: The words for the judge's phases (``metrics["phases_s"]``, written by
#: ``accelopt_core.onsite.triton.evaluation.PhaseClock``).
PHASE_WORDS = {
    "start": "start",
    "load": "loading",
    "correctness": "correctness",
    "derived_inputs": "derived inputs",
    "derived_probe": "search examples",
    "compile_stage_wait": "compile stage",
    "timing": "timing",
    "gpu_facts": "GPU facts",
}


def phases_line(result: EvalResult) -> str | None:
    """Where a fresh evaluation's wall time went, s: ``evaluated in 6.93 s: worker 3.07 ·
    start 0.07 · correctness 1.56 · timing 0.88 · derived inputs 1.26 · ...``; ``worker`` is
    what the judge's phases do not cover (starting or reaching the worker, the static gate).
    None for a cached result or one without phases. The last line of ``accelopt profile`` and
    of the language server's profile hover."""
    phases = (result.metrics or {}).get("phases_s")
    if result.cached or not isinstance(phases, dict) or not phases or result.eval_s is None:
        return None
    spent = {k: float(v) for k, v in phases.items() if isinstance(v, (int, float))}
    parts = [f"worker {max(result.eval_s - sum(spent.values()), 0.0):.2f}"]
    parts += [f"{PHASE_WORDS.get(k, k)} {v:.2f}" for k, v in spent.items() if v >= 0.005]
    return f"evaluated in {result.eval_s:.2f} s: " + " · ".join(parts) + _store_words(result)


def _store_words(result: EvalResult) -> str:
    """``; inputs and references: 12 kept from earlier evaluations, 3 made`` (issue 50, item
    4: ``metrics["reference_store"]`` of a warm worker), with why some are not kept; ``""``
    without, and for an evaluation that found nothing kept and kept everything (the first of a
    search, a one-off profile)."""
    kept = (result.metrics or {}).get("reference_store")
    if not isinstance(kept, dict):
        return ""
    reused, made, note = kept.get("reused"), kept.get("made"), kept.get("note")
    if type(reused) is not int or type(made) is not int:
        return ""
    if reused == 0 and not isinstance(note, str):  # a first evaluation: nothing to say
        return ""
    words = f"; inputs and references: {reused} kept from earlier evaluations, {made} made"
    return words + (f" (not kept: {str(note)[:200]})" if isinstance(note, str) else "")
