"""The timing loop of the candidate process and the judge's checks on what it reports (issue 10,
"Timing that verifies what it times").

Candidate side, :func:`run_timed`: our own loop instead of ``triton.testing.do_bench``. Every
timed repetition first refills the input tensors IN PLACE from a fresh pool entry (same
``data_ptr``, new values), so an output cache keyed by pointer, shape, fingerprint or content
returns a stale answer that the judge's comparison catches; on CUDA it flushes L2 as do_bench
does (Triton 3.9 ``triton/testing.py``: ``driver.get_empty_cache_for_benchmark()``, a 256 MiB
buffer, then ``clear_cache`` = ``zero_()`` before each run), then times ONE call (a pair of
``torch.cuda.Event`` on CUDA; on CPU the process's CPU time, or ``time.perf_counter``), records
the candidate's kernel launches (:class:`.contestant.launches.LaunchCounter`) and clones the
outputs, untimed.

Judge side: :func:`overhead_allowance_ms` (the honest untimed cost of that loop, measured in
the judge process), :func:`timing_inconsistency` (self-reported samples against the judge's
own clock: wall time, or the candidate's CPU time), :func:`latency_summary` and
:func:`interpreter_launch_floor_ms`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..runtime import clocks

#: Size of the L2-flush buffer, bytes: triton.testing.do_bench's (256 MB, larger than any L2).
L2_FLUSH_BYTES = 256 * 1024 * 1024
#: Python bookkeeping of one repetition outside the timed call (loop, refill dispatch,
#: ``counter.take()``, list appends, the perf_counter pair), ms. Measured ~0.02 ms on CPython
#: 3.11 on an idle 2-core VM; 0.1 ms leaves 5x room for a loaded machine.
PER_REP_PY_MS = 0.1
#: On CUDA, recording two events and synchronizing on the second, per repetition, ms (a few
#: microseconds each on an idle machine per the CUDA runtime's event API; 0.1 ms leaves room).
PER_REP_CUDA_MS = 0.1
#: Safety factor on the measured copy/flush/clone cost (it is measured at another moment than
#: the candidate ran, possibly under another load).
ALLOWANCE_FACTOR = 2.0
#: timing_inconsistency: the share of the judge's unexplained wall time that the samples must
#: account for (see its docstring).
MIN_SAMPLE_SHARE = 0.5
#: timing_inconsistency: fixed wall-clock slack for the judge's start/stop messages to the
#: candidate process (process wake-up on a loaded 2-core machine), ms.
WALL_SLACK_MS = 5.0
#: Most warm-up calls (do_bench would make ``warmup / estimate``; 1000 covers 25 ms of 25 us
#: kernels).
MAX_WARMUP_CALLS = 1000

_FLOOR_CACHE: dict[str, float] = {}
_FLOOR_FILE = "<accelopt:launch-floor>"
_FLOOR_SOURCE = """\
import triton
import triton.language as tl


@triton.jit
def accelopt_floor_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1.0)


def launch(x):
    accelopt_floor_kernel[(1,)](x)
