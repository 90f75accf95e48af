"""Row sums of a (256, 2048) float32 array as an NKI kernel (Trainium), with a harness.

Deliberately naive: each 128-row tile is reduced TILE_F = 128 columns at a time, one DMA and two
Vector Engine instructions per chunk, where one 128 x 2048 tile and one ``tensor_reduce`` would do.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TILE_F = 128  # columns per chunk


@nki.jit
def row_sum_kernel(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range(rows // nl.tile_size.pmax):
        r = slice(p * nl.tile_size.pmax, (p + 1) * nl.tile_size.pmax)
        acc = nl.zeros((nl.tile_size.pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        for f in nl.sequential_range(cols // TILE_F):
            t = nl.ndarray((nl.tile_size.pmax, TILE_F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[r, f * TILE_F : (f + 1) * TILE_F])
            part = nl.ndarray((nl.tile_size.pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=part, op=nl.add, data=t, axis=1, keepdims=True)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=part, op=nl.add)
        nisa.dma_copy(dst=out[r, 0:1], src=acc)
    return out


def row_sum(x):
    """Sum over the last axis of a float32 (256, 2048) array, keeping it: (256, 1)."""
    return row_sum_kernel(x)


# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((256, 2048)).astype(np.float32),)


def reference(x):
    return x.astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32)


BENCH = {
    "entry": row_sum,
    "rtol": 1e-4,
    "atol": 1e-5,
    "flops": lambda x: x.size,
    "bytes": lambda x: x.nbytes + 4 * x.shape[0],
}
