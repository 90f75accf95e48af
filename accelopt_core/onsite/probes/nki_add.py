"""Probe kernel of ``accelopt target check`` on Trainium: add of two (128, 512) float32 tiles.

The "hello world" of the NKI getting-started guide: load both inputs from HBM into SBUF, add,
store the result back to HBM. ``accelopt target check`` sends it where the target has the Neuron
SDK (neuronxcc) and no Triton; it runs only there (a NeuronDevice), never on a GPU or CPU machine.

Package data, not a module of the onsite package (``probes/`` has no ``__init__.py``, so the
targets do not ship it as one): the CLI reads this file as text (``importlib.resources``) and
sends it as the candidate and the harness, exactly as a user's kernel file travels.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def tensor_add_kernel(a_input, b_input):
    # The partition dimension must fit one SBUF tile (128 partitions).
    assert a_input.shape == b_input.shape
    assert a_input.shape[0] <= nl.tile_size.pmax

    a_tile = nl.load(a_input)
    b_tile = nl.load(b_input)
    c_tile = nl.add(a_tile, b_tile)

    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nl.store(c_output, value=c_tile)
    return c_output


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
