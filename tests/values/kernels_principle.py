"""Kernels of issue 52, item 1 (derived values by principle), written for these tests: small
harnesses (16×64 and smaller) and rewrites an LLM plausibly proposes for them, each correct on
the harness's inputs and on issue 29's four derivations (large, tiny, offset, outliers) and
wrong on one class of :mod:`accelopt_core.onsite.judge.derived_values`, plus a legitimate
rewrite per harness that must stay correct there.

:data:`CASES`: name -> ``(harness file, baseline entry, nasty candidate, legitimate candidate,
the plan kinds that show it)``. The kernels run under the Triton interpreter.
"""

from __future__ import annotations

from tests.shapes.specialized import BASE_KERNEL as SOFTMAX_KERNEL
from tests.shapes.specialized import HARNESS as SOFTMAX_HARNESS
from tests.values.kernels import SOFTMAX_CANDIDATES

_IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n\n"
#: The harness's inputs of most cases here: one 16×64 randn tensor, as a harness draws it.
_RANDN_INPUTS = """

def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(16, 64, generator=g).to(device),)

"""

# ---------------------------------------------------------------- softmax: max started at 0
SOFTMAX_FILE = _IMPORTS + SOFTMAX_KERNEL + SOFTMAX_HARNESS
#: "the row max is positive anyway": the running max starts at 0 instead of -inf. On rows
#: entirely below zero the max is 0, exp(x - 0) underflows and the sum is 0: NaN.
MAX_FROM_ZERO = SOFTMAX_FILE.replace(
    'running_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)',
    "running_max = tl.zeros([BLOCK_SIZE], tl.float32)",
)
assert MAX_FROM_ZERO != SOFTMAX_FILE

# ----------------------------------------------------------- row max of positive activations
ROWMAX_KERNEL = """
@triton.jit
def row_max_kernel(out_ptr, x_ptr, x_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=float("-inf"))
        acc = tl.maximum(acc, x)
    tl.store(out_ptr + row, tl.max(acc, axis=0))


def row_max(x):
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    row_max_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK_SIZE=16, num_warps=1)
    return out
"""
ROWMAX_HARNESS = """

def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(16, 64, generator=g).to(device),)  # post-ReLU-like: all positive


def reference(x):
    return x.amax(dim=-1)


BENCH = {"entry": row_max, "rtol": 1e-5, "atol": 1e-6}
"""
ROWMAX_FILE = _IMPORTS + ROWMAX_KERNEL + ROWMAX_HARNESS
#: "activations are non-negative": the accumulator and the masked lanes start at 0.
ROWMAX_FROM_ZERO = ROWMAX_FILE.replace(
    'acc = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)',
    "acc = tl.zeros([BLOCK_SIZE], tl.float32)",
).replace('other=float("-inf"))', "other=0.0)")
#: one block per row (64 columns), -inf start kept.
ROWMAX_WIDE = ROWMAX_FILE.replace("BLOCK_SIZE=16", "BLOCK_SIZE=64")

# ------------------------------------------------------------------------- argmax (ties)
ARGMAX_KERNEL = """
@triton.jit
def argmax_kernel(out_ptr, x_ptr, x_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=float("-inf"))
    best = tl.max(x, axis=0)
    idx = tl.where(x == best, cols, BLOCK_SIZE)
    tl.store(out_ptr + row, tl.min(idx, axis=0).to(tl.int64))


def argmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, dtype=torch.int64, device=x.device)
    argmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols,
                             BLOCK_SIZE=triton.next_power_of_2(n_cols), num_warps=1)
    return out
"""
ARGMAX_HARNESS = (
    _RANDN_INPUTS
    + """
def reference(x):
    return torch.argmax(x, dim=-1)  # the first of tied maxima


BENCH = {"entry": argmax}
"""
)
ARGMAX_FILE = _IMPORTS + ARGMAX_KERNEL + ARGMAX_HARNESS
#: "one reduction instead of two": the index of a max as the largest index holding it.
ARGMAX_LAST = ARGMAX_FILE.replace(
    "idx = tl.where(x == best, cols, BLOCK_SIZE)", "idx = tl.where(x == best, cols, -1)"
).replace("tl.min(idx, axis=0)", "tl.max(idx, axis=0)")
#: Triton's own argmax (ties to the left).
ARGMAX_BUILTIN = ARGMAX_FILE.replace(
    "    best = tl.max(x, axis=0)\n    idx = tl.where(x == best, cols, BLOCK_SIZE)\n"
    "    tl.store(out_ptr + row, tl.min(idx, axis=0).to(tl.int64))",
    "    tl.store(out_ptr + row, tl.argmax(x, axis=0).to(tl.int64))",
)

