"""The NKI evaluation of one candidate, in the child process: NumPy inputs on CPU, correctness
on every seed, timing with ``neuronxcc.nki.benchmark`` on a NeuronCore. Needs the legacy Neuron
SDK namespace (``neuronxcc``). The static gate ran before (:mod:`.child`).
"""

from __future__ import annotations

from .compare import clone, compare, mutated_input
from .failures import Failure, classify
from .loading import Harness, load_entry, load_harness
from .protocol import result_dict
from .roofline import plausibility
from .runtime import limit_memory, versions


def _device_name() -> str:
    """``trn1.2xlarge NeuronCore`` from the EC2 Nitro instance type, else ``NeuronCore``."""
    try:
        with open("/sys/devices/virtual/dmi/id/product_name") as f:
            return f.read().strip() + " NeuronCore"
    except OSError:
        return "NeuronCore"


def _load(req: dict, ctx: dict) -> tuple[Harness, object, object]:
    """The harness, the candidate module and its entry; any failure is classified as loading
    the candidate (Failure, compile_error)."""
    source_name = str(req.get("source_name") or "candidate.py")
    try:
        harness = load_harness(req["harness_source"], source_name)
        cand, entry = load_entry(req["candidate_source"], ctx["cand_file"], req["entry"])
    except BaseException as exc:  # noqa: BLE001
        raise Failure(classify(exc, "load", ctx)) from None
    return harness, cand, entry


def _check_correctness(req: dict, ctx: dict, harness: Harness, entry) -> dict:
    """An ``ok`` result when the entry is correct on every seed, else raises Failure."""
    errors: dict = {}
    seeds = list(req.get("seeds") or [1])
    for seed in seeds:
        inputs = tuple(harness.get_inputs(seed, "cpu"))
        expected = harness.reference(*clone(inputs))
        before = clone(inputs)
        try:
            out = entry(*inputs)
        except BaseException as exc:  # noqa: BLE001
            raise Failure(classify(exc, "run", ctx)) from None
        mutated = mutated_input(inputs, before, arrays_only=True)
        if mutated is not None:
            raise Failure(result_dict("incorrect", f"mutated input #{mutated} (seed {seed})"))
        why = compare(out, expected, harness.bench, errors)
        if why:
            raise Failure(result_dict("incorrect", f"seed {seed}: {why}"))
    return result_dict(
        "ok",
        f"correct on {len(seeds)} seeds",
        max_abs_error=errors.get("max_abs"),
        max_rel_error=errors.get("max_rel"),
    )


def _time(req: dict, ctx: dict, harness: Harness, cand, result: dict) -> tuple:
    """``nki.benchmark`` (5 warm-up, 20 iterations) of the kernel on the timing inputs: sets
    the latency percentiles (ms) in ``result``; returns the inputs. The entry is timed when it
    is a kernel, else the candidate's only NKI kernel (assumes the launcher forwards its
    inputs)."""
    try:
        from neuronxcc import nki

        kernel = getattr(cand, req["entry"])
        kernels = [k for k, v in ctx["kernels"].items() if v == "nki"]
        if req["entry"] not in ctx["kernels"] and len(kernels) == 1:
            kernel = getattr(cand, kernels[0])
        inputs = tuple(harness.get_inputs(int(req.get("timing_seed", 1000)), "cpu"))
        bench_fn = nki.benchmark(warmup=5, iters=20)(getattr(kernel, "func", kernel))
        bench_fn(*inputs)
        lat = bench_fn.benchmark_result.nc_latency
        result.update(
            latency_ms=lat.get_latency_percentile(50) / 1000.0,
            p20_ms=lat.get_latency_percentile(20) / 1000.0,
            p80_ms=lat.get_latency_percentile(80) / 1000.0,
            timing="neuron",
        )
    except BaseException as exc:  # noqa: BLE001
        raise Failure(classify(exc, "run", ctx)) from None
    return inputs


def evaluate(req: dict, ctx: dict) -> dict:
    """Evaluate a gated NKI candidate (``req``: an EvalRequest dict; ``ctx``: see
    :func:`.child.child_main`) and return its result dict."""
    import importlib.util

    if importlib.util.find_spec("neuronxcc") is None:
        return result_dict(
            "runtime_error",
            "Neuron SDK (neuronxcc) not installed on this target",
            versions=versions(),
        )
    env = {"device": _device_name(), "versions": versions()}
    limit_memory(int(req.get("memory_limit_mb") or 8192), True, ctx)
    ctx["interpreter"] = False
    try:
        harness, cand, entry = _load(req, ctx)
        result = dict(_check_correctness(req, ctx, harness, entry), **env)
        if req.get("timing") == "none":
            return result
        inputs = _time(req, ctx, harness, cand, result)
    except Failure as failure:
        return dict(failure.result, **env)
    plausibility(result, harness.bench, inputs, req.get("peaks") or {}, "neuron")
    return result
