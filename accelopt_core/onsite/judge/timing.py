"""The judge's side of timing a candidate (issue 10, "Timing that verifies what it times").

One timed run (:func:`_time_once`): the judge makes the timing buffers (the timing seed) and a
pool of fresh inputs from seeds drawn from ``os.urandom`` AFTER the fork, and writes them only
now: the candidate loads them inside the judge's wall clock and runs :func:`.contestant.timing.run_timed`
(warm-up on the buffers, then one timed call per pool entry), so whatever it precomputes from
the pool is on that clock. The judge then checks:

- every repetition launched a kernel of the candidate (rule ``no kernel launch``);
- the outputs of the first, the last and 2 random repetitions (picked after the timing) match
  the judge's references for the pool entries they used (status ``incorrect``);
- the clock (:func:`_clock_reason`): the samples against the judge's own measure of the whole
  phase (loading the files, the warm-up, the repetitions). Under the interpreter the samples are
  the candidate process's CPU time and the judge's measure is that process's CPU time as the
  kernel accounts it (:mod:`.runtime.clocks`: wall time is the load's, and the same file timed
  at 80 ms idle took 240-300 ms beside other work), else both are wall time;
- plausibility: under the interpreter a median below half of
  :func:`.contestant.timing.interpreter_launch_floor_ms`; on CUDA over 100% of peak
  (:func:`.judge.roofline.plausibility`).

A clock or plausibility failure is timed once more (a fresh pool) before it is final: status
``rejected`` with rule ``timing inconsistent``, ``implausible latency`` or ``over 100% of peak``.
"""

from __future__ import annotations

import math
import os
import random
import time

from ..contestant import timing
from ..runtime import clocks, exchange
from ..runtime.failures import Failure
from .compare import compare, incorrect
from .peers import Candidate
from .roofline import plausibility
from .rules import no_launch, plain_outputs, protocol_violation, rejected, segment_value, segments

CLOCK_RULE = "timing inconsistent"
FLOOR_RULE = "implausible latency"
PEAK_RULE = "over 100% of peak"

#: Most pool entries (= timed repetitions): on CPU as the interpreter timing had (20), on CUDA
#: 100 (each a fresh input set, so fewer than do_bench's thousands of calls).
POOL_MAX_CPU = 20
POOL_MAX_CUDA = 100
#: Most bytes of inputs in one pool (each entry is made, written and loaded once), B.
POOL_BYTES = 512 * 2**20
MIN_REPS = 3
#: Repetitions whose outputs are verified besides the first and the last.
RANDOM_CHECKS = 2
#: The median must be at least this share of the judge's wall time per call (see
#: :func:`_clock_reason`).
MEDIAN_SHARE = 0.5
#: Under the interpreter the launch floor (0.6 ms idle, 1.3 ms at load 8 on the 2-core test
#: machine; ~0.1 s to measure in a fresh process, inherited from a warm worker) is only checked
#: for a median below this, ms: a median above it would need a trivial launch to cost over
#: 10 ms, 8x the loaded figure, to be implausible.
FLOOR_CHECK_BELOW_MS = 5.0
#: Fixed slack for the time/samples messages and the pool file's open, ms.
MESSAGE_SLACK_MS = 5.0


def _fresh_seeds(n: int, taken: set[int]) -> list[int]:
    """``n`` distinct 31-bit seeds from ``os.urandom`` (not in ``taken``)."""
    seeds: list[int] = []
    while len(seeds) < n:
        s = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
        if s not in taken and s not in seeds:
            seeds.append(s)
    return seeds


def _nbytes(obj) -> int:
    """Bytes of the tensors / arrays in ``obj``."""
    if hasattr(obj, "nbytes"):
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return 0


