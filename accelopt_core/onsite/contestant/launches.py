"""Counting the launches of the candidate's ``@triton.jit`` kernels in this process (issue 10,
"every call must launch at least one kernel of the candidate").

Two launch paths exist in Triton (read in Triton 3.9's source, kept working for older ones):

- compiled kernels (GPU): ``JITFunction.run`` and ``CompiledKernel[grid](...)`` both call
  ``CompiledKernel.launch_metadata(grid, stream, *args)`` and hand its result to the driver's
  launcher, which calls the launch-enter hook with it right before the launch
  (``triton.knobs.runtime.launch_enter_hook``: a ``HookChain`` in 3.5+, a single callable in
  3.4; ``CompiledKernel.launch_enter_hook`` before). The hook only sees the kernel's name, so
  ``launch_metadata`` is wrapped to tag the metadata of the candidate's kernels, and the hook
  counts tagged launches. ``kernel.warmup(...)`` compiles without launching: not counted.
- the interpreter (``TRITON_INTERPRET=1``): ``kernel[grid](...)`` and ``kernel.run(...)`` go to
  ``InterpretedFunction.run``, which returns early for warm-up and otherwise runs the grid
  through ``GridExecutor.__call__``; that call is wrapped and counted.

A kernel is the candidate's when its Python function's ``__module__`` (or
``__globals__["__name__"]``) is the candidate module's name (wrappers such as ``Autotuner`` /
``Heuristics`` are unwrapped through ``.fn``). The wrappers are installed once per process
whatever the number of :meth:`LaunchCounter.install` calls (also when this module is loaded twice
from memory under different names: the state lives on the ``triton`` package); each launch costs
O(1). One counter is active at a time: the last one installed.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from . import interp_overhead

_TAG = "accelopt_candidate_launch"  # key set in the launch metadata of the candidate's kernels
_STATE = "_accelopt_launch_state"  # attribute of the triton package: the process-wide state
_MARK = "_accelopt_launch_wrapper"  # attribute on our wrappers and hook (idempotent install)


def _function(fn: Any) -> Any:
    """The Python function under a kernel object (JITFunction, InterpretedFunction,
    Autotuner/Heuristics wrappers are unwrapped through ``.fn``)."""
    for _ in range(8):  # Autotuner -> Heuristics -> JITFunction -> function
        inner = getattr(fn, "fn", None)
        if inner is None or inner is fn:
            break
        fn = inner
    return fn


def _owns(counter: LaunchCounter | None, fn: Any) -> bool:
    """True when ``fn`` (a kernel object or function) was defined in the counter's module:
    its ``__module__`` or its ``__globals__["__name__"]`` is the module's name."""
    if counter is None or fn is None:
        return False
    fn = _function(fn)
    if getattr(fn, "__module__", None) == counter.module_name:
        return True
    glob = getattr(fn, "__globals__", None)
    return isinstance(glob, dict) and glob.get("__name__") == counter.module_name


def _state() -> dict:
    """The process-wide state on the triton package: ``{"counter": active LaunchCounter}``."""
    import triton

    state = getattr(triton, _STATE, None)
    if state is None:
        state = {"counter": None}
        setattr(triton, _STATE, state)
    return state


def _enter_hook(metadata: Any) -> None:
    """The launch-enter hook: counts a compiled launch tagged by :func:`_tag_metadata`."""
    data = getattr(metadata, "data", None)
    if isinstance(data, dict) and data.get(_TAG):
        counter = _state()["counter"]
        if counter is not None:
            counter._record(str(data[_TAG]), None)


_enter_hook._accelopt_launch_wrapper = True  # type: ignore[attr-defined]


def _tag_metadata(metadata: Any, kernel: Any) -> Any:
    """Tag ``metadata`` (a ``LazyDict`` from ``CompiledKernel.launch_metadata``) when
    ``kernel`` (the ``CompiledKernel``) was compiled from the active counter's module."""
    data = getattr(metadata, "data", None)
    fn = getattr(getattr(kernel, "src", None), "fn", None)
    if isinstance(data, dict) and fn is not None and _owns(_state()["counter"], fn):
        data[_TAG] = str(getattr(_function(fn), "__name__", "") or "kernel")  # truthy: the name
    return metadata


