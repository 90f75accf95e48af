"""The stack a warm worker (:mod:`.process.zygote`) imports once, and its alignment in each child.

Triton decorates its own standard library (``tl.max``, ``tl.sum``, ...) when
``triton.language`` is imported: as interpreted functions under ``TRITON_INTERPRET=1``, else as
compiled ones. So the warm parent imports triton in the mode its candidates will most likely
run in, decided WITHOUT initialising CUDA (a CUDA context, even ``cuInit``, does not survive
``fork``): the interpreter unless torch is a CUDA/ROCm build, a GPU device node exists and
``CUDA_VISIBLE_DEVICES`` is not empty. A preset ``TRITON_INTERPRET`` is respected. The child
(the judge), after pinning its device, decides by the same rule (still without CUDA: it forks
the candidate process next, issue 10) and, when that differs from the parent's mode, drops the
pure-Python triton
modules so the evaluation imports them afresh in the right mode (~50 ms; the compiled
extension ``triton._C`` is kept, and Triton's on-disk compile cache stays shared). Before an
interpreter-mode import, a compile-mode triton is prepared and set aside for the GPU compile
stage (:func:`..triton.twin.prepare`), so its once-per-process work is inherited too.
"""

from __future__ import annotations

import os
import sys

from ..runtime.device import gpu_visible
from ..triton import twin

#: The TRITON_INTERPRET mode triton was preloaded in (None: not preloaded, the cold path).
_preloaded_interpret: bool | None = None

_MODULES = ("numpy", "torch", "triton", "triton.language", "neuronxcc.nki")


def preload() -> list[str]:
    """Import the kernel's stack (numpy, torch, triton, the Neuron SDK) without initialising
    CUDA or the Neuron runtime, triton in the mode :func:`gpu_visible` suggests; the names
    imported (a missing one is left to the child, which reports it as the cold path does)."""
    global _preloaded_interpret
    done = []
    for name in _MODULES:
        if name == "triton" and "TRITON_INTERPRET" not in os.environ:
            if not gpu_visible(sys.modules.get("torch")):
                os.environ["TRITON_INTERPRET"] = "1"
        if name == "triton" and os.environ.get("TRITON_INTERPRET") == "1":
            twin.prepare()  # compile-mode triton for the GPU compile stage (issue 21)
        try:
            __import__(name)
        except Exception:  # missing, or broken: the child reports it per request
            continue
        done.append(name)
    if "triton" in done:
        _preloaded_interpret = os.environ.get("TRITON_INTERPRET") == "1"
        if _preloaded_interpret:
            _measure_launch_floor()
    return done


def _measure_launch_floor() -> None:
    """Under the interpreter: measure :func:`.contestant.timing.interpreter_launch_floor_ms`
    once here (on both clocks), so every judge forked from this process inherits it (~0.1 s
    each otherwise) and the Triton interpreter's first-launch set-up is done. A trivial
    one-program kernel on a one-element CPU tensor: no CUDA, and no thread pool is started (the
    fork stays safe). Errors are left to the judge, which measures it again."""
    try:
        from ..contestant.timing import interpreter_launch_floor_ms
        from ..runtime import clocks

        for clock in (clocks.CPU, clocks.WALL):
            interpreter_launch_floor_ms(torch=sys.modules["torch"], clock=clock)
    except Exception:  # noqa: BLE001 - measured again where needed
        pass


def align(request: dict) -> None:
    """In the child, after device pinning: when triton was preloaded in another mode than
    this request runs in (the judge's rule: CUDA when ``timing`` is ``auto`` and
    :func:`gpu_visible`), drop the pure-Python triton modules so they are imported
    afresh. Does nothing on the cold path."""
    if _preloaded_interpret is None or "triton" not in sys.modules:
        return
    torch = sys.modules.get("torch")
    auto = (request.get("timing") or "auto") == "auto"
    use_cuda = bool(auto and gpu_visible(torch))
    if use_cuda != _preloaded_interpret:
        return
    if use_cuda:
        os.environ.pop("TRITON_INTERPRET", None)
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        if not name.startswith("triton._C"):
            del sys.modules[name]
