"""Evaluator: gate, cache and target in front of every candidate evaluation.

:class:`Evaluator` runs the static gate here first (a rejected candidate costs no target time),
builds the :class:`~accelopt_core.onsite.protocol.EvalRequest` from the settings, consults the
:class:`EvaluationCache` and only then sends the request to the target.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from accelopt_core.hardware import peak_table
from accelopt_core.kernelfile import normalize_source
from accelopt_core.onsite import worker
from accelopt_core.onsite.protocol import HARNESS_VERSION, EvalRequest, EvalResult
from accelopt_core.settings import Settings
from accelopt_core.targets.base import Target

log = logging.getLogger(__name__)

#: Verdicts that depend only on the candidate, harness and target: safe to cache. Timeouts and
#: runtime errors may come from the infrastructure (a busy box, a lost connection): never cached.
CACHEABLE_STATUSES = frozenset({"ok", "compile_error", "incorrect", "rejected"})


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(request: EvalRequest, fingerprint: str) -> str:
    """sha256 (hex) of everything that decides a verdict: the normalized candidate, the hashes
    of the original (harness) and baseline sources, the entry, the target fingerprint,
    HARNESS_VERSION, the seeds, the timing seed and the timing mode."""
    parts = {
        "candidate": _sha(normalize_source(request.candidate_source)),
        "harness": _sha(request.harness_source),
        "baseline": _sha(request.baseline_source or request.harness_source),
        "entry": request.entry,
        "target": fingerprint,
        "harness_version": HARNESS_VERSION,
        "seeds": list(request.seeds),
        "timing_seed": request.timing_seed,
        "timing": request.timing,
    }
    return _sha(json.dumps(parts, sort_keys=True))


class EvaluationCache:
    """Evaluation results on disk (diskcache), keyed by :func:`cache_key`.

    A directory that cannot be created or written disables the cache with one logged warning
    (``disabled_reason`` says why); the caller never sees an exception.

    Args:
        directory: cache directory, normally ``settings.resolved_memory_dir() / "evals"``.
    """

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.disabled_reason: str | None = None
        self._cache: Any = None
        try:
            import diskcache

            self.directory.mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(str(self.directory))
        except Exception as exc:  # noqa: BLE001 - any failure disables, never crashes
            self._disable(exc)

    @classmethod
    def from_settings(cls, settings: Settings) -> EvaluationCache:
        """The cache at ``settings.resolved_memory_dir() / "evals"``."""
        return cls(settings.resolved_memory_dir() / "evals")

    @property
    def enabled(self) -> bool:
        return self._cache is not None

    def _disable(self, exc: BaseException) -> None:
        if self.disabled_reason is None:
            self.disabled_reason = f"{type(exc).__name__}: {exc}"
            log.warning(
                "evaluation cache at %s disabled (%s); evaluations still run, uncached",
                self.directory,
                self.disabled_reason,
            )
        cache, self._cache = self._cache, None
        if cache is not None:
            try:
                cache.close()
            except Exception:  # noqa: BLE001
                pass

    def get(self, key: str) -> EvalResult | None:
        """The cached result (with ``cached=True``), or None."""
        if self._cache is None:
            return None
        try:
            data = self._cache.get(key)
        except Exception as exc:  # noqa: BLE001
            self._disable(exc)
            return None
        if not isinstance(data, dict):
            return None
        try:
            result = EvalResult.from_dict(data)
        except (TypeError, ValueError):
            return None
        result.cached = True
        return result

    def put(self, key: str, result: EvalResult) -> bool:
        """Store a deterministic verdict (:data:`CACHEABLE_STATUSES`). Returns True if stored."""
        if self._cache is None or result.status not in CACHEABLE_STATUSES:
            return False
        data = result.to_dict()
        data["cached"] = False
        try:
            self._cache.set(key, data)
        except Exception as exc:  # noqa: BLE001
            self._disable(exc)
            return False
        return True

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()


class Evaluator:
    """Evaluates candidates on a target: static gate here, then cache, then the target.

    Args:
        target: where candidates run (:class:`~accelopt_core.targets.base.Target`).
        settings: evaluation settings (seeds, timeout, memory limit, warm-up/rep ms).
        cache: an :class:`EvaluationCache`, or None for no caching.

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
    ) -> EvalRequest:
        """The request the settings describe (seeds 1..N, warm-up/rep ms, timeout, memory
        limit, the peak table of :func:`accelopt_core.hardware.peak_table`)."""
        ev = self.settings.evaluation
        return EvalRequest(
            candidate_source=candidate_source,
            harness_source=original_source,
            entry=entry,
            baseline_source=baseline_source,
            seeds=list(range(1, ev.seeds + 1)),
            warmup_ms=ev.warmup_ms,
            rep_ms=ev.rep_ms,
            timeout_s=ev.timeout_s,
            memory_limit_mb=ev.memory_limit_mb,
            peaks=peak_table(),
            timing=self.timing,  # type: ignore[arg-type]
            source_name=source_name,
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
    ) -> EvalResult:
        """Evaluate ``candidate_source`` against the harness of ``original_source``.

        Args:
            original_source: the original file (``get_inputs``, ``reference``, ``BENCH``).
            candidate_source: the candidate module.
            entry: the launcher's name.
            use_cache: consult and fill the evaluation cache.
            source_name: file name shown in messages.
            baseline_source: the gate's baseline (low-precision dtypes and launcher ops it
                allows); default ``original_source``.

        Returns the :class:`EvalResult`; never raises for a bad candidate. Cancelling the
        awaiting task cancels the target's evaluation.
        """
        start = time.monotonic()
        baseline = baseline_source or original_source
        pre = worker.precheck(candidate_source, entry, baseline, f"<candidate:{source_name}>")
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
        )
        await self._ensure_probed()
        key = cache_key(request, self.target.fingerprint) if self.cache is not None else ""
        if use_cache and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return hit
        self.evaluations_run += 1
        result = await self.target.evaluate(request)
        if self.cache is not None and result.status in CACHEABLE_STATUSES:
            self.cache.put(key, result)
        return result

    async def retime(
        self,
        original_source: str,
        candidate_source: str,
        entry: str,
        *,
        source_name: str = "kernel.py",
        baseline_source: str | None = None,
    ) -> EvalResult:
        """Evaluate again on the target, bypassing the cache (re-timing finalists); the fresh
        result replaces the cached one."""
        return await self.evaluate(
            original_source,
            candidate_source,
            entry,
            use_cache=False,
            source_name=source_name,
            baseline_source=baseline_source,
        )

    @property
    def stats(self) -> dict[str, int]:
        """``{"evaluations": ..., "cache_hits": ..., "gate_rejections": ...}``."""
        return {
            "evaluations": self.evaluations_run,
            "cache_hits": self.cache_hits,
            "gate_rejections": self.gate_rejections,
        }
