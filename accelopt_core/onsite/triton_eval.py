"""The Triton evaluation of one candidate, in the child process, one function per phase:
import the stack (torch + triton, or the Triton interpreter on CPU), load the harness and the
candidate, check correctness on every seed, time the entry, check the timing's plausibility
(DESIGN.md, "Evaluating a candidate", rules 3 to 7). The static gate ran before (:mod:`.child`).

A phase that fails raises :class:`.failures.Failure` with its result dict; :func:`evaluate`
returns it, with the device and versions once they are known.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .compare import clone, compare, correct_on_seeds, mutated_input
from .failures import Failure, classify, short
from .loading import Harness, load_entry, load_harness
from .protocol import result_dict
from .roofline import plausibility
from .runtime import limit_memory, versions

_INTERP_MAX_RUNS = 20
_INTERP_MIN_RUNS = 3


@dataclass
class _Stack:
    """torch (+ triton) as imported for this evaluation."""

    torch: Any
    use_cuda: bool
    env: dict = field(default_factory=dict)  # device name and versions, for every result

    @property
    def device(self) -> str:
        return "cuda" if self.use_cuda else "cpu"

    def sync(self) -> None:
        if self.use_cuda:
            self.torch.cuda.synchronize()


def _import_stack(req: dict, ctx: dict) -> _Stack:
    """Import torch and triton; without CUDA (or with ``timing="interpreter"``) set
    ``TRITON_INTERPRET=1`` first. Raises Failure (runtime_error) when either is missing."""
    try:
        import torch
    except ImportError as exc:
        raise Failure(
            result_dict(
                "runtime_error",
                f"torch is not installed for {sys.executable} on this target: {exc}",
            )
        ) from None
    use_cuda = (req.get("timing") or "auto") == "auto" and torch.cuda.is_available()
    if not use_cuda:
        os.environ["TRITON_INTERPRET"] = "1"
    ctx["interpreter"] = not use_cuda
    try:
        import triton
    except ImportError as exc:
        raise Failure(
            result_dict(
                "runtime_error",
                f"triton is not installed for {sys.executable} on this target: {exc}",
            )
        ) from None
    device_name = torch.cuda.get_device_name(0) if use_cuda else "cpu"
    return _Stack(torch, use_cuda, {"device": device_name, "versions": versions(torch, triton)})


def _load(req: dict, ctx: dict) -> tuple[Harness, Any]:
    """The original file's harness and the candidate's entry. Raises Failure: runtime_error
    for a broken harness, compile_error (:func:`.failures.classify`) for the candidate."""
    source_name = str(req.get("source_name") or "candidate.py")
    try:
        harness = load_harness(req["harness_source"], source_name)
    except BaseException as exc:  # noqa: BLE001
        raise Failure(
            result_dict(
                "runtime_error",
                f"the original file's harness (get_inputs, reference, BENCH) failed to load: "
                f"{short(exc)}",
            )
        ) from None
    try:
        _, entry = load_entry(req["candidate_source"], ctx["cand_file"], req["entry"])
    except BaseException as exc:  # noqa: BLE001
        raise Failure(classify(exc, "load", ctx)) from None
    return harness, entry


def _check_seed(seed: int, harness: Harness, entry, stack: _Stack, ctx: dict, errors: dict) -> None:
    """Run the entry on the inputs of ``seed`` against the reference (computed on a copy).
    Raises Failure: runtime_error (harness or candidate crash), incorrect (mutated input,
    mismatch)."""
    try:
        inputs = tuple(harness.get_inputs(seed, stack.device))
        expected = harness.reference(*clone(inputs))
        stack.sync()
    except BaseException as exc:  # noqa: BLE001
        raise Failure(
            result_dict("runtime_error", f"the harness failed on seed {seed}: {short(exc)}")
        ) from None
    before = clone(inputs)
    try:
        out = entry(*inputs)
        stack.sync()
    except BaseException as exc:  # noqa: BLE001
        raise Failure(classify(exc, "run", ctx)) from None
    mutated = mutated_input(inputs, before)
    if mutated is not None:
        raise Failure(
            result_dict(
                "incorrect", f"mutated input #{mutated} (seed {seed}); inputs are read-only"
            )
        )
    why = compare(out, expected, harness.bench, errors)
    if why:
        raise Failure(
            result_dict(
                "incorrect",
                f"seed {seed}: {why}",
                max_abs_error=errors.get("max_abs"),
                max_rel_error=errors.get("max_rel"),
            )
        )


def _check_correctness(req: dict, ctx: dict, stack: _Stack, harness: Harness, entry) -> dict:
    """An ``ok`` (untimed) result when the entry is correct on every seed of the request."""
    return correct_on_seeds(
        req, lambda seed, errors: _check_seed(seed, harness, entry, stack, ctx, errors)
    )


def _percentile(sorted_vals: list[float], q: float) -> float:
    """Linear-interpolated ``q`` quantile (0..1) of ascending values."""
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = q * (len(sorted_vals) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def _interpreter_times(call, rep_ms: float) -> tuple[float, float, float]:
    """(median, p20, p80) ms of ``call`` on CPU after one warm-up: 3 to 20 runs, up to
    ``rep_ms`` in all."""
    rep_s = rep_ms / 1000.0
    call()  # warm-up (the interpreter has no compile step to hide)
    times: list[float] = []
    total = 0.0
    while len(times) < _INTERP_MAX_RUNS and (len(times) < _INTERP_MIN_RUNS or total < rep_s):
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        times.append(dt * 1000.0)
        total += dt
    times.sort()
    med, p20, p80 = (_percentile(times, q) for q in (0.5, 0.2, 0.8))
    return med, p20, p80


def _time(req: dict, ctx: dict, stack: _Stack, harness: Harness, entry, result: dict) -> tuple:
    """Time the entry on the timing seed's inputs: ``triton.testing.do_bench`` median and
    p20/p80 on CUDA (L2 flushed, warm-up and rep in ms), else the interpreter on CPU. Sets
    ``latency_ms``, ``p20_ms``, ``p80_ms``, ``timing`` and the message in ``result``; returns
    the inputs. Raises Failure when the harness or the entry fails."""
    try:
        inputs = tuple(harness.get_inputs(int(req.get("timing_seed", 1000)), stack.device))
    except BaseException as exc:  # noqa: BLE001
        raise Failure(
            result_dict("runtime_error", f"the harness failed on the timing seed: {short(exc)}")
        ) from None
    try:
        if stack.use_cuda:
            import triton.testing

            med, p20, p80 = triton.testing.do_bench(
                lambda: entry(*inputs),
                warmup=float(req.get("warmup_ms", 25.0)),
                rep=float(req.get("rep_ms", 100.0)),
                quantiles=[0.5, 0.2, 0.8],
            )
            timing = "cuda"
        else:
            med, p20, p80 = _interpreter_times(
                lambda: entry(*inputs), float(req.get("rep_ms", 100.0))
            )
            timing = "interpreter"
    except BaseException as exc:  # noqa: BLE001
        raise Failure(classify(exc, "run", ctx)) from None
    result.update(latency_ms=med, p20_ms=p20, p80_ms=p80, timing=timing)
    if timing == "interpreter":
        result["message"] += "; Triton interpreter on CPU: latency says nothing about GPU speed"
    return inputs


def evaluate(req: dict, ctx: dict) -> dict:
    """Evaluate a gated Triton candidate (``req``: an EvalRequest dict; ``ctx``: see
    :func:`.child.child_main`) and return its result dict. Never raises for a bad candidate."""
    stack = None
    try:
        stack = _import_stack(req, ctx)
        limit_memory(int(req.get("memory_limit_mb") or 8192), stack.use_cuda, ctx)
        harness, entry = _load(req, ctx)
        result = _check_correctness(req, ctx, stack, harness, entry)
        result.update(stack.env)
        if (req.get("timing") or "auto") == "none":
            return result
        inputs = _time(req, ctx, stack, harness, entry, result)
    except Failure as failure:
        return dict(failure.result, **(stack.env if stack else {}))
    plausibility(result, harness.bench, inputs, req.get("peaks") or {}, result["timing"])
    return result
