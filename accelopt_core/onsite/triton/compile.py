"""The compile stage (issue 21): every launch the entry makes, compiled for the target GPU on
a machine that may have none, in a process without ``TRITON_INTERPRET``.

:func:`run_stage` loads the original file's harness and the candidate (:mod:`..runtime.
loading`), makes the inputs of one seed (and of each ``BENCH["shapes"]`` entry) on the CPU
(on the GPU of a CUDA target: :func:`input_device`), calls the entry (forward + backward with
``BENCH["backward"]``) with Triton compiling and "launching" for the device
(:mod:`.capture`), then reads each distinct kernel's facts
(:mod:`.facts`). Its answer is ``{"gpu": metrics["gpu"]}`` (notes/contracts.md) or
``{"failure": result dict}``: status ``incorrect``, message ``does not compile for sm_90
(H100 SXM5): <Triton's message>`` or ``cannot launch on H100 SXM5 (sm_90): <reason>``, with
the candidate's line. Anything else that goes wrong (the entry's host code on uninitialised
outputs, a missing tool) is a warning in ``metrics["gpu"]``, never a verdict: the
interpreter's evaluation decides those.

Standard library only at module level.
"""

from __future__ import annotations

import ast
import re
import sys
import time
import traceback
from collections.abc import Callable

from ..protocol import result_dict
from ..runtime.failures import _candidate_frame, _compilation_error, translate_compile_line
from . import capture, cubin, facts, prewarm
from .devices import Device

#: Most ``BENCH["shapes"]`` entries compiled besides the default inputs.
MAX_SHAPES = 4


def _in_jit(exc: BaseException) -> bool:
    """Raised inside Triton's JIT or compiler (binding, compiling, loading)."""
    seen, chain = set(), exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        tb = chain.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename.replace("\\", "/")
            if "/triton/runtime/jit.py" in name or "/triton/compiler/" in name:
                return True
            tb = tb.tb_next
        chain = chain.__cause__ or chain.__context__
    return False


_HELPER = re.compile(r"Unsupported function referenced: <function (\w+)")


def _helper_line(message: str, tree: ast.Module | None) -> int | None:
    """The line of the first call of the plain-Python function named in Triton's
    ``Unsupported function referenced`` error, in the candidate."""
    m = _HELPER.search(message)
    if not m or tree is None:
        return None
    calls = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == m.group(1)
    ]
    return min(calls) if calls else None


def _triton_message(exc: BaseException) -> str:
    """Triton's own message: a CompilationError's ``error_message``, else the last line."""
    comp = _compilation_error(exc)
    if comp is not None:
        text = getattr(comp, "error_message", None) or str(comp)
    else:
        text = str(exc)
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    text = re.sub(r" at 0x[0-9a-fA-F]+>", ">", lines[-1] if lines else type(exc).__name__)
    return text if len(text) <= 500 else text[:500] + "..."


def _launch_reason(exc: BaseException) -> str | None:
    """The reason a launch is refused, or None when ``exc`` is not such a refusal."""
    if isinstance(exc, capture.LaunchRefused):
        return str(exc)
    if type(exc).__name__ == "OutOfResources":
        name, req, lim = (getattr(exc, k, None) for k in ("name", "required", "limit"))
        if name == "shared memory":
            return f"shared memory per block {req:,} B > {lim:,} B"
        if name == "threads":
            return f"threads per block {req:,} > {lim:,}"
        return f"{name} {req:,} > {lim:,}" if name else str(exc)
    return None


def classify(exc: BaseException, dev: Device, where: tuple | None, ctx: dict) -> dict | None:
    """The ``incorrect`` result for a compile or launch failure ``exc`` on ``dev`` (``where``:
    ``(kernel, config)`` being compiled, ``ctx``: ``cand_file``, ``cand_tree``), or None when
    ``exc`` is neither (an error of the entry's own code)."""
    reason = _launch_reason(exc)
    if reason is None and not _in_jit(exc):
        return None
    tree = ctx.get("cand_tree")
    comp = _compilation_error(exc)
    line = translate_compile_line(comp, tree) if comp is not None else None
    line = line or _helper_line(str(exc), tree) or _candidate_frame(exc, ctx["cand_file"])[1]
    context = f" (kernel {where[0]}, {where[1]})" if where else ""
    if reason is not None:
        msg = f"cannot launch on {dev.name} ({dev.arch}): {reason}{context}"
    else:
        msg = f"does not compile for {dev.arch} ({dev.name}): {_triton_message(exc)}{context}"
    return result_dict("incorrect", msg, line=line)


def _calls(harness, seed: int) -> list[tuple[str, dict | None]]:
    """``(label, shape)`` of each call to compile: the default inputs, then up to
    :data:`MAX_SHAPES` of ``BENCH["shapes"]``."""
    shapes = harness.bench.get("shapes")
    shapes = [s for s in shapes if isinstance(s, dict)] if isinstance(shapes, list) else []
    return [(f"seed {seed}", None)] + [(f"shape {s}", s) for s in shapes[:MAX_SHAPES]]


