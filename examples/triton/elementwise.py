"""Fused add + GELU (tanh approximation): out = gelu(x + y) (naive baseline).

Correct but launched with a tiny BLOCK_SIZE and one warp, so each program moves only a few
elements: a larger block and more warps give the memory system something to do.

Shapes (``BENCH["shapes"]``, fp32 elements): 2048, 1024 and 777 under the Triton interpreter (one
call in ~0.1 s); 2**24, 2**22 and 10,000,019 on CUDA or with ACCELOPT_SHAPE=large
(ACCELOPT_SHAPE=small forces the small ones). The last shape is checked, never timed, and is no
multiple of the block.
"""

import math
import os

import torch
import triton
import triton.language as tl


@triton.jit
def add_gelu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    s = x + y
    # gelu(s) = 0.5 * s * (1 + tanh(sqrt(2 / pi) * (s + 0.044715 * s^3)))
    inner = 0.7978845608028654 * (s + 0.044715 * s * s * s)
    tanh_inner = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    tl.store(out_ptr + offsets, 0.5 * s * (1.0 + tanh_inner), mask=mask)


def add_gelu(x, y):
    """gelu(x + y) elementwise for two fp32 tensors of the same shape."""
    out = torch.empty_like(x)
    n_elements = out.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_gelu_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=32, num_warps=1)
    return out


# --- benchmark harness ---------------------------------------------------------------------


#: Elements of BENCH["shapes"]: small under the Triton interpreter, GPU-sized on CUDA.
SHAPES = {"small": [2048, 1024, 777], "large": [2**24, 2**22, 10_000_019]}


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
    x = torch.randn(n, generator=g, dtype=torch.float32)
    y = torch.randn(n, generator=g, dtype=torch.float32)
    return (x.to(device), y.to(device))


def reference(x, y):
    s = x + y
    return 0.5 * s * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (s + 0.044715 * s**3)))


BENCH = {
    "entry": add_gelu,
    "rtol": 1e-4,
    "atol": 1e-5,
    # add, cube (2), fma (2), scale, exp, add, divide, sub, 2 multiplies: ~12 per element
    "flops": lambda x, y: 12 * x.numel(),
    # read x and y, write out
    "bytes": lambda x, y: 3 * x.numel() * x.element_size(),
    # every shape but the last is timed (geometric mean); the last is checked, never timed
    "shapes": [{"n": n} for n in SHAPES["large" if _large() else "small"]],
}
