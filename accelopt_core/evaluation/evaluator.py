"""Evaluator: gate, cache and target in front of every candidate evaluation.

:class:`Evaluator` runs the static gate here first (a rejected candidate costs no target time),
builds the :class:`~accelopt_core.onsite.protocol.EvalRequest` from the settings, consults the
:class:`~accelopt_core.evaluation.cache.EvaluationCache` and only then sends the request to the
target. Re-timing a finalist (:attr:`Evaluator.retime`) is the same path with the cache bypassed;
a round of the A/B re-timing (:attr:`Evaluator.time_again`) checks correctness on one seed only.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import time

from accelopt_core.evaluation.cache import EvaluationCache, cache_key
from accelopt_core.kernelfile.sizes import SizePlan
from accelopt_core.kernelfile.workload import BenchContext
from accelopt_core.onsite.gate.precheck import precheck
from accelopt_core.onsite.judge.roofline import peak_table
from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.settings import Settings
from accelopt_core.targets.base import Target

__all__ = ["Evaluator"]

#: Gate verdicts an evaluator keeps (a search meets a few hundred distinct candidates).
GATED_KEPT = 1024


class Evaluator:
    """Evaluates candidates on a target: static gate here, then cache, then the target.

    Args:
        target: where candidates run (:class:`~accelopt_core.targets.base.Target`).
        settings: evaluation settings (seeds, timeout, memory limit, warm-up/rep ms).
        cache: an :class:`EvaluationCache`, or None for no caching.
        timing: the requests' timing mode (``"auto"``, ``"interpreter"`` or ``"none"``; see
            :class:`~accelopt_core.onsite.protocol.EvalRequest`).

    Attributes:
        evaluations_run: requests sent to the target.
        cache_hits: results served from the cache.
        gate_rejections: candidates failed here by the syntax check or static gate.
    """

    def __init__(
        self,
        target: Target,
        settings: Settings,
        cache: EvaluationCache | None = None,
        *,
        timing: str = "auto",
    ) -> None:
        self.target = target
        self.settings = settings
        self.cache = cache
        self.timing = timing
        self.evaluations_run = 0
        self.cache_hits = 0
        self.gate_rejections = 0
        self._probed = False
        self._probe_lock = asyncio.Lock()
        self._peaks = peak_table()  # constant (datasheet figures): built once, read only
        self._gated: dict[tuple, dict | None] = {}

    async def _ensure_probed(self) -> None:
        """Remote targets know their real fingerprint (device names, versions) and capacity
        only after a first probe; do it once before the first cache key is computed. A failing
        probe is not fatal here: the evaluation itself then reports the classified failure."""
        if self._probed:
            return
        async with self._probe_lock:
            if self._probed:
                return
            probe = getattr(self.target, "probe", None)
            if probe is not None:
                try:
                    await probe()
                except Exception:  # unreachable host etc.: evaluate() reports it per candidate
                    return
            self._probed = True

    def build_request(
        self,
        original_source: str,
        candidate_source: str,
        entry: str,
        *,
        source_name: str = "kernel.py",
        baseline_source: str | None = None,
        context: BenchContext | None = None,
        entry_expr: str | None = None,
        sizes: SizePlan | None = None,
        derived_inputs: list[dict] | None = None,
        timing_round: bool = False,
        derived_probe: list[dict] | None = None,
    ) -> EvalRequest:
        """The request the settings describe (seeds 1..N, warm-up/rep ms, timeout, memory
        limit, the peak table of :func:`accelopt_core.onsite.judge.roofline.peak_table`), with the
        import closure and harness of ``context`` (issue 13) when given, and the harness's
        ``sizes`` under the setting ``evaluation.sizes`` (issue 24).

        ``timing_round``: a round of a re-timing (:meth:`time_again`): seed 1 only and no
        derived inputs, whatever ``derived_inputs`` says. ``derived_probe``: the property-based
        search's examples (issue 52): seed 1 only, no timing, no compile stage, no derived
        inputs besides them."""
        ev = self.settings.evaluation
        seeds = list(range(1, ev.seeds + 1))
        timing, gpu = self.timing, self.settings.gpu_name
        if timing_round or derived_probe is not None:
            seeds, derived_inputs = seeds[:1], []
        if derived_probe is not None:
            timing, gpu = "none", None
        project = context.request_fields() if context is not None else {}
        harness = original_source
        if context is not None and context.harness_source is not None:
            harness = context.harness_source
            baseline_source = baseline_source or original_source
        return EvalRequest(
            candidate_source=candidate_source,
            harness_source=harness,
            entry=entry,
            entry_expr=entry_expr,
            baseline_source=baseline_source,
            **project,
            seeds=seeds,
            warmup_ms=ev.warmup_ms,
            rep_ms=ev.rep_ms,
            timeout_s=ev.timeout_s,
            memory_limit_mb=ev.memory_limit_mb,
            peaks=self._peaks,
            timing=timing,  # type: ignore[arg-type]
            source_name=source_name,
            sizes=sizes.request_field(ev.sizes) if sizes is not None else {},
            derived_inputs=derived_inputs,
            gpu=gpu,  # issue 21: None when the setting is "none"
            allow_modules=list(self.settings.gate.allow_modules),  # issue 53
            derived_probe=derived_probe,
            reference_store_mb=ev.reference_store_mb,  # issue 50, item 4
        )

    async def evaluate(
        self,
        original_source: str,
        candidate_source: str,
        entry: str,
        *,
        use_cache: bool = True,
        source_name: str = "kernel.py",
        baseline_source: str | None = None,
        context: BenchContext | None = None,
        entry_expr: str | None = None,
        tree: ast.Module | None = None,
        sizes: SizePlan | None = None,
        derived_inputs: list[dict] | None = None,
        timing_round: bool = False,
        derived_probe: list[dict] | None = None,
    ) -> EvalResult:
        """Evaluate ``candidate_source`` against the harness of ``original_source``.

        Args:
            original_source: the original file (``get_inputs``, ``reference``, ``BENCH``).
            candidate_source: the candidate module.
            entry: the launcher's name.
            use_cache: consult the evaluation cache (a fresh deterministic verdict is stored
                in any case).
            source_name: file name shown in messages.
            baseline_source: the gate's baseline (low-precision dtypes and launcher ops it
                allows); default ``original_source``.
            context: where the kernel module lives and what measures it
                (:attr:`~accelopt_core.kernelfile.KernelFile.context`): its import closure
                and a harness in its own file; None for a standalone file.
            entry_expr: ``BENCH["entry"]`` when it is an expression (``RMSNorm.apply``).
            sizes: the harness's module-level sizes (:attr:`HarnessInfo.sizes`), scaled for
                the CPU interpreter on the target.
            derived_inputs: the derived inputs (shapes, values, layouts) to check the
                candidate on (issues 22 and 29: the
                baseline's ``metrics["derived_inputs"]["used"]``); None derives them (the
                baseline's own evaluation, a profile).
            tree: ``candidate_source`` already parsed (read, not mutated), so the gate does not
                parse it again.
            timing_round: a round of a re-timing (:meth:`time_again`): correctness on seed 1
                of each shape only and no derived inputs.
            derived_probe: issue 52's examples to probe (``EvalRequest.derived_probe``).

        The gate's verdict on a source is kept: re-timing a candidate does not gate it again.

        Returns the :class:`EvalResult`; never raises for a bad candidate. Cancelling the
        awaiting task cancels the target's evaluation.
        """
        start = time.monotonic()
        baseline = baseline_source or original_source
        module = context.kernel_module if context is not None else None
        pre = self._gate(candidate_source, entry, baseline, source_name, module, tree)
        if pre is not None:
            self.gate_rejections += 1
            result = EvalResult.from_dict(pre)
            result.eval_s = time.monotonic() - start
            return result
        request = self.build_request(
            original_source,
            candidate_source,
            entry,
            source_name=source_name,
            baseline_source=baseline_source,
            context=context,
            entry_expr=entry_expr,
            sizes=sizes,
            derived_inputs=derived_inputs,
            timing_round=timing_round,
            derived_probe=derived_probe,
        )
        return await self._run(request, use_cache=use_cache)

    #: ``retime(original_source, candidate_source, entry, *, source_name, baseline_source)``:
    #: :meth:`evaluate` again on the target, bypassing the cache (re-timing finalists: every
    #: evaluation on a target runs in a fresh process); the fresh result replaces the cached one.
    retime = functools.partialmethod(evaluate, use_cache=False)

    #: ``time_again(original_source, candidate_source, entry, **keywords)``: one round of the
    #: A/B re-timing of a candidate whose first evaluation passed
    #: (:mod:`accelopt_core.search.retime`). The cache is bypassed and the candidate is timed as
    #: in :meth:`evaluate`; what is checked again is what a timing needs: correctness on seed 1
    #: of each ``BENCH["shapes"]`` shape and the outputs of the timed repetitions
    #: (:mod:`accelopt_core.onsite.judge.timing`). The other seeds and the derived inputs were
    #: checked by the first evaluation of the same source; checking them in every round too
    #: made a round cost a whole evaluation (softmax's example: 3 checked calls instead of 15,
    #: besides the timed ones; an offline search, ``-T 2 -B 2 -N 2 -K 1`` under the interpreter,
    #: from 34 to 23 s of CPU, median of 3: benchmarks/search_cpu.py). A round that fails still
    #: fails the candidate.
    time_again = functools.partialmethod(evaluate, use_cache=False, timing_round=True)

    def _gate(
        self,
        source: str,
        entry: str,
        baseline: str,
        source_name: str,
        module: str | None,
        tree: ast.Module | None,
    ) -> dict | None:
        """:func:`precheck`'s verdict on ``source``, computed once per (source, entry,
        baseline, module): the gate is deterministic, and a finalist is evaluated again in
        every A/B re-timing round."""
        allow = tuple(self.settings.gate.allow_modules)
        key = (source, entry, baseline, module, allow)
        if key in self._gated:
            return self._gated[key]
        name = f"<candidate:{source_name}>"
        verdict = precheck(source, entry, baseline, name, module, tree, allow_modules=allow)
        if len(self._gated) >= GATED_KEPT:
            self._gated.clear()
        self._gated[key] = verdict
        return verdict

    async def _run(self, request: EvalRequest, *, use_cache: bool) -> EvalResult:
        """The cached result of ``request`` (when ``use_cache``), else the target's, stored in
        the cache when it is a deterministic verdict."""
        await self._ensure_probed()
        key = cache_key(request, self.target.fingerprint) if self.cache is not None else ""
        if use_cache and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return hit
        self.evaluations_run += 1
        result = await self.target.evaluate(request)
        if self.cache is not None:
            self.cache.put(key, result)  # stores only CACHEABLE_STATUSES
        return result

    @property
    def stats(self) -> dict[str, int]:
        """``{"evaluations": ..., "cache_hits": ..., "gate_rejections": ...}``."""
        return {
            "evaluations": self.evaluations_run,
            "cache_hits": self.cache_hits,
            "gate_rejections": self.gate_rejections,
        }
