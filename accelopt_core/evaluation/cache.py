"""The evaluation cache: verdicts on disk (diskcache), keyed by everything that decides them.

:func:`cache_key` hashes the normalized candidate, the harness and baseline sources, the entry,
the target's fingerprint (with the NKI stack the target's probe reports: SDK version and
``nki-simulated`` / ``nki-device``, so a ``simulated`` result is never reused on Trainium), the
harness version, the seeds and the timing mode;
:class:`EvaluationCache` stores only the deterministic verdicts (:data:`CACHEABLE_STATUSES`) and
disables itself, with one warning, when its directory is unusable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from accelopt_core.kernelfile import normalize_source
from accelopt_core.onsite.protocol import HARNESS_VERSION, JUDGE_VERSION, EvalRequest, EvalResult
from accelopt_core.onsite.sandbox.policy import NOTE_PREFIX

__all__ = ["CACHEABLE_STATUSES", "EvaluationCache", "cache_key"]

log = logging.getLogger(__name__)

#: Verdicts that depend only on the candidate, harness and target: safe to cache. Timeouts and
#: runtime errors may come from the infrastructure (a busy box, a lost connection): never cached.
CACHEABLE_STATUSES = frozenset({"ok", "compile_error", "incorrect", "rejected"})


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(request: EvalRequest, fingerprint: str) -> str:
    """sha256 (hex) of everything that decides a verdict: the normalized candidate, the hashes
    of the original (harness) and baseline sources, the entry, the target fingerprint,
    HARNESS_VERSION, JUDGE_VERSION (a stricter judge never reuses a weaker one's verdict), the
    seeds, the timing seed, the timing mode, and the kernel's import closure (every file's
    content: an edit to a helper module invalidates the verdicts), its path in it, the
    separate harness's path and the entry expression (issue 13), the GPU the kernels are
    compiled for (issue 21), the derived shapes checked (issue 22) and the harness's sizes
    plan and setting (issue 24), the modules ``gate.allowModules`` allows (issue 53)."""
    parts = {
        "candidate": _sha(normalize_source(request.candidate_source)),
        "harness": _sha(request.harness_source),
        "baseline": _sha(request.baseline_source or request.harness_source),
        "entry": request.entry,
        "target": fingerprint,
        "harness_version": HARNESS_VERSION,
        "judge_version": JUDGE_VERSION,
        "seeds": list(request.seeds),
        "timing_seed": request.timing_seed,
        "timing": request.timing,
        "files": _sha(json.dumps(sorted(request.files.items()))) if request.files else None,
        "kernel_path": request.kernel_path,
        "harness_path": request.harness_path,
        "entry_expr": request.entry_expr,
        # issues 21/22: a verdict compiled for sm_80 is not one for sm_90; the derived shapes
        # checked decide it too
        "gpu": request.gpu,
        "derived_inputs": request.derived_inputs,
        "derived_probe": getattr(request, "derived_probe", None),  # issue 52: the search's
        "sizes": getattr(request, "sizes", None) or None,  # issue 24: scaled / pinned sizes
        # issue 53: the modules the gate allows besides its own list
        "allow_modules": sorted(getattr(request, "allow_modules", None) or []) or None,
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

    @property
    def enabled(self) -> bool:
        """False once the cache is disabled (see ``disabled_reason``)."""
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
            with contextlib.suppress(Exception):
                cache.close()

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
        """Store a deterministic verdict (:data:`CACHEABLE_STATUSES`), without the sandbox's
        warning (how that evaluation ran, not part of the verdict: a hit runs nothing). Returns
        True if stored."""
        if self._cache is None or result.status not in CACHEABLE_STATUSES:
            return False
        data = result.to_dict()
        data["cached"] = False
        data["warnings"] = [w for w in result.warnings if not w.startswith(NOTE_PREFIX)]
        try:
            self._cache.set(key, data)
        except Exception as exc:  # noqa: BLE001
            self._disable(exc)
            return False
        return True

    def close(self) -> None:
        """Close this process's SQLite connections."""
        if self._cache is not None:
            self._cache.close()
