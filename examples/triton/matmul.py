"""Matrix multiply C = A @ B, fp16 inputs, fp32 accumulation, fp16 output (naive baseline).

Tiny 16x16x16 tiles, one warp, one pipeline stage and plain row-major program order: correct,
but far from the tensor cores' peak. Room to improve: 64..128-wide tiles, BLOCK_K 32..64, 4-8
warps, 3-4 stages, grouped program order for L2 reuse.

Shapes (``BENCH["shapes"]``, M x N x K): 64x64x64, 32x48x32 and 33x40x17 under the Triton
interpreter (one call in ~0.1 s); 4096x4096x4096, 2048x4096x1024 and 1000x3000x1001 on CUDA or
with ACCELOPT_SHAPE=large (ACCELOPT_SHAPE=small forces the small ones). The last shape is checked,
never timed, and is no multiple of the 16x16x16 tiles.
"""

import os

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        k_mask = (k + offs_k) < K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.float16), mask=c_mask)


def matmul(a, b):
    """C = A @ B for fp16 ``a`` (M, K) and ``b`` (K, N); returns fp16 (M, N)."""
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, "inner dimensions differ"
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    BLOCK_M = 16
    BLOCK_N = 16
    BLOCK_K = 16
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        num_warps=1,
        num_stages=1,
    )
    return c


# --- benchmark harness ---------------------------------------------------------------------


#: (M, N, K) of BENCH["shapes"]: small under the Triton interpreter, GPU-sized on CUDA.
SHAPES = {
    "small": [(64, 64, 64), (32, 48, 32), (33, 40, 17)],
    "large": [(4096, 4096, 4096), (2048, 4096, 1024), (1000, 3000, 1001)],
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


def get_inputs(
    seed: int, device: str, M: int | None = None, N: int | None = None, K: int | None = None
) -> tuple:
    dm, dn, dk = SHAPES["large" if _large(device) else "small"][0]
    M, N, K = M or dm, N or dn, K or dk
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g, dtype=torch.float32).to(torch.float16)
    b = torch.randn(K, N, generator=g, dtype=torch.float32).to(torch.float16)
    return (a.to(device), b.to(device))


def reference(a, b):
    return (a.float() @ b.float()).to(torch.float16)


BENCH = {
    "entry": matmul,
    "rtol": 1e-2,
    "atol": 1e-2,
    "flops": lambda a, b: 2 * a.shape[0] * a.shape[1] * b.shape[1],
    # read A and B once, write C once (ideal traffic)
    "bytes": lambda a, b: (a.numel() + b.numel() + a.shape[0] * b.shape[1]) * a.element_size(),
    # every shape but the last is timed (geometric mean); the last is checked, never timed
    "shapes": [{"M": m, "N": n, "K": k} for m, n, k in SHAPES["large" if _large() else "small"]],
}
