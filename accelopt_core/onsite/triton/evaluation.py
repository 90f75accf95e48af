"""The judge's Triton evaluation (issue 10): the candidate runs in its own process
(:mod:`.contestant.process`, forked by :func:`.judge.peers.spawn`); this process never imports it. It makes
every input, computes every reference, compares, bounds the timing by its own clock and
decides the verdict (DESIGN.md, "Evaluating a candidate", rules 3 to 7).

Phases, one function each: import the stack WITHOUT initialising CUDA (torch + triton, or the
Triton interpreter on CPU) and fork the candidate; load the original harness; check every seed
(:func:`_check_seed`); time (:mod:`.judge.timing`). A phase that fails raises
:class:`.runtime.failures.Failure` with its result dict; :func:`evaluate` returns it, with the device
and versions once they are known.

Rules (status ``rejected``, field ``rule``) decided here: ``no kernel launch`` (a call that
launched no ``@triton.jit`` kernel of the candidate), ``output not a plain tensor`` (an output
that is not exactly a ``torch.Tensor`` / ``numpy.ndarray``, as the candidate process saw it),
``protocol violation`` (:mod:`.judge.peers`); timing rules in :mod:`.judge.timing`.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ..judge import derived_checks, shapes
from ..judge import timing as judge_timing
from ..judge.compare import (
    compare,
    correct_on_seeds,
    incorrect,
    mutated_input,
    shape_text,
)
from ..judge.derived_inputs import BASELINE_SHARE, BUDGET_SHARE
from ..judge.peers import (
    Candidate,
    ReferencePeer,
    new_dirs,
    remove_dirs,
    spawn,
    spawn_reference,
)
from ..judge.reference import Reference
from ..judge.rules import no_launch, plain_outputs, protocol_violation
from ..protocol import result_dict
from ..runtime.device import gpu_visible, versions, watch_memory
from ..runtime.failures import Failure, short
from ..runtime.sizes import add_sizes, mark_cpu
from . import stage as gpu_stage


@dataclass
class Stack:
    """torch (+ triton) as imported for this evaluation."""

    torch: Any
    use_cuda: bool
    numpy: Any = None
    env: dict = field(default_factory=dict)  # device name and versions, for every result

    @property
    def device(self) -> str:
        return "cuda" if self.use_cuda else "cpu"

    def sync(self) -> None:
        if self.use_cuda:
            self.torch.cuda.synchronize()


def _import_stack(req: dict, ctx: dict) -> Stack:
    """Import torch and triton without initialising CUDA (the candidate process is forked
    next): CUDA when ``timing`` is ``auto`` and a GPU is visible (:func:`.process.warmstack.
    gpu_visible`), else ``TRITON_INTERPRET=1`` first. Raises Failure (runtime_error) when
    either is missing."""
    try:
        import torch
    except ImportError as exc:
        raise Failure(
            result_dict(
                "runtime_error",
                f"torch is not installed for {sys.executable} on this target: {exc}",
            )
        ) from None
    use_cuda = (req.get("timing") or "auto") == "auto" and gpu_visible(torch)
    if not use_cuda:
        os.environ["TRITON_INTERPRET"] = "1"
    mark_cpu(not use_cuda)  # sizes scaled for CPU inputs in every process (issue 24)
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
    try:
        import numpy
    except ImportError:
        numpy = None
    env = {"versions": versions(torch, triton)}
    if not use_cuda:
        env["device"] = "cpu"  # on CUDA, named once the judge initialises it (after the fork)
    return Stack(torch, use_cuda, numpy, env)


def _init_device(stack: Stack, ctx: dict) -> None:
    """After the fork: initialise CUDA in the judge and record the device name. Raises
    Failure when CUDA is not usable although a GPU is visible."""
    name = "cpu"
    if stack.use_cuda:
        try:
            name = stack.torch.cuda.get_device_name(0)
        except Exception as exc:  # noqa: BLE001 - driver missing or broken
            raise Failure(
                result_dict("runtime_error", f"a GPU is visible but CUDA fails: {short(exc)}")
            ) from None
    stack.env["device"] = name
    ctx["env"] = stack.env


class PhaseClock:
    """Wall time of each phase of one evaluation on the judge's clock, s (``metrics["phases_s"]``
    of a passing result): where a minute-long GPU evaluation goes. :meth:`mark` closes the phase
    running since the previous mark (or since ``start``, monotonic s) under its name; a name
    marked twice adds up."""

    def __init__(self, start: float) -> None:
        self.last = start
        self.spent: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.spent[name] = self.spent.get(name, 0.0) + now - self.last
        self.last = now

    def rounded(self) -> dict[str, float]:
        """``{phase: s}``, to the millisecond, in the order the phases first ended."""
        return {name: round(s, 3) for name, s in self.spent.items()}


def _reference(peer: ReferencePeer) -> Reference:
    """Wait for the reference process's first message: the harness's tolerances, or its
    classified load error / poisoning (raised as Failure)."""
    first = peer.recv()
    bench = first.get("bench")
    if not isinstance(bench, dict):
        raise protocol_violation(f"expected 'bench', got {sorted(first)[:5]}")
    listed = first.get("shapes")
    ok = isinstance(listed, list) and listed and all(isinstance(x, dict) for x in listed)
    ref = Reference(peer, bench, listed if ok else None, backward=first.get("backward") is True)
    ref.sizes = first.get("sizes") or {}
    return ref


#: Most ``@triton.autotune`` configs checked for correctness under the interpreter.
MAX_CHECKED_CONFIGS = 16


def _check_seed(
    seed: int, ref: Reference, cand: Candidate, stack: Stack, errors: dict, configs: bool
) -> None:
    """The candidate's run of ``seed`` against the reference process's outputs for the same
    inputs; with ``configs`` (the first seed, under the interpreter) also the run with each
    other ``@triton.autotune`` config pinned. Raises Failure: runtime_error / compile_error
    (harness or candidate), rejected (no launch, not a plain tensor, protocol), incorrect
    (mutated input, mismatch)."""
    seg, inputs, expected = ref.case(seed, stack.torch)
    try:
        case = (seed, seg, inputs, expected)
        reply = _check_call(case, ref, cand, stack, errors, None)
        count = reply.get("configs") if configs and not stack.use_cuda else 1
        count = count if type(count) is int else 1
        for index in range(1, min(count, MAX_CHECKED_CONFIGS)):
            _check_call(case, ref, cand, stack, errors, (index, count))
    finally:
        seg.close()


def _check_call(
    case, ref: Reference, cand: Candidate, stack: Stack, errors: dict, config, where=None
):
    """One checked call of the candidate on ``case`` (``(seed, inputs segment, inputs,
    expected)``), with autotune config ``config`` (``(index, count)``) pinned when given.
    ``where``: how messages name a derived input's case (issues 22, 29; its call times and kernel
    profile are not kept). Returns the candidate's answer; raises Failure as
    :func:`_check_seed`."""
    seed, seg, inputs, expected = case
    derived = where is not None
    if where is None:
        where = f"seed {seed}" + (f", shape {shape_text(ref.shape)}" if ref.shape else "")
        where += f", autotune config {config[0] + 1} of {config[1]}" if config else ""
    # ``inputs`` is this judge's private mapping of a sealed segment (runtime.exchange): the
    # candidate's writes stay in its own pages, so it is the judge's copy from before the call.
    msg = {"op": "check", "inputs": seg}
    if config:
        msg["config"] = config[0]
    if ref.backward:  # forward + backward, upstream gradient seeded by the check's seed
        msg.update(grad_inputs=ref.grad_inputs, grad_seed=seed)
    t0 = time.perf_counter()
    reply = cand.ask(msg, "launches")
    if config is None and not derived:
        cand.wall_call_ms.append((time.perf_counter() - t0) * 1000.0)  # the judge's own clock
        call_ms = reply.get("call_ms")
        if isinstance(call_ms, (int, float)) and call_ms > 0:
            cand.call_ms.append(float(call_ms))
    no_launch(reply["launches"], where)
    if config is None and not derived and ref.shape == (ref.shapes or [None])[0]:
        _keep_kernel_profile(cand, reply.get("kernels"))
    out = cand.received(reply, "outputs", stack.torch, ref.device)  # checked where they are
    plain_outputs(out, where)
    after = cand.received(reply, "after", stack.torch, ref.device)
    if not isinstance(after, tuple) or len(after) != len(inputs):
        raise protocol_violation("the inputs after the call are not the inputs")
    mutated = mutated_input(after, inputs)
    if mutated is not None:
        raise Failure(
            result_dict("incorrect", f"mutated input #{mutated} ({where}); inputs are read-only")
        )
    why = _backward_reason(out, expected, ref, errors) if ref.backward else None
    why = why or compare(out, expected, ref.bench, errors)
    if why:
        raise Failure(incorrect(f"{where}: {why}", errors))
    return reply


def _keep_kernel_profile(cand: Candidate, kernels) -> None:
    """Add one call's per-kernel launches and ms (the candidate's report, data only: checked
    for type and size) to ``cand.kernels``: summed over the seeds of the first shape."""
    if not isinstance(kernels, dict):
        return
    for name, entry in list(kernels.items())[:32]:
        if not isinstance(entry, dict):
            continue
        n, ms = entry.get("launches"), entry.get("ms")
        if type(n) is int and isinstance(ms, (int, float)) and n >= 0 and ms >= 0:
            total = cand.kernels.setdefault(str(name)[:120], {"launches": 0, "ms": 0.0})
            total["launches"] += n
            total["ms"] += float(ms)


def _backward_reason(out, expected, ref: Reference, errors: dict) -> str | None:
    """With ``BENCH["backward"]`` (outputs ``(forward outputs, input gradients)``): the
    mismatch named as the forward output's or as the gradient of input #i's; None when both
    match or the structure differs (then :func:`compare` names it)."""
    pairs = isinstance(out, tuple) and isinstance(expected, tuple) and len(out) == len(expected)
    if not pairs or len(expected) != 2 or not isinstance(out[1], tuple):
        return None
    why = compare(out[0], expected[0], ref.bench, errors)
    if why:
        return f"forward output: {why}"
    grads, want = out[1], expected[1]
    if not isinstance(want, tuple) or len(grads) != len(want):
        return None
    names = ref.grad_inputs if len(ref.grad_inputs) == len(want) else list(range(len(want)))
    for index, got, ref_grad in zip(names, grads, want, strict=True):
        why = compare(got, ref_grad, ref.bench, errors)
        if why:
            return f"gradient of input #{index}: {why}"
    return None


def _loaded(cand: Candidate) -> None:
    """Wait for the candidate's first message: loaded, or its classified load error."""
    first = cand.recv()
    if first.get("loaded") is not True:
        raise protocol_violation(f"expected 'loaded', got {sorted(first)[:5]}")


