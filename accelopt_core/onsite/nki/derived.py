"""Derived values for NKI kernels (issue 29), in the evaluation's own process.

NKI candidates run inside the judge (:mod:`.nki.evaluation`) on NumPy inputs, so the reference
side of :mod:`.judge.derived_checks` is this process too: :class:`LocalReference` makes the
derived inputs and their reference here. NKI kernels get derived **values** only (large, tiny,
offset, outliers: :mod:`.judge.derived_values`); their inputs are NumPy arrays, which have no
layouts to derive, and the shapes of an NKI kernel's tiles are its own business (no derived
shapes, as before).

The request's ``derived_inputs`` decides the mode, as for Triton: None (the baseline, a
profile) finds the usable ones, a list (a candidate) checks exactly those.
"""

from __future__ import annotations

import time

from ..judge import derived, derived_checks, derived_inputs
from ..judge.compare import clone, compare, incorrect, nonfinite
from ..protocol import result_dict
from ..runtime.failures import Failure, classify, short


class LocalReference:
    """The derived-input requests of :class:`.judge.reference.Reference`, answered in this
    process from the loaded ``harness`` (``get_inputs``, ``reference``, ``bench``)."""

    def __init__(self, harness, names: list[str]) -> None:
        self.harness = harness
        self.names = names
        self.base: dict[int, int] = {}  # NaN/Inf of the reference on the seed's own inputs

    def _inputs(self, seed: int) -> tuple:
        try:
            return tuple(self.harness.get_inputs(seed, "cpu"))
        except BaseException as exc:  # noqa: BLE001 - the harness's: a located failure
            raise Failure(
                result_dict("runtime_error", f"the harness failed on seed {seed}: {short(exc)}")
            ) from None

    def derived_plan(self, seed: int, shape: dict | None) -> dict:
        """The derived values of ``seed``'s inputs (:func:`.judge.derived_inputs.plan`)."""
        values = self.harness.bench.get("values")
        found = derived_inputs.plan(
            self._inputs(seed), self.names, values=values, shapes=False, layouts=False
        )
        return derived_checks.clean_plan(found)

    def derived_case(self, seed: int, shape: dict | None, desc: dict, torch) -> tuple:
        """``(None, inputs, reference outputs)`` of ``desc``; raises
        :class:`.judge.derived_checks.Unusable` as the reference process does."""
        base_inputs = self._inputs(seed)
        try:
            inputs = derived_inputs.apply(base_inputs, desc, None)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise derived_checks.Unusable(f"the derivation does not apply: {short(exc)}") from None
        try:
            out = self.harness.reference(*clone(inputs))
        except Exception as exc:  # noqa: BLE001 - the harness's reference: a reason
            raise derived_checks.Unusable(f"the reference raises on it: {short(exc)}") from None

        def base() -> int:
            if seed not in self.base:
                self.base[seed] = nonfinite(self.harness.reference(*clone(base_inputs)))[0]
            return self.base[seed]

        why = derived_checks.overflow(out, base, desc)
        if why:
            raise derived_checks.Unusable(why)
        return None, inputs, out

    @staticmethod
    def discard(segment) -> None:
        """Nothing to close: the inputs never left this process."""


def _checker(call, harness, ctx: dict, fail):
    """``check(case, where)``: the call on a derived case against its reference; raises
    Failure (``fail(why, errors)`` for a mismatch, the classified error for a crash)."""

    def check(case, where: str) -> None:
        _, _, inputs, expected = case
        try:
            out = call(*inputs)
        except BaseException as exc:  # noqa: BLE001
            raise Failure(classify(exc, "run", ctx)) from None
        errors: dict = {}
        why = compare(out, expected, harness.bench, errors)
        if why:
            raise fail(f"{where}: {why}", errors)

    return check


def check(req: dict, ctx: dict, harness, call, result: dict, fail=None) -> None:
    """The derived values of an NKI evaluation into ``result["metrics"]["derived_inputs"]``:
    found on the baseline (``req["derived_inputs"]`` None) or checked on the candidate (a
    list; raises Failure naming the derived input when it is wrong there)."""
    fail = fail or (lambda why, errors: Failure(incorrect(why, errors)))
    ref = LocalReference(harness, derived.parameter_names(harness.reference))
    checker = _checker(call, harness, ctx, fail)
    t0 = time.perf_counter()
    listed = req.get("derived_inputs")
    if isinstance(listed, list):
        found = derived_checks.check_listed(ref, checker, None, listed)
    else:
        seeds = [int(s) for s in req.get("seeds") or [1]]
        found = derived_checks.find_usable(ref, checker, None, seeds, None)
    found["seconds"] = round(time.perf_counter() - t0, 3)
    result.setdefault("metrics", {})["derived_inputs"] = found