def _call_entry(
    entry, harness, seed: int, shape: dict | None, torch, device: str = "cpu", given=None
) -> None:
    """One call of the entry on inputs made on ``device``, or on ``given`` (the judge's
    segment of them, :func:`_given`) (forward + backward with ``BENCH["backward"]``)."""
    if given is not None:
        inputs = tuple(given.value(torch))
    else:
        inputs = harness.get_inputs(seed, device, **(shape or {}))
    if harness.bench.get("backward") is True:
        from ..contestant.backward import forward_backward, leaves

        forward_backward(entry, leaves(tuple(inputs), torch), seed, torch)
    else:
        entry(*inputs)


def input_device(setup: dict) -> str:
    """Where the stage makes the inputs: ``"cuda"`` on a CUDA target, so that the harness
    picks the same shapes and Triton's binder sees the same pointers as the timed run (a
    harness may size its inputs by device: the examples make GPU-sized ones on ``"cuda"``);
    ``"cpu"`` elsewhere. The kernels are still only compiled and recorded, never run."""
    return "cuda" if setup.get("use_cuda") else "cpu"


def _load(setup: dict):
    """``(harness, entry)`` from the setup's sources (raises what loading raises)."""
    from ..runtime.loading import load_candidate, load_harness

    name = str(setup.get("source_name") or "candidate.py")
    harness = load_harness(setup["harness_source"], name, setup.get("project"))
    _, entry = load_candidate(
        setup["candidate_source"], setup["cand_file"], setup["entry"], setup.get("project")
    )
    return harness, entry


def _one_call(
    entry, harness, seed: int, calls: list, device: str, given: list | None = None
) -> Callable[[int], None]:
    """``run(i)``: call ``entry`` on input set ``calls[i]``, made on ``device`` or the judge's
    ``given[i]`` (for :class:`.prewarm.Prewarm`)."""

    def run(i: int) -> None:
        import torch

        with torch.no_grad() if not harness.bench.get("backward") else _null():
            _call_entry(entry, harness, seed, calls[i][1], torch, device, given and given[i])

    return run


def _given(setup: dict, harness, count: int) -> list | None:
    """Issue 50, item 5: the judge's segments of the inputs of the stage's ``count`` calls
    (the reference process made them, or the warm worker kept them: this process makes no
    values), received once through ``setup["receive_inputs"]``; None where the judge sends none
    (a CUDA target makes them on the device, a backward harness needs its own leaves, a harness
    that raises on one), and the stage makes them with ``get_inputs`` as before. The seconds
    waited go to ``setup["input_wait_s"]``."""
    from ..runtime.exchange import Segment

    receive = setup.get("receive_inputs")
    if receive is None:
        return None
    t0 = time.perf_counter()
    try:
        msg = receive()
    except Exception:  # noqa: BLE001 - no answer in time, or the judge is gone: make them
        return None
    finally:
        setup["input_wait_s"] = time.perf_counter() - t0
    segs = msg.get("inputs")
    if harness.bench.get("backward") is True or not isinstance(segs, list):
        return None
    if len(segs) != count or not all(isinstance(seg, Segment) for seg in segs):
        return None
    return segs


def _run_entry(
    setup: dict, dev: Device, recorder, ctx: dict, fresh: set[str], early: _EarlyStart | None = None
) -> tuple[dict | None, list]:
    """Load the harness and the candidate, then call the entry on each input set
    (:func:`_each_call`) while :class:`.prewarm.Prewarm`'s processes compile the later sets'
    kernels (their fresh compiles are added to ``fresh``) and ``early`` is armed;
    ``(failure or None, warnings)``."""
    seed = int(setup.get("seed") or 1)
    try:
        harness, entry = _load(setup)
    except Exception as exc:  # noqa: BLE001 - the interpreter's evaluation reports it
        return None, [f"compile stage: loading failed ({type(exc).__name__}: {exc})"[:400]]
    device = input_device(setup)
    calls = _calls(harness, seed)
    run = _one_call(entry, harness, seed, calls, device, _given(setup, harness, len(calls)))
    # on a CUDA target the inputs are made on the GPU: forked children would each need a CUDA
    # context of their own, so the stage's own pass compiles alone there
    with prewarm.Prewarm(len(calls) if device == "cpu" else 1, run) as pool:
        if early is not None:
            early.arm()
        done = _each_call(run, [label for label, _ in calls], (dev, recorder, ctx))
    fresh |= pool.fresh
    return done


def _each_call(run, labels: list[str], where: tuple) -> tuple[dict | None, list]:
    """``run(i)`` (:func:`_one_call`) for each input set, in order; ``(failure or None,
    warnings)``. ``where``: ``(device, recorder, ctx)`` to classify a failure with."""
    dev, recorder, ctx = where
    warnings: list[str] = []
    for i, label in enumerate(labels):
        try:
            run(i)
        except Exception as exc:  # noqa: BLE001 - classified below
            failure = classify(exc, dev, recorder.current, ctx)
            if failure is not None:
                return failure, warnings
            warnings.append(_host_error(label, exc, ctx))
            break
        if recorder.config_failures:
            kernel, config, exc = recorder.config_failures[0]
            failure = classify(exc, dev, (kernel, f"autotune config {config}"), ctx)
            if failure is not None:
                return failure, warnings
    return None, warnings


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _host_error(label: str, exc: BaseException, ctx: dict) -> str:
    """A warning for an error of the entry's own code (it ran on uninitialised outputs)."""
    line = _candidate_frame(exc, ctx["cand_file"])[1]
    at = f" at line {line}" if line else ""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
    return (
        f"compile stage stopped on {label}: the entry raised {text}{at}; launches after it "
        "were not compiled"
    )


