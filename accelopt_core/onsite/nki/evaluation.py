"""The NKI evaluation of one candidate, in the child process (the static gate ran before, in
:mod:`.process.child`): NumPy inputs, correctness on every seed and on the derived values
(:mod:`.nki.derived`, issue 29), then timing.

Two ways to run, chosen by :func:`.runtime.stacks.run_mode`:

- ``simulated`` (the SDK without a NeuronDevice): the kernel runs in the NKI CPU simulator
  (``NKI_SIMULATOR=1`` for the ``nki`` package, ``neuronxcc.nki.simulate_kernel`` for the legacy
  namespace); the latency is CPU wall time, labelled ``simulated``: it says nothing about
  Trainium speed (as ``interpreter`` for Triton).
- ``device`` (Trainium): the real kernel on one NeuronCore (``NEURON_RT_VISIBLE_CORES``, 0 unless
  the request pins another), timed through its NEFF and ``neuron-profile`` (:mod:`.nki.profile`)
  with the profile metrics kept in ``result["metrics"]``; the legacy namespace is timed with
  ``neuronxcc.nki.benchmark``.
"""

from __future__ import annotations

import os
import sys
import tempfile

from ..gate.launcher import launcher_closure, launches
from ..judge import derived_checks
from ..judge.compare import clone, compare, correct_on_seeds, incorrect, mutated_input
from ..judge.roofline import plausibility
from ..judge.timing import interpreter_times
from ..protocol import result_dict
from ..runtime import stacks as nki_sdk
from ..runtime.device import limit_memory, versions
from ..runtime.failures import Failure, classify, short
from ..runtime.loading import Harness, load_candidate, load_harness, project_of
from . import derived as nki_derived
from . import profile as nki_profile

_SIMULATED_NOTE = "; NKI simulator on CPU: latency says nothing about Trainium speed"


def _prepare(mode: str, ctx: dict) -> None:
    """Environment set before the SDK and the candidate are imported: the simulator switch, or
    one NeuronCore and the runtime's NEFF dump directory (``ctx["neff_dir"]``)."""
    if mode == "simulated":
        os.environ["NKI_SIMULATOR"] = "1"
        return
    os.environ.setdefault("NEURON_RT_VISIBLE_CORES", "0")
    ctx["neff_dir"] = tempfile.mkdtemp(prefix="accelopt-neff-")
    nki_profile.inspect_env(ctx["neff_dir"])


def _load(req: dict, ctx: dict) -> tuple[Harness, object, object]:
    """The harness (runtime_error when it fails), the candidate module and its entry
    (compile_error, :func:`.runtime.failures.classify`)."""
    source_name = str(req.get("source_name") or "candidate.py")
    project = project_of(req)  # a kernel in a package: its closure, served from memory
    try:
        harness = load_harness(req["harness_source"], source_name, project)
    except BaseException as exc:  # noqa: BLE001
        raise Failure(
            result_dict("runtime_error", f"the original file's harness failed: {short(exc)}")
        ) from None
    try:
        name, entry = load_candidate(
            req["candidate_source"], ctx["cand_file"], req["entry"], project
        )
        cand = sys.modules[name]  # the harness keeps its own (original) modules
    except BaseException as exc:  # noqa: BLE001
        raise Failure(classify(exc, "load", ctx)) from None
    return harness, cand, entry


def launched_kernel(entry: str, ctx: dict) -> str | None:
    """The NKI kernel the entry is or launches (the first one, in source order), else None."""
    nki = {k: v for k, v in ctx["kernels"].items() if v == "nki"}
    if entry in nki:
        return entry
    closure = launcher_closure(ctx["cand_tree"], entry, ctx["kernels"])
    for name in nki:
        if any(launches(fn, {name: "nki"}) for fn in closure):
            return name
    return next(iter(nki), None)


def _caller(mode: str, api: str, req: dict, ctx: dict, cand, entry):
    """How one call runs: the entry itself, except the legacy namespace in the simulator,
    where the kernel goes through ``neuronxcc.nki.simulate_kernel`` (the launcher is assumed to
    forward its inputs)."""
    if mode == "device" or api == "nki":
        return entry
    from neuronxcc import nki

    kernel = getattr(cand, launched_kernel(req["entry"], ctx) or req["entry"])
    return lambda *inputs: nki.simulate_kernel(kernel, *inputs)


def _kernel_line(req: dict, ctx: dict) -> int | None:
    """The ``def`` line of the launched kernel: where an output-level failure points."""
    name = launched_kernel(req["entry"], ctx)
    for node in ctx["cand_tree"].body:
        if getattr(node, "name", None) == name:
            return node.lineno
    return None


def _incorrect(req: dict, ctx: dict, why: str, errors: dict) -> Failure:
    if "NaN" in why:
        why += " (new NKI buffers are NaN-filled: the kernel reads or returns unwritten memory)"
    return Failure(incorrect(why, errors, line=_kernel_line(req, ctx)))


