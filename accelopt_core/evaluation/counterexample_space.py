"""What the counterexample search draws from (issue 52): :class:`Space`, the baseline's
``metrics["derived_inputs"]["space"]``, and its Hypothesis strategy of one example
(:mod:`accelopt_core.evaluation.counterexample`'s docstring says what an example composes).
Hypothesis and NumPy are imported inside the functions that draw.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelopt_core.onsite.judge import derived_inputs
from accelopt_core.onsite.protocol import EvalResult

__all__ = ["Space"]

#: Sign factors applied to a judge's value derivation (both signs of every shift and scale).
_SIGNS = (1.0, -1.0)
#: Value ops whose number may change sign meaningfully (scale, shift, outlier magnitude).
_SIGNED_OPS = frozenset(
    {"large", "tiny", "offset", "outliers", "scale", "shift", "near_limit", "subnormal"}
)


@dataclass
class Space:
    """What can be drawn for one harness: the baseline's ``metrics["derived_inputs"]["space"]``.

    Attributes:
        signature: per input ``{"name", "kind", "dtype", "shape", "floating"}``.
        symbols: the size symbols that may change (``{"symbol", "length", "dims"}``).
        parts: every part the judge derived (templates of value and layout parts).
        seed: the correctness seed the examples are made from.
        shape: the ``BENCH["shapes"]`` entry they are made from (None: the harness's own).
    """

    signature: list[dict]
    symbols: list[dict]
    parts: list[dict]
    seed: int = 1
    shape: dict | None = None

    @classmethod
    def of(cls, result: EvalResult | None) -> Space | None:
        """The space of a baseline's result, or None when it has none (an NKI kernel, a
        harness without tensors, a judge before issue 52)."""
        found = ((result.metrics or {}) if result is not None else {}).get("derived_inputs")
        space = found.get("space") if isinstance(found, dict) else None
        if not isinstance(space, dict) or not isinstance(space.get("signature"), list):
            return None
        signature = [r for r in space["signature"] if isinstance(r, dict)]
        if not any(r.get("kind") == "tensor" for r in signature):
            return None
        seed = space.get("seed")
        return cls(
            signature=signature,
            symbols=[s for s in space.get("symbols") or [] if isinstance(s, dict)],
            parts=[p for p in space.get("parts") or [] if isinstance(p, dict)],
            seed=seed if type(seed) is int else 1,
            shape=space.get("shape") if isinstance(space.get("shape"), dict) else None,
        )

    @property
    def names(self) -> list[str]:
        return [str(r.get("name") or f"arg{i}") for i, r in enumerate(self.signature)]

    def _templates(self, index: int, kind: str) -> list[dict]:
        return [
            {k: v for k, v in p.items() if k not in ("seed", "shape", "inputs")}
            for p in self.parts
            if derived_inputs.kind(p) == kind and p.get("input") == index
        ]

    def _shape_after(self, index: int, sizes: dict[str, int]) -> list[int]:
        shape = list(self.signature[index].get("shape") or [])
        for sym in self.symbols:
            for i, d in sym["dims"]:
                if i == index and d < len(shape):
                    shape[d] = sizes.get(sym["symbol"], shape[d])
        return shape

    def example(self, name: str, found: list[dict]) -> dict:
        """A drawn descriptor of ``found`` parts, made from :attr:`seed` and :attr:`shape`."""
        out = derived_inputs.drawn(name, found, self.names)
        return dict(out, seed=self.seed, shape=self.shape)

    def explicit(self, deferred: list[dict]) -> list[dict]:
        """The parts a budget left out of every candidate's checks, one example each."""
        out = []
        for part in deferred:
            drop = ("seed", "shape", "inputs", "why")
            clean = {k: v for k, v in part.items() if k not in drop}
            for p in derived_inputs.parts(clean):
                p.pop("inputs", None)
            out.append(self.example(f"deferred: {clean.get('name')}", derived_inputs.parts(clean)))
        return out

    def strategy(self):
        """The Hypothesis strategy of one example (:mod:`.counterexample`'s docstring)."""
        from hypothesis import strategies as st

        return st.composite(lambda draw: _draw_example(draw, self))()


