"""``@triton.autotune`` / ``@triton.heuristics`` kernels in the candidate's and the reference's
processes, above all under the Triton CPU interpreter (``TRITON_INTERPRET=1``).

Triton 3.9's ``Autotuner`` (``triton/runtime/autotuner.py``) builds without a driver, but its
first launch with more than one config left after pruning benchmarks every config through
``Autotuner._bench`` -> ``Autotuner.do_bench`` -> ``driver.active.get_benchmarker()``, and the
interpreter has no driver: ``RuntimeError: 0 active drivers ([]). There should only be one.``
(a single config, or one left after pruning, never benchmarks). ``@triton.heuristics`` alone
works under the interpreter as it is.

:func:`prepare` (interpreter only) replaces two methods of ``Autotuner`` for the process:

- ``_bench``: runs nothing and reports 0 ms for the pinned config (:func:`pin`; default config
  0) and 1 ms for the others, keeping Triton's check for meta-parameters both passed and tuned
  (``ValueError``). Triton's own ``run`` still does the rest: the tuning key and its cache, the
  pruning, picking the fastest (so the pinned config, or the first config left when pruning
  dropped it), the ``reset_only`` call of the autotuner's ``pre_hook`` after "tuning" (which
  zeroes ``reset_to_zero`` arguments, as after a real tuning run), ``Config.pre_hook`` before
  every launch, ``best_config``. ``post_hook`` / ``restore_value`` act only around benchmark
  runs, so with no benchmark runs they never act (as on a GPU outside tuning).
- ``prune_configs``: Triton's, but when a ``perf_model`` raises (it usually asks the GPU for
  its bandwidth) pruning goes on without it (``early_config_prune`` still applies; its errors
  propagate).

On a GPU nothing is patched: tuning runs for real in AccelOpt's untimed warm-up.

A later re-import of triton (``warmstack.align`` drops the triton modules when it switches
modes) loses the patch: call :func:`prepare` after it.
"""

from __future__ import annotations

import sys
from typing import Any

#: Attribute set on the patched ``Autotuner`` methods (so :func:`prepare` patches once).
_MARK = "_accelopt_autotune_patch"
#: Attribute of an ``Autotuner`` holding its pinned config index (interpreter).
_PIN = "_accelopt_pin"
#: ``interpreter``: the mode :func:`prepare` was called with (None before it is).
_STATE: dict[str, bool | None] = {"interpreter": None}


def prepare(interpreter: bool) -> None:
    """Make autotuned kernels launch in this process. Call once, before any kernel module is
    imported (the patch is on the class, so kernels built earlier are covered too).

    Args:
        interpreter: True under the Triton interpreter: patch ``Autotuner._bench`` and
            ``Autotuner.prune_configs`` (module docstring; Triton 3.9). False (a GPU): nothing
            is patched.

    Raises:
        ImportError: ``interpreter`` is True and triton cannot be imported.
    """
    _STATE["interpreter"] = bool(interpreter)
    if not interpreter:
        return
    from triton.runtime.autotuner import Autotuner

    if getattr(Autotuner._bench, _MARK, False):
        return
    original_prune = Autotuner.prune_configs

    def _bench(self, *args, config, **meta):
        """No benchmark: 0 ms for the pinned config, 1 ms for the others (3 quantiles)."""
        conflicts = meta.keys() & config.kwargs.keys()
        if conflicts:  # Triton's own check in Autotuner._bench
            raise ValueError(
                f"Conflicting meta-parameters: {', '.join(conflicts)}."
                " Make sure that you don't re-define auto-tuned symbols."
            )
        ms = 0.0 if config == _pinned_config(self) else 1.0
        return [ms, ms, ms]

    def prune_configs(self, kwargs):
        """Triton's pruning; a ``perf_model`` that raises is left out (interpreter)."""
        try:
            return original_prune(self, kwargs)
        except Exception:
            if self.perf_model is None:
                raise
        model, self.perf_model = self.perf_model, None
        try:
            return original_prune(self, kwargs)
        finally:
            self.perf_model = model

    for fn in (_bench, prune_configs):
        setattr(fn, _MARK, True)
    Autotuner._bench = _bench
    Autotuner.prune_configs = prune_configs


def _pinned_index(tuner: Any) -> int:
    return min(max(int(getattr(tuner, _PIN, 0)), 0), len(tuner.configs) - 1)


def _pinned_config(tuner: Any) -> Any:
    return tuner.configs[_pinned_index(tuner)]


