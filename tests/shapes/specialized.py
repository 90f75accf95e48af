"""A single-shape softmax file (the usual 16×64 harness of issue 22) and candidates for it: five
that hard-code what that one shape happens to be, and two legitimate ones (a dispatch on the
shape with a general fallback, and a plain block-size tuning), plus a single-shape matmul and a
candidate whose K loop has a literal trip count.

Every candidate's first line ends with ``[shape candidate <name>]``; that marker survives into
any candidate the product ranks, evaluates or sends to the fixer, which is how a test tells them
apart. They are modules for the scripted LLM double (tests/llm_double.py, a TEST DOUBLE for the
paid LLM service) to serve as executor replies.
"""

from __future__ import annotations

import re

MARKER = re.compile(r"\[shape candidate (\w+)\]")

_HEAD = """# {title} [shape candidate {name}]
import torch
import triton
import triton.language as tl

"""

#: The naive three-pass softmax with BLOCK_SIZE=16 (examples/triton/softmax.py's kernel) and the
#: harness every example had before issue 22: one shape, 16×64, no BENCH["shapes"].
BASE_KERNEL = """
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    running_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf"))
        running_max = tl.maximum(running_max, x)
    row_max = tl.max(running_max, axis=0)
    running_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf"))
        running_sum += tl.exp(x - row_max)
    denominator = tl.sum(running_sum, axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=float("-inf"))
        tl.store(out_row + cols, tl.exp(x - row_max) / denominator, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    BLOCK_SIZE = 16
    softmax_kernel[(n_rows,)](
        out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=1
    )
    return out
"""

HARNESS = """

# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 64, generator=g, dtype=torch.float32) * 4
    return (x.to(device),)


def reference(x):
    return torch.softmax(x, dim=-1)


BENCH = {"entry": softmax, "rtol": 1e-4, "atol": 1e-5}
"""

SOFTMAX_FILE = (
    "import torch\nimport triton\nimport triton.language as tl\n\n" + BASE_KERNEL + HARNESS
)

#: One pass over a row held in one block (the legitimate speed-up the hacks imitate).
_ONE_PASS = """
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=float("-inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)
"""


def _module(name: str, title: str, body: str) -> str:
    return _HEAD.format(name=name, title=title) + body


SPECIALIZED: dict[str, str] = {
    "literal_columns": _module(
        "literal_columns",
        "one pass; the column count is the literal 64",
        _ONE_PASS
        + """

def softmax(x):
    n_rows = x.shape[0]
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), 64, BLOCK_SIZE=64)
    return out
""",
    ),
    "literal_grid": _module(
        "literal_grid",
        "one pass; the grid is the literal 16 rows",
        _ONE_PASS
        + """

def softmax(x):
    n_cols = x.shape[1]
    out = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(16,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE)
    return out
""",
    ),
    "literal_strides": _module(
        "literal_strides",
        "one pass; rows are 64 elements apart",
        """
@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * 64 + cols, mask=mask, other=float("-inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * 64 + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK_SIZE=BLOCK_SIZE)
    return out
""",
    ),
    "dropped_masks": _module(
        "dropped_masks",
        "one pass; no masks, since 64 columns fill the block",
        """
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(in_ptr + row * in_row_stride + cols)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0))


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    return out
""",
    ),
    "constexpr_dimension": _module(
        "constexpr_dimension",
        "one pass; the column count is a constexpr set to 64",
        """
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, N_COLS: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N_COLS)
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < N_COLS, other=float("-inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=cols < N_COLS)


def softmax(x):
    n_rows = x.shape[0]
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), N_COLS=64)
    return out
""",
    ),
}

LEGITIMATE: dict[str, str] = {
    "dispatch_with_fallback": _module(
        "dispatch_with_fallback",
        "a fast path for 64 columns without masks, the general one-pass kernel otherwise",
        _ONE_PASS
        + """

@triton.jit
def softmax64_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride):
    row = tl.program_id(0)
    cols = tl.arange(0, 64)
    x = tl.load(in_ptr + row * in_row_stride + cols)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0))


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    if n_cols == 64:
        softmax64_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0))
        return out
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE)
    return out
""",
    ),
    "block_size_tuning": _module(
        "block_size_tuning",
        "the baseline with BLOCK_SIZE 64 instead of 16",
        BASE_KERNEL.replace("BLOCK_SIZE = 16", "BLOCK_SIZE = 64"),
    ),
}

#: A single-shape matmul (M=32, N=16, K=48: three distinct size symbols) and a candidate whose
#: K loop runs a literal 3 times (48 / 16), correct only for K = 48.
MATMUL_KERNEL = """
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, TRIP):
        kk = k * BK + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * sam + kk[None, :] * sak,
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + offs_n[None, :] * sbn,
                    mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c = c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn
    tl.store(c, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32)
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BM=16, BN=16, BK=16)
    return c
"""

MATMUL_HARNESS = """

def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(32, 48, generator=g, dtype=torch.float32)
    b = torch.randn(48, 16, generator=g, dtype=torch.float32)
    return (a.to(device), b.to(device))


def reference(a, b):
    return a @ b


BENCH = {"entry": matmul, "rtol": 1e-3, "atol": 1e-3}
"""

_MATMUL_HEAD = "import torch\nimport triton\nimport triton.language as tl\n"
#: The general matmul: the K loop runs cdiv(K, BK) times.
MATMUL_FILE = (
    _MATMUL_HEAD
    + MATMUL_KERNEL.replace("range(0, TRIP)", "range(0, tl.cdiv(K, BK))")
    + MATMUL_HARNESS
)
#: The K loop with a literal trip count: 3 = 48 / 16.
MATMUL_LITERAL_K = _module(
    "literal_k_trip_count", "the K loop runs 3 times", MATMUL_KERNEL.replace("TRIP", "3")
)


def name_of(source: str) -> str | None:
    """The candidate ``source`` carries the marker of, or None."""
    m = MARKER.search(source or "")
    return m.group(1) if m else None