def _draw_sizes(draw, space: Space) -> tuple[dict[str, int], list[dict]]:
    """A length per size symbol (small ones first: 1..6, the harness's own, or up to n + n/4)
    and the shape parts of those that changed."""
    from hypothesis import strategies as st

    sizes: dict[str, int] = {}
    found: list[dict] = []
    for sym in space.symbols:
        n = int(sym["length"])
        cap = n + max(1, n // 4)
        to = draw(st.one_of(st.integers(1, min(cap, 6)), st.just(n), st.integers(1, cap)))
        sizes[sym["symbol"]] = to
        if to != n:
            first_input, first_dim = sym["dims"][0]
            name = f"{space.names[first_input]}[{first_dim}] {n}→{to}"
            found.append({"kind": "shape", "name": name, "symbol": sym["symbol"], "from": n,
                          "to": to, "inputs": "", "dims": sym["dims"]})  # fmt: skip
    return sizes, found


def _draw_values(draw, space: Space, i: int, shape: list[int]) -> dict | None:
    """Input ``i``'s values: its own (None), one of the judge's value derivations with either
    sign, or values drawn element by element where it has at most ``MAX_DATA`` elements."""
    import numpy as np
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    row, name = space.signature[i], space.names[i]
    numel = int(np.prod(shape)) if shape else 1
    values = space._templates(i, "values")
    dtype = {"float64": np.float64, "float32": np.float32, "float16": np.float16}.get(
        str(row.get("dtype"))
    )
    choices = ["own"] + (["derived"] if values else [])
    if row.get("floating") and dtype is not None and numel <= derived_inputs.MAX_DATA:
        choices.append("drawn")
    how = draw(st.sampled_from(choices))
    if how == "derived":
        part = dict(draw(st.sampled_from(values)))
        sign = draw(st.sampled_from(_SIGNS)) if part.get("op") in _SIGNED_OPS else 1.0
        if sign < 0 and isinstance(part.get("value"), (int, float)):
            part["value"] = -float(part["value"])
            part["name"] = f"{part.get('name')}, sign flipped"
        return part
    if how == "drawn":
        bound, width = (200.0, 16) if dtype is np.float16 else (1e3, 32)
        elements = st.floats(-bound, bound, allow_nan=False, width=width)
        arr = draw(hnp.arrays(dtype, tuple(shape), elements=elements))
        data = [float(v) for v in np.asarray(arr, dtype=np.float64).ravel()]
        return {"kind": "data", "input": i, "name": f"{name} drawn values", "data": data}
    return None


def _draw_layout(draw, space: Space, i: int, shape: list[int]) -> dict | None:
    """Input ``i``'s layout: contiguous (None) or one of the judge's (any permutation where
    the template is a permutation)."""
    from hypothesis import strategies as st

    layouts = space._templates(i, "layout") if len(shape) >= 2 else []
    lay = draw(st.one_of(st.none(), st.sampled_from(layouts))) if layouts else None
    if lay is None:
        return None
    lay = dict(lay)
    if isinstance(lay.get("perm"), list) and len(lay["perm"]) == len(shape):
        lay["perm"] = list(draw(st.permutations(range(len(shape)))))
    return lay


def _draw_example(draw, space: Space) -> dict:
    """One drawn example: sizes, then per tensor input its values and its layout."""
    sizes, found = _draw_sizes(draw, space)
    words: list[str] = []
    for i, row in enumerate(space.signature):
        if row.get("kind") != "tensor":
            continue
        shape = space._shape_after(i, sizes)
        for part in (_draw_values(draw, space, i, shape), _draw_layout(draw, space, i, shape)):
            if part is not None:
                found.append(part)
                words.append(str(part.get("name")))
    shapes = ", ".join(p["name"] for p in found if p["kind"] == "shape")
    label = "; ".join(w for w in [shapes, *words] if w) or "the seed's own inputs"
    return space.example(f"search example: {label}", found)