def _run(
    req: dict,
    ctx: dict,
    stack: Stack,
    cand: Candidate,
    peer: ReferencePeer,
    clock: PhaseClock,
    stage=None,
) -> dict:
    """Reference, correctness on every seed (of every shape), timing: the result dict, each
    phase marked on ``clock`` (raises Failure)."""
    ref = _reference(peer)
    ctx["sizes"] = ref.sizes  # named in every result, failures too (issue 24)
    _init_device(stack, ctx)
    ref.device, _ = stack.device, _loaded(cand)  # issue 50 (3): cases checked on the device
    ref.use_store(req, stack.use_cuda)  # issue 50 (4): made once per search on a warm worker
    ctx["reference"] = ref
    if stage is not None:  # issue 50 (5): the stage compiles on these, making no values
        stage.feed(ref, (req.get("seeds") or [1])[0])
    clock.mark("load")  # the reference and candidate processes loaded, CUDA initialised
    first = (req.get("seeds") or [1])[0]
    listed = req.get("derived_inputs")
    results = []

    def check_seed(seed: int, errors: dict) -> None:
        if seed != first and _stage_failure(stage) is not None:
            raise _StageStop
        _check_seed(seed, ref, cand, stack, errors, seed == first)

    for shape in ref.shapes or [None]:
        ref.shape = shape
        if _stage_failure(stage) is not None:  # only each specialization's first call
            _check_seed(first, ref, cand, stack, {}, True)
            continue
        try:
            derived = derived_checks.derived_seeds(listed, shape)
            results.append(correct_on_seeds(req, check_seed, derived))
        except _StageStop:
            pass
    _stop_on_stage_failure(stage)  # no derived input nor timing for a kernel the GPU refuses
    clock.mark("correctness")
    result = add_sizes(shapes.merge_checks(results, ref.shapes), ref.sizes)
    if cand.kernels:  # which kernels the entry launched, and for how long (interpreter)
        result.setdefault("metrics", {})["kernels"] = cand.kernels
    result["message"] += _BACKWARD if ref.backward else ""
    result.update(stack.env)
    check = _derived_check(ref, cand, stack)
    if isinstance(listed, list):  # a candidate: the baseline's usable derived inputs, untimed
        t0 = time.perf_counter()
        found = derived_checks.check_listed(ref, check, stack.torch, listed)
        found["seconds"] = round(time.perf_counter() - t0, 3)  # their cost, the judge's clock
        result.setdefault("metrics", {})["derived_inputs"] = found
        clock.mark("derived_inputs")
    if isinstance(req.get("derived_probe"), list):  # issue 52: the search's examples
        return _probed(req, ref, check, stack, result, clock)
    if stage is not None:  # the compile stage is done before the timed calls (issue 21)
        stage.settle(ctx["deadline"])
        clock.mark("compile_stage_wait")
        _stop_on_stage_failure(stage)  # a kernel the GPU cannot run is not timed
    result = _timed(req, stack, ref, cand, result)
    clock.mark("timing")
    if not isinstance(listed, list) and result.get("status") == "ok":  # the baseline: find them
        _find_usable(req, ref, check, stack, result, clock)
    return result


