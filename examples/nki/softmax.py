"""Row softmax of a (256, 512) float32 array as an NKI kernel (Trainium), with a harness.

Deliberately naive: three passes per 128-row tile, each loading the rows from HBM again (max,
then the sum of exp(x - max), then exp(x - max) / sum), and the row max and sum are reduced over
TILE_F-column chunks. One load per tile and one activation with a fused reduction would do.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TILE_F = 128  # columns per reduction chunk


def _load(x, r, c, cols):
    t = nl.ndarray((nl.tile_size.pmax, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[r, c])
    return t


def _row_reduce(x, r, op, shift, cols):
    """Reduce each row of rows ``r`` with ``op`` over TILE_F chunks (exp(x - shift) if given)."""
    acc = nl.ndarray((nl.tile_size.pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
    part = nl.ndarray((nl.tile_size.pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
    for f in nl.sequential_range(cols // TILE_F):
        t = _load(x, r, slice(f * TILE_F, (f + 1) * TILE_F), TILE_F)
        if shift is not None:
            nisa.tensor_scalar(dst=t, data=t, op0=nl.subtract, operand0=shift)
            nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.tensor_reduce(dst=part if f else acc, op=op, data=t, axis=1, keepdims=True)
        if f:
            nisa.tensor_tensor(dst=acc, data1=acc, data2=part, op=op)
    return acc


@nki.jit
def softmax_kernel(x):
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range(rows // nl.tile_size.pmax):
        r = slice(p * nl.tile_size.pmax, (p + 1) * nl.tile_size.pmax)
        row_max = _row_reduce(x, r, nl.maximum, None, cols)
        row_sum = _row_reduce(x, r, nl.add, row_max, cols)
        t = _load(x, r, slice(0, cols), cols)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.subtract, operand0=row_max)
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.divide, operand0=row_sum)
        nisa.dma_copy(dst=out[r, 0:cols], src=t)
    return out


def softmax(x):
    """Softmax over the last axis of a float32 (256, 512) array."""
    return softmax_kernel(x)


# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((256, 512)).astype(np.float32) * 3,)


def reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


BENCH = {
    "entry": softmax,
    "rtol": 1e-4,
    "atol": 1e-5,
    "flops": lambda x: 5 * x.size,  # max, subtract, exp, sum, divide
    "bytes": lambda x: 2 * x.nbytes,  # ideal: read x once, write the result once
}
