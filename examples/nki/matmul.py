"""Matrix product C = A @ B of float32 (128, 256) x (256, 1024) as an NKI kernel, with a harness.

Deliberately poor tiling: the moving (N) tile is TILE_N = 128 columns although a PSUM tile holds
512, every A tile is loaded and transposed again for each N tile, and the K partial products are
added in SBUF instead of accumulating in PSUM.
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

TILE_N = 128  # moving free size per nc_matmul (PSUM holds up to 512 fp32 per partition)
TILE_K = 128  # contraction tile (partition dimension, at most 128)


def _a_transposed(a, k):
    """A[:, k-tile] loaded into SBUF and transposed to (TILE_K, M) via PSUM."""
    m = a.shape[0]
    a_tile = nl.ndarray((m, TILE_K), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_tile, src=a[0:m, k * TILE_K : (k + 1) * TILE_K])
    a_t_psum = nl.ndarray((TILE_K, m), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=a_t_psum, data=a_tile)
    a_t = nl.ndarray((TILE_K, m), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=a_t, src=a_t_psum)
    return a_t


@nki.jit
def matmul_kernel(a, b):
    m, k_total = a.shape
    n_total = b.shape[1]
    out = nl.ndarray((m, n_total), dtype=a.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(n_total // TILE_N):
        cols = slice(n * TILE_N, (n + 1) * TILE_N)
        acc = nl.zeros((m, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
        for k in nl.sequential_range(k_total // TILE_K):
            a_t = _a_transposed(a, k)
            b_tile = nl.ndarray((TILE_K, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=b_tile, src=b[k * TILE_K : (k + 1) * TILE_K, cols])
            part = nl.ndarray((m, TILE_N), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=part, stationary=a_t, moving=b_tile)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=part, op=nl.add)
        nisa.dma_copy(dst=out[0:m, cols], src=acc)
    return out


def matmul(a, b):
    """A @ B for float32 A (128, 256) and B (256, 1024)."""
    return matmul_kernel(a, b)


# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((128, 256)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    return (a, b)


def reference(a, b):
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


BENCH = {
    "entry": matmul,
    "rtol": 1e-4,
    "atol": 1e-4,
    "flops": lambda a, b: 2 * a.shape[0] * a.shape[1] * b.shape[1],
    "bytes": lambda a, b: a.nbytes + b.nbytes + 4 * a.shape[0] * b.shape[1],
}