def _find_usable(req: dict, ref: Reference, check, stack: Stack, result: dict, clock) -> None:
    """The baseline's usable derived inputs into ``result["metrics"]["derived_inputs"]``
    (:func:`.judge.derived_checks.find_usable`), within the budget and the time of issue 52."""
    t0 = time.perf_counter()
    shape = (ref.shapes or [None])[0]
    seeds = list(req.get("seeds") or [1])
    checks = len(seeds) * max(1, len(ref.shapes or [None]))  # plain seed checks made
    budget_s = derived_budget(clock, checks, len(seeds) - 1)
    time_s = BASELINE_SHARE * sum(clock.spent.values())
    found = derived_checks.find_usable(ref, check, stack.torch, seeds, shape, budget_s, time_s)
    found["seconds"] = round(time.perf_counter() - t0, 3)
    result.setdefault("metrics", {})["derived_inputs"] = found
    clock.mark("derived_inputs")


def derived_budget(clock: PhaseClock, checks: int, replaced: int) -> float:
    """The seconds a candidate's derived checks may cost (issue 52, item 4):
    :data:`.judge.derived_inputs.BUDGET_SHARE` of the evaluation so far (loading, correctness,
    timing, on the judge's clock) plus the ``replaced`` plain seed checks they stand in for
    (each as long as the mean of the ``checks`` correctness checks made)."""
    spent = sum(clock.spent.values())
    per_seed = clock.spent.get("correctness", 0.0) / max(1, checks)
    return BUDGET_SHARE * spent + per_seed * max(0, replaced)