def autotuners(module: Any) -> dict[str, Any]:
    """The ``triton.runtime.autotuner.Autotuner`` objects bound at the top level of ``module``
    (defined there or imported into it), by attribute name, in definition order; an
    ``Autotuner`` under ``@triton.heuristics`` wrappers counts under the wrapper's name. Empty
    when triton is not imported (an NKI kernel). Kernels reached only through another module's
    attribute are not listed: call this on that module too."""
    tuner_module = sys.modules.get("triton.runtime.autotuner")
    if tuner_module is None:
        return {}
    found = {}
    for name, value in list(vars(module).items()):
        obj, depth = value, 0
        while isinstance(obj, tuner_module.Heuristics) and depth < 16:
            obj, depth = obj.fn, depth + 1
        if isinstance(obj, tuner_module.Autotuner):
            found[name] = obj
    return found


def config_count(module: Any) -> int:
    """The largest number of configs of one of ``module``'s autotuned kernels (:func:`autotuners`);
    1 when it has none. :func:`pin` with each index below it checks every config."""
    return max((len(t.configs) for t in autotuners(module).values()), default=1)


def pin(module: Any, index: int) -> None:
    """Under the interpreter, make every autotuned kernel of ``module`` use its config ``index``
    (0-based, clamped to its list; a config that pruning drops for the launch's arguments gives
    way to the first config left) from its next launch on. Clears each kernel's tuning cache, so
    the next launch per key "tunes" again (no benchmark, but the ``reset_only`` pre-hook runs as
    after a real tuning).

    Raises:
        RuntimeError: :func:`prepare` was not called with ``interpreter=True`` in this process
            (on a GPU the real tuning picks the config).
    """
    if not _STATE["interpreter"]:
        raise RuntimeError("autotune.pin works under the Triton interpreter after prepare(True)")
    for tuner in autotuners(module).values():
        setattr(tuner, _PIN, index)
        tuner.cache.clear()


def describe(config: Any) -> str:
    """``triton.Config`` as ``BLOCK_SIZE=128, num_warps=4, num_stages=3`` (its kwargs, then
    its :func:`option_parts`)."""
    parts = [f"{k}={v}" for k, v in config.kwargs.items()]
    opts = option_parts(config.num_warps, config.num_stages, config.num_ctas, config.maxnreg)
    return ", ".join(parts + opts)


def option_parts(
    num_warps: int, num_stages: int, num_ctas: int | None = 1, maxnreg: int | None = None
) -> list[str]:
    """A kernel's compile options as configs are named here (:func:`describe`, and the compile
    stage's launches): ``num_warps=4``, ``num_stages=3``, then ``num_ctas`` when not 1 and
    ``maxnreg`` (registers per thread, ptxas ``--maxrregcount``) when set."""
    parts = [f"num_warps={num_warps}", f"num_stages={num_stages}"]
    if num_ctas not in (None, 1):
        parts.append(f"num_ctas={num_ctas}")
    if maxnreg is not None:
        parts.append(f"maxnreg={maxnreg}")
    return parts


def _interpreter_note(tuner: Any, used: Any) -> str:
    n = len(tuner.configs)
    index = next((i for i, c in enumerate(tuner.configs) if c == used), None)
    where = f"config {index + 1} of {n}" if index is not None else f"a pruned config, {n} listed"
    note = f" (interpreter: {where}, not tuned"
    pinned = _pinned_index(tuner)
    if index != pinned:
        note += f"; pinned config {pinned + 1} was pruned"
    return note + ")"


def chosen(module: Any) -> dict[str, str]:
    """Per autotuned kernel of ``module`` (:func:`autotuners`), the config its last launch used
    (:func:`describe` of ``best_config``). Under the interpreter (after ``prepare(True)``) it is
    suffixed `` (interpreter: config 2 of 3, not tuned)`` (1-based), a kernel not launched yet
    shows its pinned config with ``, not launched`` in the note; on a GPU a kernel not launched
    yet shows ``(not launched)``."""
    out = {}
    for name, tuner in autotuners(module).items():
        used = getattr(tuner, "best_config", None)
        if not _STATE["interpreter"]:
            out[name] = describe(used) if used is not None else "(not launched)"
        elif used is None:
            note = _interpreter_note(tuner, _pinned_config(tuner))
            out[name] = describe(_pinned_config(tuner)) + note[:-1] + ", not launched)"
        else:
            out[name] = describe(used) + _interpreter_note(tuner, used)
    return out