# ---------------------------------------------------------- row maths, one block per row
#: A row kernel's frame: ``{body}`` computes ``out`` from the row ``x`` (64 columns, one block).
_ROW_FRAME = """
@triton.jit
def {entry}_kernel(out_ptr, x_ptr, x_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other={other})
{body}
    tl.store(out_ptr + row * n_cols + cols, out, mask=mask)


def {entry}(x):
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    {entry}_kernel[(n_rows,)](out, x, x.stride(0), n_cols,
                              BLOCK_SIZE=triton.next_power_of_2(n_cols), num_warps=1)
    return out
"""


def _row_file(entry: str, body: str, reference: str, other: str = "0.0", tol: str = "") -> str:
    """A row kernel ``entry`` (``body``: lines computing ``out`` from ``x``) with its harness
    (16×64 randn, ``reference``'s body)."""
    kernel = _ROW_FRAME.format(entry=entry, body=body, other=other)
    bench = f'BENCH = {{"entry": {entry}, "rtol": 1e-4, "atol": 1e-6{tol}}}\n'
    harness = _RANDN_INPUTS + f"\ndef reference(x):\n{reference}\n\n\n" + bench
    return _IMPORTS + kernel + harness


_L1_REF = "    return torch.nn.functional.normalize(x, p=1.0, dim=-1)  # a zero row stays 0"
L1_FILE = _row_file(
    "l1_normalize",
    "    out = x / tl.maximum(tl.sum(tl.abs(x), axis=0), 1e-12)",
    _L1_REF,
)
#: "a row of 64 floats never sums to 0": the clamp is dropped (0 / 0 on a zero row).
L1_UNGUARDED = _row_file("l1_normalize", "    out = x / tl.sum(tl.abs(x), axis=0)", _L1_REF)
L1_WHERE = _row_file(
    "l1_normalize",
    "    s = tl.sum(tl.abs(x), axis=0)\n    out = tl.where(s > 0, x / tl.where(s > 0, s, 1.0), 0.0)",
    _L1_REF,
)

_MINMAX_REF = """    lo = x.amin(dim=-1, keepdim=True)
    span = x.amax(dim=-1, keepdim=True) - lo
    return torch.where(span > 0, (x - lo) / torch.where(span > 0, span, 1.0), 0.0)"""
_MINMAX_LO = (
    '    lo = tl.min(tl.where(mask, x, float("inf")), axis=0)\n'
    '    hi = tl.max(tl.where(mask, x, float("-inf")), axis=0)\n'
)
MINMAX_FILE = _row_file(
    "min_max_scale",
    _MINMAX_LO + "    span = hi - lo\n"
    "    out = tl.where(span > 0, (x - lo) / tl.where(span > 0, span, 1.0), 0.0)",
    _MINMAX_REF,
)
#: "a row always spans something": the guard on a constant row is dropped (0 / 0).
MINMAX_UNGUARDED = _row_file(
    "min_max_scale", _MINMAX_LO + "    out = (x - lo) / (hi - lo)", _MINMAX_REF
)
#: x - lo is 0 on a constant row: dividing it by 1 there is enough.
MINMAX_DIVIDE_BY_ONE = _row_file(
    "min_max_scale",
    _MINMAX_LO + "    span = hi - lo\n    out = (x - lo) / tl.where(span == 0, 1.0, span)",
    _MINMAX_REF,
)

_SILU_REF = "    return torch.nn.functional.silu(x)"
SILU_FILE = _row_file("silu", "    out = x * tl.sigmoid(x)", _SILU_REF)
#: "denormals are slow and never matter": inputs below the smallest normal are flushed to 0.
SILU_FLUSH = _row_file(
    "silu",
    "    x = tl.where(tl.abs(x) < 1.1754943508222875e-38, 0.0, x)\n    out = x * tl.sigmoid(x)",
    _SILU_REF,
)
SILU_EXP = _row_file("silu", "    out = x / (1.0 + tl.exp(-x))", _SILU_REF)

_L2_REF = """    xd = x.double()
    return (xd / xd.norm(dim=-1, keepdim=True).clamp_min(1e-12)).to(x.dtype)"""