def _check_seed(req: dict, ctx: dict, harness: Harness, call, seed: int, errors: dict) -> None:
    """One seed: the call against the reference (on copies). Raises Failure."""
    try:
        inputs = tuple(harness.get_inputs(seed, "cpu"))
        expected = harness.reference(*clone(inputs))
    except BaseException as exc:  # noqa: BLE001
        raise Failure(
            result_dict("runtime_error", f"the harness failed on seed {seed}: {short(exc)}")
        ) from None
    before = clone(inputs)
    try:
        out = call(*inputs)
    except BaseException as exc:  # noqa: BLE001
        raise Failure(classify(exc, "run", ctx)) from None
    mutated = mutated_input(inputs, before, arrays_only=True)
    if mutated is not None:
        raise _incorrect(req, ctx, f"mutated input #{mutated} (seed {seed})", errors)
    why = compare(out, expected, harness.bench, errors)
    if why:
        raise _incorrect(req, ctx, f"seed {seed}: {why}", errors)


def _check_correctness(req: dict, ctx: dict, harness: Harness, call) -> dict:
    """An ``ok`` (untimed) result when the call is correct on every seed (the seeds of a
    candidate's derived inputs are checked as those, :mod:`.nki.derived`), else raises."""
    return correct_on_seeds(
        req,
        lambda seed, errors: _check_seed(req, ctx, harness, call, seed, errors),
        derived_checks.derived_seeds(req.get("derived_inputs"), None),
    )


def _time_legacy(req: dict, ctx: dict, cand, inputs: tuple) -> dict:
    """``neuronxcc.nki.benchmark`` (5 warm-up, 20 iterations) of the launched kernel: ms."""
    from neuronxcc import nki

    kernel = getattr(cand, launched_kernel(req["entry"], ctx) or req["entry"])
    bench_fn = nki.benchmark(warmup=5, iters=20)(getattr(kernel, "func", kernel))
    bench_fn(*inputs)
    lat = bench_fn.benchmark_result.nc_latency
    return {
        "latency_ms": lat.get_latency_percentile(50) / 1000.0,
        "p20_ms": lat.get_latency_percentile(20) / 1000.0,
        "p80_ms": lat.get_latency_percentile(80) / 1000.0,
    }


def _time_device(req: dict, ctx: dict, call, inputs: tuple) -> dict:
    """One call on the timing inputs (the runtime dumps its NEFF), then :func:`.nki.profile.
    time_neff`: latency fields, ``metrics`` and a noise warning when no round was quiet."""
    call(*inputs)
    kernel = launched_kernel(req["entry"], ctx) or req["entry"]
    timed = nki_profile.time_neff(nki_profile.newest_neff(ctx["neff_dir"], kernel))
    out = {k: timed[k] for k in ("latency_ms", "p20_ms", "p80_ms")}
    out["metrics"] = dict(
        nki_profile.metrics(timed["summary"]),
        spread_pct=timed["spread"] * 100,
        rounds=timed["rounds"],
        neuron_core=os.environ.get("NEURON_RT_VISIBLE_CORES"),
        lnc=os.environ.get("NEURON_LOGICAL_NC_CONFIG"),
    )
    if timed["spread"] > nki_profile.NOISE:
        out["warnings"] = [f"noisy timing: spread {timed['spread']:.1%} after {timed['rounds']}"]
    return out


def _time(mode: str, api: str, req: dict, ctx: dict, timed: tuple, result: dict) -> tuple:
    """Time the call on the timing seed's inputs; updates ``result``; returns the inputs."""
    harness, cand, call = timed
    inputs = tuple(harness.get_inputs(int(req.get("timing_seed", 1000)), "cpu"))
    try:
        if mode == "simulated":
            med, p20, p80 = interpreter_times(lambda: call(*inputs), float(req.get("rep_ms", 100)))
            fields = {"latency_ms": med, "p20_ms": p20, "p80_ms": p80}
            result["message"] += _SIMULATED_NOTE
        elif api == "nki":
            fields = _time_device(req, ctx, call, inputs)
        else:
            fields = _time_legacy(req, ctx, cand, inputs)
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, nki_profile.ProfileError):
            raise Failure(result_dict("runtime_error", f"profiling failed: {exc}")) from None
        raise Failure(classify(exc, "run", ctx)) from None
    result.update(fields, timing="simulated" if mode == "simulated" else "neuron")
    return inputs


def evaluate(req: dict, ctx: dict) -> dict:
    """Evaluate a gated NKI candidate (``req``: an EvalRequest dict; ``ctx``: see
    :func:`.process.child.child_main`) and return its result dict. Never raises for a bad candidate."""
    sdk = nki_sdk.detect_api()
    if sdk["api"] is None:
        return result_dict(
            "runtime_error",
            f"no NKI SDK for {sys.executable} on this target (neither the nki package nor "
            "neuronxcc.nki; both install from the Neuron pip repository)",
            versions=versions(),
        )
    mode = nki_sdk.run_mode(req.get("timing"))
    _prepare(mode, ctx)
    env = {"device": nki_sdk.device_name(mode), "versions": versions()}
    limit_memory(int(req.get("memory_limit_mb") or 8192), mode == "device", ctx)
    ctx["interpreter"] = False
    try:
        harness, cand, entry = _load(req, ctx)
        call = _caller(mode, sdk["api"], req, ctx, cand, entry)
        result = dict(_check_correctness(req, ctx, harness, call), **env)
        fail = lambda why, errors: _incorrect(req, ctx, why, errors)  # noqa: E731
        nki_derived.check(req, ctx, harness, call, result, fail)  # issue 29: derived values
        if req.get("timing") == "none":
            return result
        inputs = _time(mode, sdk["api"], req, ctx, (harness, cand, call), result)
    except Failure as failure:
        return dict(failure.result, **env)
    plausibility(result, harness.bench, inputs, req.get("peaks") or {}, result["timing"])
    return result