_BACKWARD = " (forward + backward: input gradients checked and timed)"


def _probed(req: dict, ref: Reference, check, stack: Stack, result: dict, clock) -> dict:
    """``result`` with ``metrics["derived_probe"]``: one verdict per example of the request's
    ``derived_probe`` (:func:`.judge.derived_probe.probe`), untimed."""
    from ..judge.derived_probe import probe

    found = probe(ref, check, stack.torch, req["derived_probe"])
    result.setdefault("metrics", {})["derived_probe"] = found
    clock.mark("derived_probe")
    return result


def _timed(req: dict, stack: Stack, ref: Reference, cand: Candidate, result: dict) -> dict:
    """``result`` timed (every timed shape of ``BENCH["shapes"]``), or as it is with
    ``timing`` ``none``. Raises Failure as :mod:`.judge.timing`."""
    if (req.get("timing") or "auto") == "none":
        return result
    if not ref.shapes:
        judge_timing.time_candidate(req, stack, ref, cand, result)
        return result
    return shapes.time_shapes(req, stack, ref, cand, result)


#: Shortest wait for the candidate's answer on one derived input, s (a GPU may compile a new
#: specialization first); longer when its correctness calls were slow (x :data:`_DERIVED_SLACK`).
_DERIVED_WAIT_S = 30.0
_DERIVED_SLACK = 20.0


class _StageStop(Exception):
    """The compile stage failed while the candidate's seeds were being checked."""


def _stage_failure(stage) -> dict | None:
    """The compile stage's failure once the stage has answered with one (a poll, never a
    wait); None without a stage."""
    return stage.failure() if stage is not None else None