def pool_size(req: dict, use_cuda: bool, buffers: tuple, call_ms: list[float]) -> int:
    """Pool entries for one timed run: enough to spend ``rep_ms`` at the fastest correctness
    call the candidate reported (+1), within :data:`POOL_BYTES` and the cap of the device
    (:data:`POOL_MAX_CPU` / :data:`POOL_MAX_CUDA`), never below :data:`MIN_REPS`."""
    cap = POOL_MAX_CUDA if use_cuda else POOL_MAX_CPU
    size = _nbytes(buffers)
    if size:
        cap = min(cap, POOL_BYTES // size)
    fastest = min(call_ms) if call_ms else 0.0
    if fastest > 0:
        cap = min(cap, math.ceil(float(req.get("rep_ms", 100.0)) / fastest) + 1)
    return max(MIN_REPS, cap)


def warmup_calls(warmup_ms: float, wall_call_ms: list[float]) -> int:
    """Most warm-up calls the candidate may make: ``warmup_ms`` divided by the fastest
    correctness round trip on the judge's clock (which includes loading the inputs, so this
    errs on the side of fewer calls), at least 1, at most
    :data:`.contestant.timing.MAX_WARMUP_CALLS`. The candidate's own clock is not trusted for it: a
    candidate that stops ``time.perf_counter`` would otherwise warm up until the timeout."""
    fastest = min(wall_call_ms) if wall_call_ms else 0.0
    if fastest <= 0:
        return 1
    return max(1, min(timing.MAX_WARMUP_CALLS, math.ceil(warmup_ms / fastest)))


def _samples(reply: dict, pool_len: int) -> tuple[list[float], list]:
    """The samples and launch counts of a ``time`` answer, checked for shape. Raises Failure
    (protocol violation)."""
    samples, launches, index = (reply.get(k) for k in ("samples_ms", "launches", "pool_index"))
    ok = isinstance(samples, list) and isinstance(launches, list) and isinstance(index, list)
    n = len(samples) if ok else 0
    if not ok or not min(MIN_REPS, pool_len) <= n <= pool_len:
        raise protocol_violation(f"{n} timing samples for a pool of {pool_len}")
    if len(launches) != n or index != list(range(n)):
        raise protocol_violation("the repetitions do not match the pool entries in order")
    if not all(type(s) in (int, float) for s in samples):
        raise protocol_violation("a timing sample is not a number")
    return [float(s) for s in samples], launches


def _clock_reason(
    wall_ms: float,
    samples: list[float],
    allowance_ms: float,
    warmup_ms: float,
    resolution_ms: float = 0.0,
) -> str | None:
    """None when the samples agree with the judge's clock, else why not.

    ``wall_ms`` (the judge's measure, wall or the candidate's CPU time, ``resolution_ms``
    coarse: both ends may be off by it, so twice that is slack) spans loading the buffers and
    the pool, the warm-up (``warmup_ms`` of calls, overshooting by at most one call:
    ``warmup_ms + median`` is allowed for it) and the repetitions; ``allowance_ms`` the
    honest untimed cost (refills, flushes, clones, the files' load). Two rules:
    :func:`.contestant.timing.timing_inconsistency` on the sum, and ``median >= MEDIAN_SHARE *
    (wall - allowance - warm-up - slack) / n``: the per-call time only the judge's clock
    measures bounds the median from below, so a candidate cannot report its real total in one
    sample and tiny others."""
    n = len(samples)
    med = timing.latency_summary(samples)[0]
    warm = warmup_ms + med + 2.0 * resolution_ms
    reason = timing.timing_inconsistency(wall_ms, samples, allowance_ms + warm)
    if reason:
        return reason
    per_call = (wall_ms - allowance_ms - warm - MESSAGE_SLACK_MS) / n
    if med < MEDIAN_SHARE * per_call:
        return (
            f"the median sample is {med:.4g} ms but the judge's clock gives {per_call:.4g} ms "
            f"per call over {n} repetitions"
        )
    return None


def _verify_reps(picks: list[int], seeds: list[int], ref, cand: Candidate, stack, errors: dict):
    """The outputs of the picked repetitions against the references of their pool entries
    (``seeds[i]``: the seed of pool entry ``i``), computed by the reference process; returns
    the first reference (an example output). Raises Failure: incorrect, rejected (not a plain
    tensor), protocol violation, the harness's runtime_error."""
    answer = cand.ask({"op": "send", "reps": picks}, "sent")
    sent = segments(answer, "sent", len(picks))
    outs = [segment_value(seg, stack.torch, ref.device) for seg in sent]  # checked there
    refs = ref.expected([seeds[i] for i in picks], stack.torch)
    first = None
    for i, out, expected in zip(picks, outs, refs, strict=True):
        plain_outputs(out, f"timed repetition {i}")
        why = compare(out, expected, ref.bench, errors)
        if why:
            raise Failure(incorrect(f"timed repetition {i} (fresh inputs): {why}", errors))
        first = expected if first is None else first
    return first


def _touch(value, torch) -> None:
    """Read every byte of the storages of ``value``'s tensors, as a consumer of a fresh
    mapping does (a sum over the bytes faults each page in; the result is not used)."""
    if isinstance(value, (tuple, list)):
        for v in value:
            _touch(v, torch)
    elif type(value) is torch.Tensor and value.device.type == "cpu":
        exchange.storage_bytes(torch, value).sum()


def _picks(n: int) -> list[int]:
    """The repetitions to verify: the first, the last and :data:`RANDOM_CHECKS` others."""
    middle = list(range(1, n - 1))
    rng = random.SystemRandom()
    return sorted({0, n - 1, *rng.sample(middle, min(RANDOM_CHECKS, len(middle)))})


def _make_pool(req: dict, stack, ref, cand: Candidate) -> tuple[list, list[int]]:
    """The timing buffers (the timing seed) and a pool of fresh inputs (seeds from
    ``os.urandom``, drawn now, never sent to the candidate), all made by the reference
    process, as ``(segment, inputs on the judge's device)`` pairs with the buffers first,
    and the pool's seeds. The caller closes the segments. Raises Failure when the harness
    fails."""
    seed = int(req.get("timing_seed", 1000))
    made = ref.inputs([seed], stack.torch, stack.device, kept=True)  # issue 50, item 4
    try:
        n = pool_size(req, stack.use_cuda, made[0][1], cand.call_ms)
        taken = {seed, *(int(s) for s in req.get("seeds") or [])}
        seeds = _fresh_seeds(n, taken)
        made += ref.inputs(seeds, stack.torch, stack.device)
    except BaseException:
        _close(made)
        raise
    return made, seeds


def _close(made: list) -> None:
    for seg, _ in made:
        seg.close()


def timing_clock(use_cuda: bool, pid: int) -> str:
    """The clock a timed run on CPU is sampled by: :data:`.runtime.clocks.CPU` under the
    interpreter where the judge can read the candidate process's CPU time (``pid``), else
    :data:`.runtime.clocks.WALL` (on CUDA the samples are CUDA events, the phase wall time)."""
    if not use_cuda and clocks.process_cpu_ms(pid) is not None:
        return clocks.CPU
    return clocks.WALL


class _PhaseClock:
    """The judge's measure of the candidate's timed phase on ``clock``: the candidate
    process's CPU time (:func:`.runtime.clocks.process_cpu_ms`) or the judge's wall time.
    Falls back to wall time when the CPU account can no longer be read."""

    def __init__(self, clock: str, pid: int) -> None:
        self.pid = pid
        self.cpu0 = clocks.process_cpu_ms(pid) if clock == clocks.CPU else None
        self.wall0 = time.perf_counter()

    def elapsed(self) -> tuple[float, float]:
        """``(ms, resolution_ms)`` since construction."""
        cpu1 = clocks.process_cpu_ms(self.pid) if self.cpu0 is not None else None
        if cpu1 is not None and self.cpu0 is not None:
            return cpu1[0] - self.cpu0[0], max(cpu1[1], self.cpu0[1])
        return (time.perf_counter() - self.wall0) * 1000.0, 0.0


def _time_once(req: dict, stack, ref, cand: Candidate, errors: dict) -> dict:
    """One timed run, verified: ``latency_ms``, ``p20_ms``, ``p80_ms``, ``inputs`` (the
    buffers), ``clock`` (None or why the samples disagree with the judge's clock) and
    ``clock_kind`` (:func:`timing_clock`). Raises Failure (no kernel launch, incorrect,
    protocol violation, the candidate's errors)."""
    made, seeds = _make_pool(req, stack, ref, cand)
    try:
        return _time_made(req, stack, ref, cand, errors, made, seeds)
    finally:
        _close(made)


def _time_made(req: dict, stack, ref, cand: Candidate, errors: dict, made: list, seeds: list):
    """:func:`_time_once` on the buffers and pool made (``(segment, inputs)`` pairs)."""
    buffers, pool = made[0][1], [inputs for _, inputs in made[1:]]
    kind = timing_clock(stack.use_cuda, cand.pid)
    # The candidate maps the same segments (no copy; onto the GPU with one copy each): its
    # cost is estimated by the judge's own mapping of the buffers, timed on the same clock,
    # times the number of segments (the pool's entries have the buffers' shapes).
    t0 = clocks.now_ms(kind)
    _touch(made[0][0].value(stack.torch, stack.device), stack.torch)
    map_ms = (clocks.now_ms(kind) - t0) * len(made)
    warmup_ms = float(req.get("warmup_ms", 25.0))
    msg = {"op": "time", "buffers": made[0][0], "pool": [seg for seg, _ in made[1:]]}
    msg["warmup_ms"] = warmup_ms
    if ref.backward:  # the timed region is forward + backward (all-ones upstream gradient)
        msg["grad_inputs"] = ref.grad_inputs
    msg.update(rep_ms=float(req.get("rep_ms", 100.0)), min_reps=MIN_REPS)
    msg["max_warmup_calls"] = warmup_calls(warmup_ms, cand.wall_call_ms)
    msg["clock"] = kind
    phase = _PhaseClock(kind, cand.pid)
    reply = cand.ask(msg, "samples_ms")
    phase_ms, resolution_ms = phase.elapsed()
    samples, launches = _samples(reply, len(pool))
    for i, count in enumerate(launches):
        no_launch(count, f"timed repetition {i}")
    example = _verify_reps(_picks(len(samples)), seeds, ref, cand, stack, errors)
    allowance = timing.overhead_allowance_ms(
        buffers,
        pool,
        example,
        len(samples),
        torch=stack.torch,
        use_cuda=stack.use_cuda,
        clock=kind,
    )
    allowance += 2.0 * map_ms  # the candidate's mapping of the segments, as long as ours
    med, p20, p80 = timing.latency_summary(samples)
    clock = _clock_reason(phase_ms, samples, allowance, warmup_ms, resolution_ms)
    chosen = reply.get("chosen") if isinstance(reply.get("chosen"), dict) else {}
    return {
        "latency_ms": med,
        "p20_ms": p20,
        "p80_ms": p80,
        "inputs": buffers,
        "clock": clock,
        "clock_kind": kind,
        "chosen": {str(k)[:80]: str(v)[:200] for k, v in list(chosen.items())[:8]},
    }


def _implausible(run: dict, stack, work: dict, req: dict, result: dict) -> tuple[str, str] | None:
    """``(rule, message)`` when the run is implausible (see the module docstring)."""
    if run["clock"]:
        return CLOCK_RULE, f"timing inconsistent: {run['clock']}"
    if not stack.use_cuda:
        if run["latency_ms"] >= FLOOR_CHECK_BELOW_MS:
            return None
        floor = timing.interpreter_launch_floor_ms(torch=stack.torch, clock=run["clock_kind"])
        if run["latency_ms"] < 0.5 * floor:
            return FLOOR_RULE, (
                f"implausible latency: {run['latency_ms']:.3g} ms is under half of what the "
                f"interpreter takes to launch a trivial kernel ({floor:.3g} ms)"
            )
        return None
    trial = dict(result, latency_ms=run["latency_ms"])
    plausibility(trial, {}, run["inputs"], req.get("peaks") or {}, "cuda", work=work)
    if trial["status"] == "rejected":
        return PEAK_RULE, trial["message"]
    return None


def time_candidate(req: dict, stack, ref, cand: Candidate, result: dict) -> None:
    """Time the candidate (re-timed once when a clock or plausibility rule fails) and fill in
    ``latency_ms``, ``p20_ms``, ``p80_ms``, ``timing``, the message and the plausibility fields
    of ``result`` (``ref``: the :class:`.judge.reference.Reference`, which makes every input and
    reference). Raises Failure (a rule that stands: rejected; incorrect; the candidate's
    errors)."""
    errors: dict = {}
    work, notes = ref.work(int(req.get("timing_seed", 1000)))
    if notes:
        result.setdefault("warnings", []).extend(notes)
    for attempt in range(2):
        run = _time_once(req, stack, ref, cand, errors)
        found = _implausible(run, stack, work, req, result)
        if found is None:
            break
        if attempt == 1:
            raise rejected(found[0], found[1] + " (twice)")
    mode = "cuda" if stack.use_cuda else "interpreter"
    result.update(
        latency_ms=run["latency_ms"], p20_ms=run["p20_ms"], p80_ms=run["p80_ms"], timing=mode
    )
    if mode == "interpreter":
        timed_by = "CPU time" if run["clock_kind"] == clocks.CPU else "wall time"
        result["message"] += (
            f"; Triton interpreter on CPU, timed in {timed_by}: latency says nothing about GPU "
            "speed"
        )
    if run["chosen"]:  # the config each @triton.autotune kernel used (tuned during warm-up)
        result.setdefault("metrics", {})["autotune"] = run["chosen"]
        picks = "; ".join(f"{k}: {v}" for k, v in run["chosen"].items())
        result["message"] += f"; autotune: {picks}"
    plausibility(result, {}, run["inputs"], req.get("peaks") or {}, mode, work=work)
    if result["status"] == "rejected":
        result["rule"] = PEAK_RULE


def _percentile(sorted_vals: list[float], q: float) -> float:
    """Linear-interpolated ``q`` quantile (0..1) of ascending values."""
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = q * (len(sorted_vals) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


#: Most runs of :func:`interpreter_times`: enough for ``rep_ms`` of sub-millisecond calls.
INTERPRETER_MAX_RUNS = 1000


def interpreter_times(call, rep_ms: float) -> tuple[float, float, float]:
    """(median, p20, p80) ms of this process's CPU time (:data:`.runtime.clocks.CPU`, so
    that the load of other processes does not decide it) per ``call`` after one warm-up: runs
    until ``rep_ms`` is spent, at least 3 and at most :data:`INTERPRETER_MAX_RUNS` (the NKI
    simulator's timing, in-process). The whole ``rep_ms`` is used, not a fixed count: 20 runs
    of a 0.5 ms kernel span 10 ms, and one slow 10 ms stretch of a loaded machine (the
    development machine's two cores run 1.5x slower for a while beside busy processes) moved
    every quantile of such a run, so a 2.2x faster tile size at times overlapped its parent."""
    call()  # warm-up
    times: list[float] = []
    total = 0.0
    while len(times) < INTERPRETER_MAX_RUNS and (len(times) < 3 or total < rep_ms):
        t0 = clocks.now_ms(clocks.CPU)
        call()
        dt = clocks.now_ms(clocks.CPU) - t0
        times.append(dt)
        total += dt
    times.sort()
    med, p20, p80 = (_percentile(times, q) for q in (0.5, 0.2, 0.8))
    return med, p20, p80
