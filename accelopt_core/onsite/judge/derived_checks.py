"""The judge's derived-shape checks (issue 22): correctness checks, never timed.

Two modes, by the request's ``derived_shapes``:

- **None** (the baseline's evaluation, and ``accelopt profile``): :func:`find_usable` asks the
  reference process for the derived shapes of the first correctness seed's inputs
  (:mod:`.derived`, of the first ``BENCH["shapes"]`` entry when there are several), then, for
  each one, the reference on it and the evaluated code's output. A derived shape is **used**
  when the reference runs on it and the evaluated code (the baseline: the oracle of what the
  kernel is meant to support) is correct on it; otherwise it is **skipped**, with the reason
  (the reference raises, the baseline is wrong on it or fails on it). Nothing here fails the
  evaluation: a baseline written for one shape keeps working.
- **a list** (a candidate's evaluation: the baseline's ``used`` list, copied by the host):
  :func:`check_listed` checks the candidate on exactly these; a candidate wrong on one is
  ``incorrect`` with the message ``wrong on derived shape x[1] 64→63 (x: 16×63): <compare's
  message>``; a crash, a rejection or a timeout there keeps its status and names the shape.

Both return ``metrics["derived_shapes"]``: ``{"used": [descriptor, ...], "skipped": [{"name",
"why"}, ...]}`` (descriptors of :mod:`.derived`, with the ``seed`` and ``shape`` they were made
from); the backend adds ``"seconds"``, their wall time on the judge's clock (the cost
``benchmarks/derived_shapes.py`` measures). The checking itself is the backend's
(``check(case, where)``, which raises :class:`~..runtime.failures.Failure`); the reference's side is :class:`.judge.referee.Reference`'s
``derived_plan`` / ``derived_case``. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable

from ..runtime.failures import Failure
from . import derived

#: Longest reason kept in ``skipped``.
_MAX_WHY = 400


class Unusable(Exception):
    """The reference process could not make a derived shape's case (its reference raises on
    it, or the derivation does not apply to the inputs): the shape is skipped with this
    reason."""


def clean_plan(plan) -> dict:
    """The reference process's plan (:func:`.derived.plan`) as data: descriptors through
    :func:`.derived.checked` (malformed ones dropped), skip entries as short strings."""
    plan = plan if isinstance(plan, dict) else {}
    raw = plan.get("derived") if isinstance(plan.get("derived"), list) else []
    found = [d for d in (derived.checked(r, 1 << 16) for r in raw[:64]) if d is not None]
    skipped = plan.get("skipped") if isinstance(plan.get("skipped"), list) else []
    return {
        "derived": found,
        "skipped": [
            {"name": str(s.get("name"))[:200], "why": str(s.get("why"))[:_MAX_WHY]}
            for s in skipped[:64]
            if isinstance(s, dict)
        ],
    }


def _where(desc: dict) -> str:
    return f"derived shape {derived.label(desc)}"


def _skip(desc: dict, why: str) -> dict:
    return {"name": str(desc.get("name")), "why": why[:_MAX_WHY]}


def _dead(failure: Failure) -> bool:
    """The evaluated code's process is gone or stuck: no further check can run."""
    result = failure.result
    return "candidate_status" in result or result.get("status") == "timeout"


def _run_case(ref, desc: dict, check: Callable, torch) -> None:
    """Make the case of ``desc`` (reference process) and check the evaluated code on it.
    Raises Unusable (no case) or Failure (the code failed on it)."""
    seed = int(desc.get("seed") or 1)
    p_in, inputs, expected = ref.derived_case(seed, desc.get("shape"), desc, torch)
    try:
        check((seed, p_in, inputs, expected), _where(desc))
    finally:
        ref.discard(p_in)


def find_usable(ref, check: Callable, torch, seed: int, shape: dict | None) -> dict:
    """Baseline mode (module docstring): the derived shapes of ``seed``'s inputs (of
    ``shape``, a ``BENCH["shapes"]`` entry, or None), each checked once on the evaluated code;
    returns ``{"used": [...], "skipped": [...]}``. Never raises Failure: a harness error while
    deriving skips everything with its message; a crash or hang of the evaluated code skips
    that shape and the ones after it."""
    try:
        plan = ref.derived_plan(seed, shape)
    except (Failure, Unusable) as exc:
        why = exc.result.get("message") if isinstance(exc, Failure) else str(exc)
        return {"used": [], "skipped": [{"name": "all inputs", "why": f"not derived: {why}"}]}
    used: list[dict] = []
    skipped: list[dict] = list(plan["skipped"])
    todo = [dict(desc, seed=seed, shape=shape) for desc in plan["derived"]]
    for k, desc in enumerate(todo):
        try:
            _run_case(ref, desc, check, torch)
        except Unusable as exc:
            skipped.append(_skip(desc, f"the reference cannot run on it: {exc}"))
            continue
        except Failure as failure:
            status, message = failure.result.get("status"), failure.result.get("message") or ""
            what = "is wrong on it" if status == "incorrect" else f"fails on it ({status})"
            skipped.append(_skip(desc, f"the baseline {what}: {message}"))
            if _dead(failure):
                why = "not checked: the baseline's process ended on an earlier derived shape"
                skipped.extend(_skip(rest, why) for rest in todo[k + 1 :])
                break
            continue
        used.append(desc)
    return {"used": used, "skipped": skipped}


def _named(failure: Failure, desc: dict) -> Failure:
    """``failure`` with its message naming the derived shape: ``wrong on derived shape ...:
    <compare's message>`` for ``incorrect``, ``<message> (on derived shape ...)`` otherwise."""
    result = dict(failure.result)
    where = _where(desc)
    message = str(result.get("message") or "")
    if result.get("status") == "incorrect":
        body = message[len(where) + 2 :] if message.startswith(f"{where}: ") else message
        result["message"] = f"wrong on {where}: {body}"
    elif where not in message:
        result["message"] = f"{message} (on {where})" if message else f"failed on {where}"
    result["derived_shape"] = where  # a death's message is the supervisor's: it appends this
    return Failure(result)


def check_listed(ref, check: Callable, torch, listed: list, n_inputs: int | None = None) -> dict:
    """Candidate mode (module docstring): check the candidate on every descriptor of
    ``listed`` (the request's ``derived_shapes``); returns ``{"used", "skipped"}`` (skipped:
    malformed descriptors, shapes whose reference cannot run). Raises Failure naming the
    derived shape when the candidate fails on one. ``n_inputs``: how many inputs the harness
    makes (bounds the descriptors' input indices; None: not checked here)."""
    used: list[dict] = []
    skipped: list[dict] = []
    for raw in listed:
        desc = derived.checked(raw, n_inputs if n_inputs is not None else 1 << 16)
        if desc is None:
            name = str(raw.get("name")) if isinstance(raw, dict) else str(raw)[:80]
            skipped.append({"name": name, "why": "malformed derived-shape descriptor"})
            continue
        try:
            _run_case(ref, desc, check, torch)
        except Unusable as exc:
            skipped.append(_skip(desc, f"the reference cannot run on it: {exc}"))
            continue
        except Failure as failure:
            raise _named(failure, desc) from None
        used.append(desc)
    return {"used": used, "skipped": skipped}