def _chain_single(holder: Any, attr: str) -> None:
    """Install :func:`_enter_hook` in a single-callable hook slot (Triton <= 3.4), chaining
    the hook already there."""
    prev = getattr(holder, attr, None)
    if getattr(prev, _MARK, False):
        return
    if prev is None:
        setattr(holder, attr, _enter_hook)
        return

    def chained(metadata: Any) -> None:
        prev(metadata)
        _enter_hook(metadata)

    chained._accelopt_launch_wrapper = True  # type: ignore[attr-defined]
    setattr(holder, attr, chained)


def _install_compiled() -> None:
    """Wrap ``CompiledKernel.launch_metadata`` and add the launch-enter hook (once)."""
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:  # pragma: no cover - every Triton 3.x has it
        return
    original = getattr(CompiledKernel, "launch_metadata", None)
    if original is not None and not getattr(original, _MARK, False):

        def launch_metadata(self, *args, **kwargs):
            return _tag_metadata(original(self, *args, **kwargs), self)

        launch_metadata._accelopt_launch_wrapper = True  # type: ignore[attr-defined]
        CompiledKernel.launch_metadata = launch_metadata
    knobs = sys.modules.get("triton.knobs")
    runtime = getattr(knobs, "runtime", None)
    if runtime is not None and hasattr(runtime, "launch_enter_hook"):
        chain = runtime.launch_enter_hook
        if hasattr(chain, "add") and hasattr(chain, "calls"):  # HookChain (3.5+)
            if not any(getattr(c, _MARK, False) for c in chain.calls):
                chain.add(_enter_hook)
        else:
            _chain_single(runtime, "launch_enter_hook")
    elif hasattr(CompiledKernel, "launch_enter_hook"):
        _chain_single(CompiledKernel, "launch_enter_hook")


def _install_interpreter() -> None:
    """Wrap ``GridExecutor.__call__`` of the Triton interpreter (once), and remove the
    interpreter's wasted work (:mod:`.interp_overhead`)."""
    try:
        from triton.runtime.interpreter import GridExecutor
    except ImportError:  # pragma: no cover - every Triton 3.x has it
        return
    interp_overhead.install()
    original = GridExecutor.__call__
    if getattr(original, _MARK, False):
        return

    def __call__(self, *args, **kwargs):
        counter = _state()["counter"]
        fn = getattr(self, "fn", None)
        with interp_overhead.launch():
            if not _owns(counter, fn):
                return original(self, *args, **kwargs)
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                name = str(getattr(_function(fn), "__name__", "") or "kernel")
                counter._record(name, (time.perf_counter() - start) * 1000.0)

    __call__._accelopt_launch_wrapper = True  # type: ignore[attr-defined]
    GridExecutor.__call__ = __call__


class LaunchCounter:
    """Counts launches of the ``@triton.jit`` kernels defined in one module in this process.

    Args:
        module_name: the candidate module's name in ``sys.modules`` (``"accelopt_candidate"``).
    """

    def __init__(self, module_name: str) -> None:
        self.module_name = module_name
        self._count = 0
        self._kernels: dict[str, list[float]] = {}  # name -> [launches, ms (interpreter)]

    def _record(self, name: str, ms: float | None) -> None:
        """One launch of the kernel ``name``, ``ms`` long (the interpreter's wall time; None
        on the compiled path, where a launch is asynchronous)."""
        self._count += 1
        entry = self._kernels.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += ms or 0.0

    def take_kernels(self) -> dict[str, dict[str, float]]:
        """Per kernel since the previous call: ``{name: {"launches": n, "ms": t}}`` (``ms``:
        wall time of its launches under the interpreter, 0 on the compiled path); resets."""
        out = {k: {"launches": int(v[0]), "ms": float(v[1])} for k, v in self._kernels.items()}
        self._kernels = {}
        return out

    def install(self) -> None:
        """Hook Triton's compiled and interpreter launch paths (once per process) and make this
        counter the active one. Call after ``triton`` is imported and before the candidate's
        first call. Raises ImportError when triton is not installed."""
        import triton  # noqa: F401  (the state lives on the package)

        _install_compiled()
        _install_interpreter()
        _state()["counter"] = self
        self._count = 0
        self._kernels = {}

    def take(self) -> int:
        """Launches counted since the previous ``take()`` (or ``install()``); resets to 0."""
        count, self._count = self._count, 0
        return count