def _stop_on_stage_failure(stage) -> None:
    """Raise the compile stage's failure as soon as the stage has answered with one (issue
    33): the kernel cannot compile or launch on the target GPU, which is the verdict unless
    the candidate's own first call of a specialization failed to compile or was rejected
    (:func:`.stage.merge`; those first calls are always made), so the interpreter's remaining
    calls are not made."""
    failure = _stage_failure(stage)
    if failure is not None:
        raise Failure(failure)


def _derived_check(ref: Reference, cand: Candidate, stack: Stack):
    """``check(case, where)`` for :mod:`.judge.derived_checks`: one checked call on a derived
    shape's case, its answer awaited at most ``max(30 s, 20 x the slowest correctness call)``;
    past that the candidate process is killed and the check raises a ``timeout`` Failure
    naming the derived input (a baseline that hangs on one keeps its result)."""

    def check(case, where: str) -> None:
        bound = max(_DERIVED_WAIT_S, _DERIVED_SLACK * max(cand.wall_call_ms or [0.0]) / 1000.0)
        hard = cand.deadline
        cand.deadline = min(hard, time.monotonic() + bound)
        try:
            _check_call(case, ref, cand, stack, {}, None, where=where)
        except Failure as failure:
            if failure.result.get("status") != "timeout" or cand.deadline >= hard:
                raise
            cand.kill()
            raise Failure(
                result_dict("timeout", f"no answer from the candidate within {bound:g} s")
            ) from None
        finally:
            cand.deadline = hard

    return check


def evaluate(req: dict, ctx: dict) -> dict:
    """Evaluate a gated Triton candidate (``req``: an EvalRequest dict; ``ctx``: see
    :func:`.process.child.child_main`, with ``start``, ``deadline`` and possibly ``dirs``) and return
    its result dict. Never raises for a bad candidate.

    Three processes: this judge (never runs user or candidate code), the candidate process
    (:mod:`.contestant.process`) and the reference process (:mod:`.judge.referee`, the original file's
    harness), both forked before the judge initialises CUDA."""
    stack = cand = peer = stage = result = clock = None
    dirs = ctx.get("dirs") or new_dirs()
    try:
        stack = _import_stack(req, ctx)
        cand = spawn(req, ctx, stack.use_cuda, dirs)
        peer = spawn_reference(req, ctx, stack.use_cuda, dirs)
        stage = gpu_stage.spawn(req, ctx, stack.use_cuda, dirs)  # issue 21, runs alongside
        watch_memory(cand.pid, int(req.get("memory_limit_mb") or 8192), ctx)
        clock = PhaseClock(ctx.get("start") or time.monotonic())
        clock.mark("start")  # the stack imported, the three processes forked
        result = _run(req, ctx, stack, cand, peer, clock, stage)
    except Failure as failure:
        result = add_sizes(dict(failure.result, **(stack.env if stack else {})), ctx.get("sizes"))
    finally:
        for proc in (cand, peer, stage if result is None else None):
            if proc is not None:
                proc.stop()
        if result is None and dirs is not ctx.get("dirs"):
            remove_dirs(dirs)  # an unexpected error propagates
    if stage is not None:
        stage.release()  # a stage still waiting for its inputs makes them itself
    try:
        merged = gpu_stage.merge(result, stage and stage.answer(ctx["deadline"], result), ctx)
        return _with_phases(merged, clock, ctx.get("reference"))
    finally:
        if stage is not None:
            stage.stop()
        if dirs is not ctx.get("dirs"):
            remove_dirs(dirs)


def _with_phases(result: dict, clock: PhaseClock | None, ref: Reference | None) -> dict:
    """A passing ``result`` with ``metrics["phases_s"]``: the :class:`PhaseClock`'s phases, the
    process start (importing the stack, forking the candidate, reference and compile-stage
    processes) before them and the compile stage's answer (with Nsight Compute's replays when
    it ran) after them; and ``metrics["reference_store"]`` on a warm worker (issue 50, item 4:
    :meth:`.judge.reference.Reference.store_metrics`)."""
    if clock is None or result.get("status") != "ok":
        return result
    clock.mark("gpu_facts")
    metrics = result.setdefault("metrics", {})
    metrics["phases_s"] = clock.rounded()
    kept = ref.store_metrics() if ref is not None else None
    if kept is not None:
        metrics["reference_store"] = kept
    return result
