"""Several shapes per harness (issue 13): ``BENCH["shapes"] = [{"M": 4096, "N": 4096}, ...]``.

Each entry is passed to ``get_inputs(seed, device, **shape)``. The judge checks correctness on
every seed of every shape; it times every shape but the last, which is checked and never timed
(the held-out shape: a candidate tuned to the timed shapes alone, e.g. one that hard-codes their
sizes, still has to be correct on it). The speed of a candidate is the geometric mean of its
per-shape latencies, so the speedup of two candidates is the geometric mean of their
per-shape speedups (geomean(b_i / c_i) = geomean(b_i) / geomean(c_i)). With one shape it is
timed as well (nothing is held out). The per-shape table goes to ``metrics["shapes"]``.
Standard library only.
"""

from __future__ import annotations

import math

from . import timing as judge_timing
from .compare import shape_text

_TIMED_FIELDS = ("latency_ms", "p20_ms", "p80_ms", "gbps", "tflops", "pct_of_peak")


def geomean(values: list[float]) -> float:
    """Geometric mean of positive values (``exp(mean(log v))``). Raises ValueError for an
    empty list or a value <= 0."""
    if not values or any(v <= 0 for v in values):
        raise ValueError("geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def merge_checks(results: list[dict], shapes: list[dict] | None) -> dict:
    """One ``ok`` result from the per-shape correctness results (all ``ok``): the largest
    errors, and a message counting seeds and shapes."""
    out = dict(results[0])
    for key in ("max_abs_error", "max_rel_error"):
        values = [r.get(key) for r in results if r.get(key) is not None]
        out[key] = max(values) if values else None
    if shapes:
        out["message"] = f"{out['message']} x {len(shapes)} shapes"
    return out


def time_shapes(req: dict, stack, ref, cand, result: dict) -> dict:
    """Time every shape of ``ref.shapes`` but the held-out last one
    (:func:`.judge.timing.time_candidate` per shape) and return ``result`` with the geometric
    means and ``metrics["shapes"]``; a per-shape result that is not ``ok`` (implausible
    timing) is returned as it is, naming the shape. Raises Failure as ``time_candidate``."""
    shapes = list(ref.shapes)
    timed = shapes[:-1] if len(shapes) > 1 else shapes
    rows: list[dict] = []
    sub: dict = {}
    for shape in timed:
        ref.shape = shape
        sub = dict(
            result,
            warnings=list(result.get("warnings") or []),
            metrics=dict(result.get("metrics") or {}),
        )
        judge_timing.time_candidate(req, stack, ref, cand, sub)
        if sub["status"] != "ok":
            sub["message"] = f"shape {shape_text(shape)}: {sub.get('message') or ''}"
            return sub
        rows.append({"shape": shape, "timed": True, **{k: sub.get(k) for k in _TIMED_FIELDS}})
    out = dict(sub)
    for key in _TIMED_FIELDS:
        values = [r[key] for r in rows]
        ok = all(isinstance(v, (int, float)) and v > 0 for v in values)
        out[key] = geomean([float(v) for v in values]) if ok else None
    held = shapes[-1] if len(shapes) > 1 else None
    if held is not None:
        rows.append({"shape": held, "timed": False})
    out.setdefault("metrics", {})["shapes"] = rows
    note = f"; speed: geometric mean over {len(timed)} timed shapes"
    if held is not None:
        note += f"; shape {shape_text(held)} checked, never timed (held out)"
    out["message"] = f"{out.get('message') or ''}{note}"
    return out
