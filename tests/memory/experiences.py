"""Sample kernels and experiences for the memory tests (also used by the CLI's memory tests)."""

from __future__ import annotations

from accelopt_core.memory import Experience

SOFTMAX = """
import triton
import triton.language as tl

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * n_cols + offs, num / den, mask=mask)
"""

MATMUL = """
import triton
import triton.language as tl

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
"""

# A softmax written by someone else (other names): what the planner would be asked about.
SOFTMAX_QUERY = """
import triton
import triton.language as tl

@triton.jit
def row_softmax(inp, out, stride, n, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(inp + r * stride + cols, mask=cols < n, other=-float("inf"))
    m = tl.max(v, axis=0)
    e = tl.exp(v - m)
    tl.store(out + r * stride + cols, e / tl.sum(e, axis=0), mask=cols < n)
"""

MATMUL_QUERY = """
import triton
import triton.language as tl

@triton.jit
def gemm(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(A), tl.load(B))
    tl.store(C, acc)
"""

NKI_SOFTMAX = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def softmax_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nl.max(t, axis=1, keepdims=True)
    e = nl.exp(t - m)
    nl.store(out, e / nl.sum(e, axis=1, keepdims=True))
    return out
"""


def make_exp(
    source: str = SOFTMAX,
    *,
    title: str = "single-pass online softmax",
    rule: str = "Fuse the max and the sum into one pass with an online rescaling of the sum.",
    speedup: float = 1.6,
    backend: str = "triton",
    device: str = "NVIDIA H100 80GB HBM3",
    kernel_name: str = "softmax_kernel",
    positive: bool | None = None,
    created_at: float | None = None,
    fast: str | None = None,
    timing: str = "cuda",
    hack: str | None = None,
    plan: str = "",
    judge_version: str | None = None,
) -> Experience:
    extra = {} if judge_version is None else {"judge_version": judge_version}
    return Experience.create(
        backend=backend,
        device=device,
        timing=timing,
        kernel_name=kernel_name,
        slow_source=source,
        fast_source=fast if fast is not None else source + "\n# faster\n",
        speedup=speedup,
        title=title,
        rule=rule,
        positive=positive,
        created_at=created_at,
        hack=hack,
        plan=plan,
        **extra,
    )


def softmax_exp(**kw) -> Experience:
    return make_exp(SOFTMAX, **kw)


def matmul_exp(**kw) -> Experience:
    kw.setdefault("title", "larger K tiles for tl.dot")
    kw.setdefault("rule", "Raise BLOCK_K to 64 and use num_stages=3 so tl.dot overlaps loads.")
    kw.setdefault("kernel_name", "matmul_kernel")
    return make_exp(MATMUL, **kw)
