"""The judge's probe mode (issue 52): the counterexample search's examples, one verdict each.

The host's search (:mod:`accelopt_core.evaluation.counterexample`) sends the examples it draws
as derived-input descriptors in a request's ``derived_probe``; :func:`probe` checks the
evaluated code on each and answers a verdict per example, never failing the evaluation, and
writes a failing example's inputs as a person reads them (:func:`shown_inputs`). Standard
library at module level.
"""

from __future__ import annotations

from collections.abc import Callable

from ..runtime.failures import Failure
from . import derived_inputs
from .derived_checks import _ENDED, _MAX_WHY, Unusable, _dead, _where

#: A probed example's verdicts (:func:`probe`).
PROBE_VERDICTS = ("ok", "unusable", "wrong", "fails", "not run")


def probe(ref, check: Callable, torch, listed: list, n_inputs: int | None = None) -> list[dict]:
    """Probe mode (issue 52's search): check the evaluated code on each descriptor of
    ``listed`` and report, never raise, one verdict per descriptor, in order: ``{"verdict":
    "ok" | "unusable" | "wrong" | "fails" | "not run", "why": str}``; for ``wrong`` and
    ``fails`` also ``"shown"``, the inputs as :func:`shown_inputs` writes them. ``unusable``:
    malformed, or the reference cannot run (or is not finite) on it; ``not run``: the
    evaluated code's process ended on an earlier one."""
    out: list[dict] = []
    dead = False
    for raw in listed:
        desc = derived_inputs.checked(raw, n_inputs if n_inputs is not None else 1 << 16)
        if dead:
            out.append({"verdict": "not run", "why": _ENDED})
            continue
        if desc is None:
            out.append({"verdict": "unusable", "why": "malformed derived-input descriptor"})
            continue
        seed = int(desc.get("seed") or 1)
        try:
            seg, inputs, expected = ref.derived_case(
                seed, desc.get("shape"), desc, torch, kept=False
            )
        except Unusable as exc:
            out.append({"verdict": "unusable", "why": str(exc)[:_MAX_WHY]})
            continue
        try:
            check((seed, seg, inputs, expected), _where(desc))
        except Failure as failure:
            status = failure.result.get("status")
            verdict = "wrong" if status == "incorrect" else "fails"
            why = str(failure.result.get("message") or status)
            where = _where(desc)
            why = why[len(where) + 2 :] if why.startswith(f"{where}: ") else why
            why = why.replace(f" (on {where})", "")[:_MAX_WHY]
            shown = shown_inputs(inputs, desc.get("names") or [])
            out.append({"verdict": verdict, "why": why, "status": status, "shown": shown})
            dead = _dead(failure)
            continue
        finally:
            ref.discard(seg)
        out.append({"verdict": "ok", "why": ""})
    return out


#: Most elements written out per input in a counterexample; larger inputs are described by
#: shape, strides and their values' range.
SHOWN_ELEMENTS = 48


def shown_inputs(inputs, names: list[str]) -> str:
    """The inputs of a counterexample as a person reads them: ``x 3×5 = [[0.5, -1, ...], ...]``
    for a small tensor (4 significant digits), ``x 64×80, strides (1, 64), values in [-3.1,
    2.9]`` for a larger one, ``n = 5`` for a number."""
    from .compare import is_tensor

    parts = []
    for i, x in enumerate(inputs):
        name = names[i] if i < len(names) and names[i] else f"arg{i}"
        if is_tensor(x):
            parts.append(f"{name} {_tensor_text(x)}")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            parts.append(f"{name} = {x:g}")
    return "; ".join(parts)


def _tensor_text(x) -> str:
    dims = "×".join(str(int(n)) for n in x.shape) or "scalar"
    t = x.detach().cpu()
    contiguous = t.is_contiguous() and t.storage_offset() == 0
    layout = "" if contiguous else f", strides {tuple(int(s) for s in t.stride())}"
    if t.storage_offset():
        layout += f", storage offset {int(t.storage_offset())}"
    values = t.double() if t.is_floating_point() else t.long()
    if t.numel() <= SHOWN_ELEMENTS:
        return f"{dims}{layout} = {_nested(values.tolist())}"
    if t.numel() == 0:
        return f"{dims}{layout} (empty)"
    return f"{dims}{layout}, values in [{float(values.min()):.4g}, {float(values.max()):.4g}]"


def _nested(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_nested(v) for v in value) + "]"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
