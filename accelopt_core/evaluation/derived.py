"""The host's side of derived inputs (issues 22 and 29): the baseline is the oracle.

The baseline's evaluation (a request without ``derived_inputs``) derives shapes, values and
layouts from the harness's own inputs and reports in ``metrics["derived_inputs"]["used"]`` the ones where the
reference runs and the baseline is correct (:mod:`accelopt_core.onsite.judge.derived_checks`).
Every candidate of the search is then checked on exactly that list: :func:`used_inputs` is what
the host copies into each candidate's :class:`~accelopt_core.onsite.protocol.EvalRequest`.
"""

from __future__ import annotations

from typing import Any

from accelopt_core.onsite.protocol import EvalResult

__all__ = ["used_inputs"]


def used_inputs(baseline: EvalResult) -> list[dict[str, Any]]:
    """The derived-input descriptors the baseline was correct on (``metrics["derived_inputs"]
    ["used"]``, dicts only), for every candidate's request. ``[]`` when the baseline reported
    none (an NKI kernel, a judge before issue 22, a harness without tensor inputs): the
    candidate is then checked on no derived input, and is never its own oracle (which a
    request without the field would make it)."""
    found = (baseline.metrics or {}).get("derived_inputs")
    used = found.get("used") if isinstance(found, dict) else None
    return [dict(d) for d in used if isinstance(d, dict)] if isinstance(used, list) else []