#: The norm scaled by the row's max|x| first (as LAPACK's nrm2 does): no overflow.
L2_FILE = _row_file(
    "l2_normalize",
    "    m = tl.maximum(tl.max(tl.abs(x), axis=0), 1.1754943508222875e-38)\n"
    "    y = x / m\n"
    "    out = x / tl.maximum(m * tl.sqrt(tl.sum(y * y, axis=0)), 1e-12)",
    _L2_REF,
)
#: "the rescaling pass is wasted work": squares of magnitudes near √max overflow to inf.
L2_NAIVE = _row_file(
    "l2_normalize", "    out = x / tl.maximum(tl.sqrt(tl.sum(x * x, axis=0)), 1e-12)", _L2_REF
)
L2_RSQRT = _row_file(
    "l2_normalize",
    "    m = tl.maximum(tl.max(tl.abs(x), axis=0), 1.1754943508222875e-38)\n"
    "    y = x / m\n"
    "    out = x * (1.0 / tl.maximum(m * tl.sqrt(tl.sum(y * y, axis=0)), 1e-12))",
    _L2_REF,
)

# ------------------------------------------------------------------------ relu: NaN and inf
RELU_KERNEL = """
@triton.jit
def relu_kernel(out_ptr, x_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0, 0.0, x), mask=offs < n)


def relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 256),)](out, x, x.numel(), BLOCK_SIZE=256, num_warps=1)
    return out
"""
RELU_HARNESS = (
    _RANDN_INPUTS
    + """
def reference(x):
    return torch.relu(x)  # NaN stays NaN


BENCH = {"entry": relu}
"""
)
RELU_FILE = _IMPORTS + RELU_KERNEL + RELU_HARNESS
_RELU_STORE = "tl.where(x < 0, 0.0, x)"
#: "keep the positive part": NaN > 0 is false, so NaN becomes 0.
RELU_NAN_TO_ZERO = RELU_FILE.replace(_RELU_STORE, "tl.where(x > 0, x, 0.0)")
#: "multiply by the mask, no select": -inf × 0 is NaN.
RELU_MASK_MUL = RELU_FILE.replace(_RELU_STORE, "x * (x > 0).to(tl.float32)")
#: max with 0, NaN propagated as the reference does.
RELU_MAXIMUM = RELU_FILE.replace(
    _RELU_STORE, "tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)"
)
#: A harness whose reference maps NaN to 0: the baseline (NaN kept) does not define that
#: result, so the NaN derivation is skipped with its reason, the inf one used.
RELU_NAN_ZERO_REF_FILE = RELU_FILE.replace(
    "    return torch.relu(x)  # NaN stays NaN",
    "    return torch.where(torch.isnan(x), 0.0, torch.relu(x))",
)

# ---------------------------------------------------------------- integers: scatter-add, CSR
_SCATTER_KERNEL = """
@triton.jit
def scatter_add_kernel(out_ptr, src_ptr, index_ptr, n_cols: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, n_cols)
    target = tl.load(index_ptr + row)
    values = tl.load(src_ptr + row * n_cols + cols)
    tl.atomic_add(out_ptr + target * n_cols + cols, values)


def scatter_add(src, index):
    src = src.contiguous()
    out = torch.zeros(64, src.shape[1], dtype=src.dtype, device=src.device)
    scatter_add_kernel[(src.shape[0],)](out, src, index.contiguous(), src.shape[1], num_warps=1)
    return out
"""
SCATTER_HARNESS = """

def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    src = torch.randn(32, 8, generator=g)
    index = torch.randperm(64, generator=g)[:32]  # distinct rows, as a harness draws them
    return (src.to(device), index.to(device))


def reference(src, index):
    out = torch.zeros(64, src.shape[1], dtype=src.dtype, device=src.device)
    return out.index_add(0, index, src)


BENCH = {"entry": scatter_add, "rtol": 1e-5, "atol": 1e-6}
"""
SCATTER_FILE = _IMPORTS + _SCATTER_KERNEL + SCATTER_HARNESS
#: "the indices are distinct": a plain store instead of an atomic accumulation.
SCATTER_STORE = SCATTER_FILE.replace(
    "tl.atomic_add(out_ptr + target * n_cols + cols, values)",
    "tl.store(out_ptr + target * n_cols + cols, values)",
)
#: relaxed memory order is enough for a sum (no other memory is published by it): still atomic.
SCATTER_RELAXED = SCATTER_FILE.replace(
    "    tl.atomic_add(out_ptr + target * n_cols + cols, values)",
    '    tl.atomic_add(out_ptr + target * n_cols + cols, values, sem="relaxed")',
)

