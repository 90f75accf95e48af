"""Sum of a 1-D fp32 vector in two passes (naive baseline).

Pass 1: each program sums BLOCK_SIZE elements into a partial sum. Pass 2: one program adds
the partial sums, FINAL_BLOCK at a time. Tiny blocks and one warp mean many programs and
many partials: a larger block (with a loop per program), more warps, or a single pass with
tl.atomic_add are the obvious moves.

Shapes (``BENCH["shapes"]``, fp32 elements): 4096, 2048 and 1001 under the Triton interpreter
(one call in ~0.1 s); 2**24, 2**20 and 10,000,019 on CUDA or with ACCELOPT_SHAPE=large
(ACCELOPT_SHAPE=small forces the small ones). The last shape is checked, never timed, and is no
multiple of either block.
Inputs are uniform in [0, 1) so the sum is well conditioned for the fp32 tolerance.
"""

import os

import torch
import triton
import triton.language as tl


@triton.jit
def partial_sum_kernel(x_ptr, partial_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def final_sum_kernel(partial_ptr, out_ptr, n_partials, FINAL_BLOCK: tl.constexpr):
    acc = tl.zeros([FINAL_BLOCK], tl.float32)
    for start in range(0, n_partials, FINAL_BLOCK):
        offsets = start + tl.arange(0, FINAL_BLOCK)
        acc += tl.load(partial_ptr + offsets, mask=offsets < n_partials, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def vector_sum(x):
    """Sum of all elements of a contiguous 1-D fp32 tensor, as a tensor of shape (1,)."""
    n_elements = x.numel()
    BLOCK_SIZE = 64
    n_partials = triton.cdiv(n_elements, BLOCK_SIZE)
    partials = torch.empty(n_partials, device=x.device, dtype=torch.float32)
    out = torch.empty(1, device=x.device, dtype=torch.float32)
    partial_sum_kernel[(n_partials,)](x, partials, n_elements, BLOCK_SIZE=BLOCK_SIZE, num_warps=1)
    final_sum_kernel[(1,)](partials, out, n_partials, FINAL_BLOCK=16, num_warps=1)
    return out


# --- benchmark harness ---------------------------------------------------------------------


#: Elements of BENCH["shapes"]: small under the Triton interpreter, GPU-sized on CUDA.
SHAPES = {"small": [4096, 2048, 1001], "large": [2**24, 2**20, 10_000_019]}


def _large(device: str | None = None) -> bool:
    """GPU-sized shapes on CUDA (ACCELOPT_SHAPE=large|small forces them). At import (no device)
    CUDA is where TRITON_INTERPRET is not 1 (AccelOpt sets it for CPU runs) and a GPU is visible."""
    shape = os.environ.get("ACCELOPT_SHAPE", "")
    if shape in ("large", "small"):
        return shape == "large"
    if device is None:
        return os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available()
    return str(device).startswith("cuda")


def get_inputs(seed: int, device: str, n: int | None = None) -> tuple:
    n = n or SHAPES["large" if _large(device) else "small"][0]
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g, dtype=torch.float32)
    return (x.to(device),)


def reference(x):
    return x.sum(dim=0, keepdim=True)


BENCH = {
    "entry": vector_sum,
    "rtol": 1e-4,
    "atol": 1e-4,
    "flops": lambda x: x.numel(),
    "bytes": lambda x: x.numel() * x.element_size(),
    # every shape but the last is timed (geometric mean); the last is checked, never timed
    "shapes": [{"n": n} for n in SHAPES["large" if _large() else "small"]],
}
