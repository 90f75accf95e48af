"""TEST DOUBLE of the standalone ``nki`` package (Neuron Kernel Interface), NumPy only.

Implements the subset of the documented API that examples/nki and tests/nki use: ``nki.jit``
(``kernel[lnc](...)`` too), ``nki.simulate``, ``nki.language`` and ``nki.isa``. See
tests/doubles/README.md. Never installed or shipped.
"""

from __future__ import annotations

import os

from . import isa, language
from ._core import run, write_neff

__version__ = "0.3.0+double"


class Kernel:
    """An ``@nki.jit`` kernel. Called directly it runs "on the device": with ``NKI_SIMULATOR=1``
    it runs in the simulator instead; with neither a device (``NKI_DOUBLE_DEVICE=1``) nor the
    simulator it raises RuntimeError, as the real package does without a NeuronDevice."""

    def __init__(self, fn, lnc: int = 1, **options) -> None:
        self.fn = fn
        self.func = fn
        self.lnc = lnc
        self.options = options
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __getitem__(self, lnc: int) -> Kernel:
        return Kernel(self.fn, int(lnc), **self.options)

    def __call__(self, *args, **kwargs):
        if os.environ.get("NKI_SIMULATOR") == "1":
            return run(self.fn, args, kwargs)
        if os.environ.get("NKI_DOUBLE_DEVICE") != "1":
            raise RuntimeError("no NeuronDevice found: run on Trainium or use nki.simulate")
        out = run(self.fn, args, kwargs)
        write_neff(self.__name__)
        return out


def jit(fn=None, *, compile_config=None, specialization_config=None, **options):
    """``@nki.jit`` / ``@nki.jit(...)``: a :class:`Kernel`."""
    if fn is None:
        return lambda f: Kernel(f, **options)
    return Kernel(fn, **options)


def simulate(kernel):
    """A callable that runs ``kernel`` (a Kernel or a plain function) on CPU in NumPy."""
    fn = kernel.fn if isinstance(kernel, Kernel) else kernel
    return lambda *args, **kwargs: run(fn, args, kwargs)


__all__ = ["Kernel", "isa", "jit", "language", "simulate"]