_CSR_KERNEL = """
@triton.jit
def segment_sum_kernel(out_ptr, values_ptr, offsets_ptr, BLOCK: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(offsets_ptr + seg)
    end = tl.load(offsets_ptr + seg + 1)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(start, end, BLOCK):
        idx = i + tl.arange(0, BLOCK)
        acc += tl.load(values_ptr + idx, mask=idx < end, other=0.0)
    tl.store(out_ptr + seg, tl.sum(acc, axis=0))


def segment_sum(values, offsets):
    n = offsets.numel() - 1
    out = torch.empty(n, dtype=values.dtype, device=values.device)
    segment_sum_kernel[(n,)](out, values, offsets, BLOCK=8, num_warps=1)
    return out
"""
CSR_HARNESS = """

def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(40, generator=g)
    cuts = torch.randperm(39, generator=g)[:9].sort().values + 1  # 10 non-empty segments
    offsets = torch.cat([torch.tensor([0]), cuts, torch.tensor([40])])
    return (values.to(device), offsets.to(device))


def reference(values, offsets):
    bounds = offsets.tolist()
    return torch.stack([values[s:e].sum() for s, e in zip(bounds[:-1], bounds[1:])])


BENCH = {"entry": segment_sum, "rtol": 1e-4, "atol": 1e-5}
"""
CSR_FILE = _IMPORTS + _CSR_KERNEL + CSR_HARNESS
#: "every segment has a first element": it seeds the accumulator, the loop starts after it.
CSR_FIRST_SEEDS = CSR_FILE.replace(
    "    acc = tl.zeros([BLOCK], tl.float32)\n    for i in range(start, end, BLOCK):",
    "    first = tl.load(values_ptr + start)\n"
    "    acc = tl.where(tl.arange(0, BLOCK) == 0, first, 0.0)\n"
    "    for i in range(start + 1, end, BLOCK):",
)
#: a fixed-trip loop over the longest segment a 40-value harness has, masked by the segment.
CSR_FIXED_TRIP = CSR_FILE.replace(
    "    for i in range(start, end, BLOCK):\n        idx = i + tl.arange(0, BLOCK)",
    "    for k in range(0, 48, BLOCK):\n        idx = start + k + tl.arange(0, BLOCK)",
)

#: name -> (harness file = baseline, entry, nasty rewrite, legitimate rewrite, kinds that show
#: the nasty one: ``(input name, plan kind)``).
CASES: dict[str, tuple[str, str, str, str, list[tuple[str, str]]]] = {
    "softmax_max_from_zero": (
        SOFTMAX_FILE, "softmax", MAX_FROM_ZERO, SOFTMAX_CANDIDATES["online_softmax"],
        [("x", "below zero")],
    ),
    "rowmax_from_zero": (
        ROWMAX_FILE, "row_max", ROWMAX_FROM_ZERO, ROWMAX_WIDE,
        [("x", "sign-flipped"), ("x", "below zero")],
    ),
    "argmax_last_tie": (
        ARGMAX_FILE, "argmax", ARGMAX_LAST, ARGMAX_BUILTIN,
        [("x", "repeated extreme"), ("x", "grid")],
    ),
    "l1_unguarded_zero_row": (
        L1_FILE, "l1_normalize", L1_UNGUARDED, L1_WHERE, [("x", "zeros")],
    ),
    "minmax_constant_row": (
        MINMAX_FILE, "min_max_scale", MINMAX_UNGUARDED, MINMAX_DIVIDE_BY_ONE,
        [("x", "constant rows"), ("x", "zeros")],
    ),
    "silu_flushes_subnormals": (
        SILU_FILE, "silu", SILU_FLUSH, SILU_EXP, [("x", "subnormal")],
    ),
    "l2_unscaled_norm": (
        L2_FILE, "l2_normalize", L2_NAIVE, L2_RSQRT, [("x", "near limit")],
    ),
    "relu_nan_to_zero": (
        RELU_FILE, "relu", RELU_NAN_TO_ZERO, RELU_MAXIMUM, [("x", "nan")],
    ),
    "relu_mask_multiply": (
        RELU_FILE, "relu", RELU_MASK_MUL, RELU_MAXIMUM, [("x", "inf")],
    ),
    "scatter_assumes_distinct": (
        SCATTER_FILE, "scatter_add", SCATTER_STORE, SCATTER_RELAXED,
        [("index", "repeats"), ("index", "minimum"), ("index", "maximum")],
    ),
    "csr_first_element_seeds": (
        CSR_FILE, "segment_sum", CSR_FIRST_SEEDS, CSR_FIXED_TRIP, [("offsets", "empty segments")],
    ),
}  # fmt: skip
