"""Element-wise add of two (256, 1024) float32 arrays as an NKI kernel (Trainium), with a harness.

Deliberately naive: it moves 128 x TILE_F tiles (TILE_F = 128 of 1024 columns), so it issues eight
times the DMA and vector instructions that 128 x 1024 tiles need. Current NKI API (the standalone
``nki`` package): destination-style ``nisa.dma_copy`` HBM -> SBUF, ``nisa.tensor_tensor`` on the
Vector Engine, ``nisa.dma_copy`` back into the output allocated in ``nl.shared_hbm``.
Runs under ``nki.simulate`` on any machine with the SDK, and on a NeuronCore on Trainium.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TILE_F = 128  # free-dimension tile (columns per instruction)


@nki.jit
def tensor_add_kernel(a_input, b_input):
    rows, cols = a_input.shape
    out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range(rows // nl.tile_size.pmax):
        r = slice(p * nl.tile_size.pmax, (p + 1) * nl.tile_size.pmax)
        for f in nl.affine_range(cols // TILE_F):
            c = slice(f * TILE_F, (f + 1) * TILE_F)
            a = nl.ndarray((nl.tile_size.pmax, TILE_F), dtype=a_input.dtype, buffer=nl.sbuf)
            b = nl.ndarray((nl.tile_size.pmax, TILE_F), dtype=a_input.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a, src=a_input[r, c])
            nisa.dma_copy(dst=b, src=b_input[r, c])
            s = nl.ndarray((nl.tile_size.pmax, TILE_F), dtype=a_input.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=s, data1=a, data2=b, op=nl.add)
            nisa.dma_copy(dst=out[r, c], src=s)
    return out


def tensor_add(a, b):
    """a + b for two float32 arrays of shape (256, 1024)."""
    return tensor_add_kernel(a, b)


# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((256, 1024)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    return (a, b)


def reference(a, b):
    return a + b


BENCH = {
    "entry": tensor_add,
    "rtol": 1e-5,
    "atol": 1e-6,
    "flops": lambda a, b: a.size,  # one add per element
    "bytes": lambda a, b: 3 * a.nbytes,  # read a and b, write the sum
}
