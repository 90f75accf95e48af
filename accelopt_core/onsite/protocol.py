"""Shared records: the evaluation request sent to a target and the result it returns.

Standard library only: the host imports it as ``accelopt_core.onsite.protocol`` and the target
as part of the shipped onsite package. The worker speaks the schema as plain JSON dicts
(:func:`result_dict`); :meth:`EvalRequest.to_json` and :meth:`EvalResult.from_dict` are the two
ends of that wire format.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

EvalStatus = Literal["ok", "compile_error", "incorrect", "runtime_error", "timeout", "rejected"]
EVAL_STATUSES: tuple[str, ...] = (
    "ok",
    "compile_error",
    "incorrect",
    "runtime_error",
    "timeout",
    "rejected",
)
TimingMode = Literal["cuda", "interpreter", "simulated", "neuron", "none"]

#: Version of the harness/worker protocol; recorded with every result and part of cache keys.
HARNESS_VERSION = "1"

#: Version of the judge: the rules that decide a verdict (static gate, isolation of the
#: candidate, timing checks). Recorded with every result and experience, part of cache keys;
#: raise it whenever a rule gets stricter, so results of a weaker judge can be re-checked
#: (``accelopt memory recheck``). Issue 10 made it "2"; issue 13 "3" (every
#: ``@triton.autotune`` config checked, every shape of ``BENCH["shapes"]`` checked); issues 21
#: and 22 "4" (every launch compiled for the target GPU: a kernel that does not compile or
#: cannot launch there is incorrect; every candidate checked on the derived shapes the
#: baseline is correct on); issue 20 "5" (interpreter latencies are the candidate process's
#: CPU time, checked against the kernel's account of it, not wall time: cached wall-time
#: latencies must not be ranked beside them); issue 34 "6" (the gate rejects reads of the
#: environment and logging handlers, more file and network doors; candidates run sandboxed);
#: issue 29 "7" (every candidate checked on the derived values and layouts the baseline is
#: correct on, beside the derived shapes); issue 33 "8" (the interpreter no longer does the
#: overflow checks Triton throws away nor re-patches ``triton.language`` per helper call,
#: ``contestant/interp_overhead.py``: an interpreter latency is 1.2-5x below a cached one of
#: the same kernel, and must not be ranked beside it); "9" (the candidate and reference
#: processes open no Unix sockets: a cached ``ok`` of a candidate that reached one must not
#: stand); "10" (the interpreter's ``_get_np_dtype`` answers from memory: interpreter
#: latencies about a tenth below a cached one of the same kernel, not to be ranked beside it);
#: issue 53 "11" (imports by allowlist, and the parts of torch, triton and numpy that load
#: native code, start processes or touch files and caches denied: a cached ``ok`` of a
#: candidate that used them must not stand); issue 52 "12" (layouts by principle: every
#: permutation of the dimensions, a slice along any dimension, a storage offset, stride 0;
#: values by principle: both signs of every scale and shift, ties, zeros, subnormals, near-limit
#: magnitudes, NaN/inf, integer bounds and empty segments; a cost budget choosing which a
#: candidate is checked on; a 0-d float output compared, no longer a crash: a cached ``ok`` of
#: a candidate wrong on one must not stand).
JUDGE_VERSION = "12"

#: Prefix of the worker's one result line, the last line of its stdout.
SENTINEL = "@@ACCELOPT_RESULT@@ "


def parse_result_line(text: str | bytes) -> dict | None:
    """The result dict from a worker's stdout: the JSON after the LAST line that starts with
    the sentinel ``@@ACCELOPT_RESULT@@ ``. None when there is no parseable result line."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for line in reversed(text.splitlines()):
        if line.startswith(SENTINEL):
            try:
                data = json.loads(line[len(SENTINEL) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def result_dict(status: str, message: str | None = None, **fields: Any) -> dict[str, Any]:
    """A result in the worker's wire form: ``{"status", "message", "harness_version"}`` plus
    ``fields`` (any other :class:`EvalResult` fields, e.g. ``line``, ``device``)."""
    out = {"status": status, "message": message, "harness_version": HARNESS_VERSION}
    out.update(fields)
    return out


def signal_name(num: int) -> str:
    """``"SIGKILL"`` for 9; ``"signal 99"`` for a number with no name."""
    import signal

    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def tail(data: bytes, limit: int = 800) -> str:
    """The last ``limit`` characters of ``data`` (UTF-8, stripped), ``"..."``-prefixed if cut."""
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else "..." + text[-limit:]


@dataclass
class EvalRequest:
    """One candidate to evaluate on a target.

    Attributes:
        candidate_source: the full candidate module (kernels + launcher; its own harness, if
            any, is ignored).
        harness_source: the ORIGINAL file's full source; ``get_inputs``, ``reference`` and
            ``BENCH`` are always taken from it, never from the candidate.
        entry: name of the launcher function that is timed (``BENCH["entry"].__name__``).
        baseline_source: the baseline kernel module, used by the static gate to allow only
            the low-precision dtypes the baseline already had. Defaults to ``harness_source``.
        seeds: correctness seeds (inputs for timing use ``timing_seed``, which is not among them).
        timing_seed: seed of the timing inputs.
        warmup_ms / rep_ms: ``triton.testing.do_bench`` warm-up and repetition times (ms).
        timeout_s: hard wall-clock limit of the whole evaluation (s).
        memory_limit_mb: limit of the candidate process's memory (MiB).
        peaks: roofline peak table (see :func:`accelopt_core.onsite.judge.roofline.peak_table`) so
            the worker can report % of peak.
        device: device index / core id to pin to, or None for the default.
        timing: "auto" (CUDA when available, else the Triton interpreter), "interpreter" or
            "none" (correctness only).
        source_name: file name shown in messages (``softmax.py``).
        files: the local import closure (issue 13): import-root-relative POSIX path ->
            source text of every module the kernel module and the harness import from the user's
            project (never site-packages), e.g. ``{"mypkg/ops/rms_norm.py": ...,
            "mypkg/utils.py": ...}``. Empty: a standalone file, loaded as today
            (``accelopt_candidate``). The target serves them from memory
            (:mod:`.runtime.sources`): nothing is written on it.
        kernel_path: the key of ``files`` the candidate replaces (the kernel module, loaded
            under its real module name, e.g. ``mypkg.ops.rms_norm``).
        harness_path: the key of ``files`` holding a harness in its own file, or None when
            the harness is in the kernel module (``harness_source`` is then that module).
        entry_expr: the expression of ``BENCH["entry"]`` in the original file when it is not
            a plain name (``RMSNorm.apply``, ``functools.partial(rms_norm, eps=1e-6)``);
            evaluated in the candidate module. With ``harness_path`` the harness's own
            ``BENCH["entry"]`` is used.
        derived_inputs: issues 22 and 29. None: derive shapes, values and layouts from the
            harness's inputs and report in ``metrics["derived_inputs"]`` which are usable (the
            baseline's evaluation: a derived input is used only where the reference runs, and
            stays finite, and the evaluated code is correct on it). A list (the baseline's ``metrics["derived_inputs"]["used"]``, copied by the
            host): check the candidate on exactly these, never timed
            (:mod:`.judge.derived_checks`).
        gpu: issue 21. The GPU the Triton kernels are for (``H100 SXM5``, ``H100 PCIe``,
            ``H200``, ``A100``, ``B200``: :mod:`.triton.devices`); every launch is compiled for
            its architecture (:mod:`.triton.stage`), on a CUDA target for the GPU found there.
            None: no compile stage.
        sizes: the harness's module-level sizes (issue 24;
            :meth:`accelopt_core.kernelfile.sizes.SizePlan.request_field`): ``{"module": key of
            files holding them or None (the harness module), "names": {name: published int},
            "fixed": {name: why not rebindable}, "mode": "auto" | "published", "pin": {name:
            int}}``; the target pins ``pin`` and, under the CPU interpreter in ``auto`` mode,
            scales ``names`` down (:mod:`.runtime.sizes`). Empty: nothing rebound.
        allow_modules: issue 53. Modules a candidate may import besides the original's, the
            kernel stack and the side-effect-free ones (the setting ``gate.allowModules``;
            :mod:`.gate.stack`): the target's gate allows them as the host's does.
        derived_probe: issue 52. A list of derived-input descriptors (the property-based
            search's examples, :mod:`accelopt_core.evaluation.counterexample`): check the
            evaluated code on each and report one verdict per descriptor in
            ``metrics["derived_probe"]`` (:func:`.judge.derived_probe.probe`), never failing
            the evaluation for them. Probe requests are correctness only (seed 1, no timing,
            no compile stage). None: no probe.
        reference_store_mb: issue 50, item 4. The memory (MiB) a warm worker may keep the
            reference process's inputs and outputs in between evaluations
            (:mod:`.runtime.casestore`); None: a quarter of the memory available, 0: none kept.
    """

    candidate_source: str
    harness_source: str
    entry: str
    baseline_source: str | None = None
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    timing_seed: int = 1000
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    timeout_s: float = 120.0
    memory_limit_mb: int = 8192
    peaks: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    timing: Literal["auto", "interpreter", "none"] = "auto"
    source_name: str = "candidate.py"
    files: dict[str, str] = field(default_factory=dict)
    kernel_path: str | None = None
    harness_path: str | None = None
    entry_expr: str | None = None
    derived_inputs: list[dict[str, Any]] | None = None
    gpu: str | None = "H100 SXM5"
    sizes: dict[str, Any] = field(default_factory=dict)
    allow_modules: list[str] = field(default_factory=list)
    derived_probe: list[dict[str, Any]] | None = None
    reference_store_mb: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form, the worker's stdin."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


@dataclass
class EvalResult:
    """What one evaluation of a candidate measured.

    Attributes:
        status: ``ok`` (compiled, correct on every seed, timed), ``compile_error``,
            ``incorrect``, ``runtime_error`` (crash, signal, memory limit, ...), ``timeout``
            or ``rejected`` (static gate, implausible timing over 100% of peak, ...).
        latency_ms / p20_ms / p80_ms: median and 20th/80th percentile latency in ms.
        timing: ``cuda`` (do_bench on a GPU, L2 flushed), ``interpreter`` (TRITON_INTERPRET=1
            on CPU: says nothing about GPU speed), ``simulated`` (the NKI CPU simulator: says
            nothing about Trainium speed), ``neuron`` (a NeuronCore) or ``none``.
        max_abs_error / max_rel_error: worst error against the reference over all seeds.
        gbps / tflops: achieved GB/s (1e9 bytes/s) and TFLOP/s from the harness's bytes/flops.
        pct_of_peak: roofline time / measured latency x 100 (only for GPU/Neuron timing).
        bound: which roof applies, ``memory`` (HBM) or ``compute``.
        device: device name as reported by the runtime (``NVIDIA H100 80GB HBM3``, ``cpu``).
        versions: python/torch/triton/neuronxcc versions.
        message: short human-readable reason for a failure (or a note for ``ok``).
        line: 1-based line in the candidate source where a failure happened, if known.
        warnings: non-fatal notes (e.g. the candidate printed to stdout).
        cached: True when this result came from the evaluation cache.
        eval_s: wall time of the evaluation in s (target overhead included).
        rule: for ``rejected``: the trust rule that caught the candidate, a short phrase
            (``timing inconsistent``, ``no kernel launch``, ``output not a plain tensor``,
            ``implausible speedup``, ``gate: eval``, ...); experiences learned from a caught
            candidate are stored as ``reward-hack: <rule>`` negatives. For ``incorrect``:
            ``wrong on derived input <name>`` when the candidate is wrong on a derived shape,
            value range or layout (issue 29), ``wrong on an input found by search`` when the
            counterexample search found one (issue 52), each also stored as such a negative.
            None otherwise.
        judge_version: :data:`JUDGE_VERSION` of the judge that decided this result.
        metrics: profile metrics of a Neuron timing (``neuron-profile`` summary: HBM/SBUF/PSUM
            read/write bytes, spill bytes, hardware FLOPs, engine active-time %, arithmetic
            intensity in FLOP/B; see :mod:`accelopt_core.onsite.nki.profile`), else empty.
    """

    status: EvalStatus
    latency_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    timing: TimingMode = "none"
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    gbps: float | None = None
    tflops: float | None = None
    pct_of_peak: float | None = None
    bound: Literal["memory", "compute"] | None = None
    device: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    harness_version: str = HARNESS_VERSION
    message: str | None = None
    line: int | None = None
    warnings: list[str] = field(default_factory=list)
    cached: bool = False
    eval_s: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    rule: str | None = None
    judge_version: str = JUDGE_VERSION

    @property
    def ok(self) -> bool:
        """True when the candidate compiled, was correct on every seed and was timed."""
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        """Build from the worker's JSON, ignoring unknown keys. Raises ValueError when
        ``status`` is missing or not one of :data:`EVAL_STATUSES`."""
        status = data.get("status")
        if status not in EVAL_STATUSES:
            raise ValueError(f"invalid evaluation status {status!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def failure(
        cls, status: EvalStatus, message: str, line: int | None = None, **extra: Any
    ) -> EvalResult:
        """A failed result with a message (and the candidate line, if known)."""
        return cls(status=status, message=message, line=line, **extra)

    def summary(self) -> str:
        """One line for code lenses and terminals: ``0.41 ms · 62% of HBM peak · correct``."""
        if not self.ok:
            where = f" (line {self.line})" if self.line else ""
            return f"{self.status.replace('_', ' ')}{where}: {self.message or ''}".strip()
        parts = [f"{self.latency_ms:.3g} ms" if self.latency_ms is not None else "untimed"]
        if self.pct_of_peak is not None:
            roof = "HBM" if self.bound == "memory" else "compute"
            parts.append(f"{self.pct_of_peak:.0f}% of {roof} peak")
        parts.append("correct")
        if self.timing in ("interpreter", "simulated"):
            parts.append(self.timing)
        return " · ".join(parts)