"""


@dataclass
class TimedRun:
    """What :func:`run_timed` reports, one item per timed repetition.

    Attributes:
        samples_ms: latency of the one timed call, ms.
        launches: the candidate's kernel launches during that call.
        outputs: the call's outputs, cloned and detached (tensors stay on their device).
        pool_index: the pool entry the repetition's inputs were refilled from.
    """

    samples_ms: list[float] = field(default_factory=list)
    launches: list[int] = field(default_factory=list)
    outputs: list = field(default_factory=list)
    pool_index: list[int] = field(default_factory=list)


def _is_tensor(torch, obj) -> bool:
    return isinstance(obj, torch.Tensor)


def _refill(torch, buffers, entry) -> tuple:
    """Copy ``entry`` into ``buffers`` in place (tensors: ``copy_``, same storage; NumPy
    arrays: slice assignment; lists/tuples: element-wise) and return the call's arguments:
    the buffers' tensors and ``entry``'s other values. Raises ValueError on a structure or shape
    mismatch."""
    if _is_tensor(torch, buffers):
        if not _is_tensor(torch, entry) or tuple(entry.shape) != tuple(buffers.shape):
            raise ValueError("a pool entry does not match the timing buffers' tensor shape")
        with torch.no_grad():
            buffers.copy_(entry)
        return buffers
    if type(buffers).__name__ == "ndarray":
        buffers[...] = entry
        return buffers
    if isinstance(buffers, (list, tuple)):
        if not isinstance(entry, (list, tuple)) or len(entry) != len(buffers):
            raise ValueError("a pool entry does not match the timing buffers' structure")
        return type(buffers)(_refill(torch, b, e) for b, e in zip(buffers, entry, strict=True))
    return entry


def _snapshot(torch, obj):
    """A detached clone of ``obj`` (tensors on their device, arrays copied, containers
    rebuilt); other objects are kept as they are, for the judge to inspect."""
    if _is_tensor(torch, obj):
        return obj.detach().clone()
    if type(obj).__name__ == "ndarray":
        return obj.copy()
    if type(obj) in (list, tuple):
        return type(obj)(_snapshot(torch, o) for o in obj)
    if type(obj) is dict:
        return {k: _snapshot(torch, v) for k, v in obj.items()}
    return obj


def l2_flusher(torch) -> Callable[[], None]:
    """do_bench's L2 flush on CUDA: ``flush()`` zeroes a buffer larger than L2 (the runtime
    driver's ``get_empty_cache_for_benchmark()``/``clear_cache`` when Triton has them, else a
    256 MiB int8 tensor ``zero_()``); ``flush.nbytes`` is that buffer's size, bytes. Raises
    what CUDA raises (no device, out of memory)."""
    try:
        from triton.runtime import driver

        active = driver.active
        cache = active.get_empty_cache_for_benchmark()
        clear = active.clear_cache
    except Exception:  # noqa: BLE001 - older Triton or no driver: do it ourselves
        cache = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")

        def clear(buffer) -> None:
            buffer.zero_()

    def flush() -> None:
        clear(cache)

    flush.nbytes = int(cache.numel() * cache.element_size())  # type: ignore[attr-defined]
    return flush


def _warm_up(
    entry,
    args: tuple,
    sync: Callable[[], None],
    warmup_ms: float,
    max_calls: int,
    clock: str = clocks.WALL,
) -> None:
    """Call ``entry(*args)`` at least once and until ``warmup_ms`` is spent on ``clock`` (the
    clock the repetitions are timed by), at most ``max_calls`` times (a candidate that stops
    the clock cannot loop us forever)."""
    t0 = clocks.now_ms(clock)
    for _ in range(max(1, min(max_calls, MAX_WARMUP_CALLS))):
        entry(*args)
        sync()
        if clocks.now_ms(clock) - t0 >= warmup_ms:
            return


def _timer(
    torch, use_cuda: bool, clock: str = clocks.WALL
) -> Callable[[Callable[[], Any]], tuple[Any, float]]:
    """``timed(call) -> (result, ms)``: one call timed by a CUDA event pair (synchronized on
    the end event), or on CPU by ``clock`` (:func:`.runtime.clocks.now_ms`: the process's CPU
    time or ``time.perf_counter``)."""
    if use_cuda:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)

        def timed_cuda(call):
            start.record()
            out = call()
            end.record()
            end.synchronize()
            return out, start.elapsed_time(end)

        return timed_cuda

    def timed_cpu(call):
        t0 = clocks.now_ms(clock)
        out = call()
        return out, clocks.now_ms(clock) - t0

    return timed_cpu


def run_timed(
    entry,
    buffers: tuple,
    pool: list[tuple],
    *,
    torch,
    use_cuda: bool,
    counter,
    rep_ms: float,
    warmup_ms: float,
    min_reps: int = 3,
    on_timed_start: Callable[[], None] | None = None,
    max_warmup_calls: int = MAX_WARMUP_CALLS,
    clock: str = clocks.WALL,
) -> TimedRun:
    """Candidate side: time ``entry`` with inputs refilled in place from ``pool``.

    Args:
        entry: the candidate's launcher, called as ``entry(*inputs)``.
        buffers: the timing inputs (tensors on the device); refilled in place, so every timed
            call sees the same ``data_ptr``s with new values.
        pool: input tuples of the same structure and shapes (distinct seeds); repetition ``i``
            uses ``pool[i]`` (its tensors copied into ``buffers``, its other values as given).
        torch: the torch module. use_cuda: time with CUDA events and flush L2 (else ``clock``).
        counter: a :class:`.contestant.launches.LaunchCounter` already installed; read per repetition.
        rep_ms: stop once the samples add up to this (ms); warmup_ms: time on ``clock`` of
            warm-up calls on ``buffers`` as given (at least one call), ms.
        min_reps: never fewer repetitions than ``min(min_reps, len(pool))``.
        on_timed_start: called after the warm-up, right before the first repetition (for the
            judge's wall clock: a "timed phase starts" message).
        max_warmup_calls: at most this many warm-up calls. The judge derives it from its own
            clock (``warmup_ms`` / the slowest correctness round trip it measured), since this
            process's clock may be patched by the candidate.
        clock: on CPU, what the warm-up and the repetitions are timed by
            (:data:`.runtime.clocks.CPU`, this process's CPU time, or ``WALL``); the judge
            picks it and checks the samples on the same kind of clock.

    Returns a :class:`TimedRun`. Raises what ``entry`` raises; ValueError when a pool entry
    does not match ``buffers``.
    """
    sync = torch.cuda.synchronize if use_cuda else (lambda: None)
    _warm_up(entry, tuple(buffers), sync, warmup_ms, max_warmup_calls, clock)
    flush = l2_flusher(torch) if use_cuda else None
    timed = _timer(torch, use_cuda, clock)
    need = min(min_reps, len(pool))
    run = TimedRun()
    sync()
    counter.take()  # forget the warm-up's launches
    if on_timed_start is not None:
        on_timed_start()
    spent = 0.0
    for i, inputs in enumerate(pool):
        if i >= need and spent >= rep_ms:
            break
        args = tuple(_refill(torch, tuple(buffers), tuple(inputs)))
        if flush is not None:
            flush()
        out, ms = timed(lambda args=args: entry(*args))
        run.launches.append(counter.take())
        run.samples_ms.append(ms)
        spent += ms
        run.outputs.append(_snapshot(torch, out))
        run.pool_index.append(i)
    sync()
    return run


def overhead_allowance_ms(
    buffers: tuple,
    pool: list[tuple],
    example_output,
    reps: int,
    *,
    torch,
    use_cuda: bool,
    clock: str = clocks.WALL,
) -> float:
    """Judge side: the honest untimed cost (ms) of ``reps`` repetitions of :func:`run_timed`'s
    loop, measured by doing the same work in the judge process on scratch copies (``buffers``
    and ``pool`` are not modified): per repetition the refill copies, the L2 flush (CUDA), the
    clone of an output like ``example_output``, then ``ALLOWANCE_FACTOR`` (2) times that,
    plus ``PER_REP_PY_MS`` (and ``PER_REP_CUDA_MS`` on CUDA) per repetition for the Python and
    event bookkeeping. At most 8 repetitions are measured (on ``clock``: the judge's CPU time
    when the samples are CPU time, else wall time) and the mean is scaled to ``reps``.
    Raises what torch raises (e.g. out of device memory for the flush buffer)."""
    if reps <= 0 or not pool:
        return 0.0
    scratch = _snapshot(torch, tuple(buffers))
    flush = l2_flusher(torch) if use_cuda else None
    sync = torch.cuda.synchronize if use_cuda else (lambda: None)
    measured = min(reps, 8)
    sync()
    t0 = clocks.now_ms(clock)
    for i in range(measured):
        _refill(torch, scratch, tuple(pool[i % len(pool)]))
        if flush is not None:
            flush()
        _snapshot(torch, example_output)
        sync()
    per_rep = (clocks.now_ms(clock) - t0) / measured
    constant = PER_REP_PY_MS + (PER_REP_CUDA_MS if use_cuda else 0.0)
    return reps * (ALLOWANCE_FACTOR * per_rep + constant)


def timing_inconsistency(
    wall_ms: float,
    samples_ms: list[float],
    allowance_ms: float,
    *,
    min_share: float = MIN_SAMPLE_SHARE,
    slack_ms: float = WALL_SLACK_MS,
) -> str | None:
    """Judge side: None when the candidate's self-reported samples are consistent with the
    judge's wall clock, else the reason (rule "timing inconsistent").

    ``wall_ms`` is the judge's own clock around the whole timed phase (from the start of the
    first repetition, see ``on_timed_start``, until the samples are back); ``allowance_ms``
    comes from :func:`overhead_allowance_ms`. The repetitions run one after the other, so the
    wall time is the sum of the samples plus the untimed overhead; the formula:

        unexplained = wall_ms - allowance_ms - slack_ms
        inconsistent  <=>  sum(samples_ms) < min_share * unexplained      (min_share = 0.5)

    An honest run has ``sum(samples) >= unexplained`` whenever the allowance covers the true
    overhead; ``min_share = 0.5`` tolerates the untimed part taking up to twice the allowance
    (preemption on a loaded machine, as measured in tests/onsite/test_timing.py) plus
    ``slack_ms`` (5 ms) for the start/stop messages. A forged clock that reports samples 10x
    below reality is caught when the real samples outweigh the allowance's over-estimate
    ``e`` of the true overhead: ``s/10 < 0.5 (s - e - slack)`` iff ``s > 1.25 (e + slack)``;
    this holds for interpreter timings (ms per call) but not for GPU kernels much shorter than
    the L2 flush, where the plausibility check (over 100% of peak) is the guard. Negative or
    non-finite samples are inconsistent."""
    if any(not (s >= 0.0) or s == float("inf") for s in samples_ms):
        return "a timing sample is negative or not finite"
    total = sum(samples_ms)
    unexplained = wall_ms - allowance_ms - slack_ms
    if total < min_share * unexplained:
        return (
            f"the reported samples add up to {total:.3f} ms but the judge measured "
            f"{wall_ms:.3f} ms around the timed phase ({allowance_ms:.3f} ms of it untimed "
            f"overhead, {slack_ms:g} ms slack): under {min_share:g} of the rest"
        )
    return None


def _percentile(sorted_vals: list[float], q: float) -> float:
    """Linear-interpolated ``q`` quantile (0..1) of ascending values."""
    pos = q * (len(sorted_vals) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def latency_summary(samples_ms: list[float]) -> tuple[float, float, float]:
    """(median, p20, p80) of the samples, ms, linear-interpolated quantiles (as NumPy's
    default and do_bench's ``quantiles``). Raises ValueError for no samples."""
    if not samples_ms:
        raise ValueError("no timing samples")
    ordered = sorted(samples_ms)
    med, p20, p80 = (_percentile(ordered, q) for q in (0.5, 0.2, 0.8))
    return med, p20, p80


def interpreter_launch_floor_ms(*, torch, clock: str = clocks.WALL) -> float:
    """Judge side, under ``TRITON_INTERPRET=1``: the median time on ``clock`` (ms; CPU or wall
    time, as the candidate's samples) of launching the judge's own trivial one-program Triton
    kernel (one float32 load and store) on CPU, 2 warm-up and 7 timed launches, measured once
    per process and clock and cached. Its source is registered in
    :mod:`linecache` under a fake file name, so ``triton.jit`` finds it when this module is
    loaded from memory. A candidate latency below half of it is implausible. Raises ImportError
    without triton."""
    if clock in _FLOOR_CACHE:
        return _FLOOR_CACHE[clock]
    from ..runtime.loading import load_module

    module = load_module("accelopt_launch_floor", _FLOOR_SOURCE, _FLOOR_FILE)
    x = torch.zeros(1, dtype=torch.float32)
    for _ in range(2):
        module.launch(x)
    times = []
    for _ in range(7):
        t0 = clocks.now_ms(clock)
        module.launch(x)
        times.append(clocks.now_ms(clock) - t0)
    _FLOOR_CACHE[clock] = latency_summary(times)[0]
    return _FLOOR_CACHE[clock]
