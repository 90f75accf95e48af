"""Row softmax in three passes over each row (naive baseline).

One program per row walks the row three times in small BLOCK_SIZE chunks: once for the row
maximum, once for the sum of exponentials, once to write exp(x - max) / sum. It reads the
input three times and runs with a tiny block and one warp, so there is real room to improve
(a larger block, a single-pass online softmax, more warps).

Shapes (``BENCH["shapes"]``, rows x cols, fp32): 16x64, 8x48 and 5x33 under the Triton
interpreter (one call in ~0.2 s); 4096x4096, 2048x8192 and 1000x3001 on CUDA or with
ACCELOPT_SHAPE=large (ACCELOPT_SHAPE=small forces the small ones). The last shape is checked, never
timed, and is no multiple of BLOCK_SIZE.
"""

import os

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(
    out_ptr,
    in_ptr,
    in_row_stride,
    out_row_stride,
    n_cols,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride

    # Pass 1: row maximum.
    running_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf"))
        running_max = tl.maximum(running_max, x)
    row_max = tl.max(running_max, axis=0)

    # Pass 2: sum of exponentials.
    running_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf"))
        running_sum += tl.exp(x - row_max)
    denominator = tl.sum(running_sum, axis=0)

    # Pass 3: normalize and write.
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=float("-inf"))
        tl.store(out_row + cols, tl.exp(x - row_max) / denominator, mask=mask)


def softmax(x):
    """Softmax over the last dimension of a 2-D fp32 tensor."""
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    BLOCK_SIZE = 16
    softmax_kernel[(n_rows,)](
        out,
        x,
        x.stride(0),
        out.stride(0),
        n_cols,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=1,
    )
    return out


# --- benchmark harness ---------------------------------------------------------------------


#: (rows, cols) of BENCH["shapes"]: small under the Triton interpreter, GPU-sized on CUDA.
SHAPES = {
    "small": [(16, 64), (8, 48), (5, 33)],
    "large": [(4096, 4096), (2048, 8192), (1000, 3001)],
}


def _large(device: str | None = None) -> bool:
    """GPU-sized shapes on CUDA (ACCELOPT_SHAPE=large|small forces them). At import (no device)
    CUDA is where TRITON_INTERPRET is not 1 (AccelOpt sets it for CPU runs) and a GPU is visible."""
    shape = os.environ.get("ACCELOPT_SHAPE", "")
    if shape in ("large", "small"):
        return shape == "large"
    if device is None:
        return os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available()
    return str(device).startswith("cuda")


def get_inputs(seed: int, device: str, rows: int | None = None, cols: int | None = None) -> tuple:
    default_rows, default_cols = SHAPES["large" if _large(device) else "small"][0]
    rows, cols = rows or default_rows, cols or default_cols
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float32) * 4
    return (x.to(device),)


def reference(x):
    return torch.softmax(x, dim=-1)


BENCH = {
    "entry": softmax,
    "rtol": 1e-4,
    "atol": 1e-5,
    # max, subtract, exp, add, divide per element
    "flops": lambda x: 5 * x.numel(),
    # ideal traffic: read x once, write the output once
    "bytes": lambda x: 2 * x.numel() * x.element_size(),
    # every shape but the last is timed (geometric mean); the last is checked, never timed
    "shapes": [{"rows": r, "cols": c} for r, c in SHAPES["large" if _large() else "small"]],
}