#: Seconds into the stage's pass after which the disassembler is started early: a pass over
#: cached kernels ends before (30-100 ms on the 2-core development box), one that compiles a
#: new kernel takes 0.3 s or more.
EARLY_DISASSEMBLY_AFTER_S = 0.1


class _EarlyStart:
    """The disassembler started :data:`EARLY_DISASSEMBLY_AFTER_S` after :meth:`arm`, from a
    timer thread, so that its start-up overlaps the compiles (:class:`.cubin.EarlyDisassembly`);
    a pass that ends sooner (cached kernels) starts none. Armed after :class:`.prewarm.Prewarm`
    has forked its processes: no fork happens while the timer thread may hold a lock."""

    def __init__(self, capability: int) -> None:
        import threading

        self.capability = capability
        self.started: cubin.EarlyDisassembly | None = None
        self._lock = threading.Lock()
        self._stopped = self._armed = False
        self._timer = threading.Timer(EARLY_DISASSEMBLY_AFTER_S, self._start)
        self._timer.daemon = True

    def arm(self) -> None:
        """Start the timer (once)."""
        if not self._armed:
            self._armed = True
            self._timer.start()

    def _start(self) -> None:
        with self._lock:
            if not self._stopped:
                self.started = cubin.EarlyDisassembly(self.capability)

    def stop(self) -> cubin.EarlyDisassembly | None:
        """Start none from now on; the one started, if any."""
        self._timer.cancel()  # harmless on a timer never started
        with self._lock:
            self._stopped = True
            return self.started

    def cancel(self) -> None:
        """:meth:`stop`, and kill the one started. Idempotent."""
        started = self.stop()
        if started is not None:
            started.cancel()


def run_stage(setup: dict) -> dict:
    """Compile every launch of the entry for ``setup["gpu"]`` (a :class:`.devices.Device`).

    ``setup``: ``candidate_source``, ``entry``, ``harness_source``, ``source_name``,
    ``cand_file``, ``project`` (:func:`..runtime.loading.project_of`), ``seed``, ``gpu``.
    Returns ``{"gpu": metrics}`` or ``{"failure": result dict}`` (see the module doc).
    Must run in a process without ``TRITON_INTERPRET`` that has not imported the candidate.
    """
    import warnings as pywarnings

    start = time.perf_counter()
    dev: Device = setup["gpu"]
    pywarnings.filterwarnings("ignore", module="triton")
    recorder = capture.install(dev)
    fresh = _listen_compiles()
    ctx = {"cand_file": setup["cand_file"], "cand_tree": _tree(setup["candidate_source"])}
    early = _EarlyStart(dev.capability)
    try:
        failure, warnings = _run_entry(setup, dev, recorder, ctx, fresh, early)
        if failure is not None:
            return {"failure": failure}
        try:
            kernels, more = facts.collect(recorder.launches, dev, early.stop())
        except Exception as exc:  # noqa: BLE001 - a tool failed: no facts, no verdict
            kernels, more = [], [f"compile stage: {type(exc).__name__}: {exc}"[:400]]
    finally:
        early.cancel()
    hashes = {launch.hash for launch in recorder.launches}
    gpu = {
        "device": dev.name,
        "arch": dev.arch,
        "compile_s": round(time.perf_counter() - start - setup.get("input_wait_s", 0.0), 3),
        "cached": sum(1 for launch in recorder.launches if launch.hash not in fresh),
        "launches": len(recorder.launches),
        "kernels": kernels,
        "warnings": warnings + more,
    }
    if not hashes and not warnings:
        gpu["warnings"].append("the entry launched no Triton kernel in the compile stage")
    return {"gpu": gpu}


def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _listen_compiles() -> set[str]:
    """The hashes Triton compiles afresh from now on (not served from its cache), filled by
    ``knobs.compilation.listener``."""
    from triton import knobs

    fresh: set[str] = set()

    def listener(*, src, metadata, metadata_group, times, cache_hit, **_):
        if not cache_hit:
            fresh.add(metadata.get("hash") if isinstance(metadata, dict) else metadata.hash)

    knobs.compilation.listener = listener
    return fresh


def main_in_subprocess() -> None:  # pragma: no cover - used by tests and benchmarks
    """``python -c``: read a JSON setup (``gpu`` a device name) on stdin, print the answer."""
    import json

    from .devices import lookup

    setup = json.loads(sys.stdin.read())
    setup["gpu"] = lookup(setup["gpu"])
    try:
        answer = run_stage(setup)
    except Exception:  # noqa: BLE001
        answer = {"error": traceback.format_exc()[-2000:]}
    print("@@STAGE@@ " + json.dumps(answer, default=str))
