"""Probe kernel of ``accelopt target check`` for NKI: add of two (128, 512) float32 tiles.

One tile each way, current NKI API (the standalone ``nki`` package): ``nisa.dma_copy`` both
inputs from HBM into SBUF, ``nisa.tensor_tensor`` add on the Vector Engine, ``nisa.dma_copy`` the
sum into the output in ``nl.shared_hbm``. ``accelopt target check`` sends it where the target has
an NKI SDK: on a NeuronCore on Trainium, in ``nki.simulate`` elsewhere. (``examples/nki/
tensor_add.py`` is the tiled, deliberately naive version of the same kernel.)

Package data, not a module of the onsite package (``probes/`` has no ``__init__.py``, so the
targets do not ship it as one): the CLI reads this file as text (``importlib.resources``) and
sends it as the candidate and the harness, exactly as a user's kernel file travels.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def tensor_add_kernel(a_input, b_input):
    a = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.sbuf)
    b = nl.ndarray(b_input.shape, dtype=b_input.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=a_input)
    nisa.dma_copy(dst=b, src=b_input)
    c = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
    out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=c)
    return out


def tensor_add(a, b):
    """a + b for two float32 arrays of shape (128, 512)."""
    return tensor_add_kernel(a, b)


# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((128, 512)).astype(np.float32)
    b = rng.standard_normal((128, 512)).astype(np.float32)
    return (a, b)


def reference(a, b):
    return a + b


BENCH = {
    "entry": tensor_add,
    "rtol": 1e-5,
    "atol": 1e-6,
    # one add per element; read a and b, write c
    "flops": lambda a, b: a.size,
    "bytes": lambda a, b: 3 * a.nbytes,
}
