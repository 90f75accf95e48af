"""Kernels of issue 29 (derived values and layouts), written for these tests: a softmax, a
layer norm and an fp16 RMS norm, each with its harness (16×64, random inputs), and rewrites an
LLM plausibly proposes for them.

Wrong on inputs users run every day, correct on the harness's random ones and on every derived
shape (:data:`NASTY`):

- ``no_max``: a softmax without the max subtraction (``exp`` of logits of magnitude 100
  overflows);
- ``stride_assumed``: a softmax launcher that passes ``n_cols`` as the row stride (a slice
  ``x[:, :n]`` of a wider buffer is read at the wrong rows);
- ``one_pass_variance``: a layer norm that takes the variance as E[x²] − E[x]² (catastrophic
  cancellation when |mean| ≫ std);
- ``dropped_eps``: a layer norm without its epsilon (tiny activations are blown up);
- ``fp16_accumulation``: an fp16 RMS norm that sums the squares in fp16 (they overflow at
  magnitudes ~200).

Legitimate rewrites that must still rank (:data:`LEGITIMATE`): an online softmax, a Welford
layer norm, a softmax launcher that calls ``.contiguous()`` and then assumes it, plain
block-size tuning, and a shape dispatch with a general fallback.

Every candidate's first line ends with ``[values candidate <name>]``; a test tells them apart
by that marker. They are served as executor replies by the scripted LLM double
(tests/llm_double.py, a TEST DOUBLE for the paid LLM service).
"""

from __future__ import annotations

import re

from tests.shapes.specialized import BASE_KERNEL as SOFTMAX_KERNEL
from tests.shapes.specialized import HARNESS as SOFTMAX_HARNESS
from tests.shapes.specialized import LEGITIMATE as SHAPE_LEGITIMATE

MARKER = re.compile(r"\[values candidate (\w+)\]")

_IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n\n"
_HEAD = "# {title} [values candidate {name}]\n" + _IMPORTS


def name_of(text: str) -> str | None:
    """The candidate name in ``text`` (a source, a prompt), or None."""
    found = MARKER.search(text)
    return found.group(1) if found else None


def _module(name: str, title: str, body: str, harness: str) -> str:
    return _HEAD.format(name=name, title=title) + body + harness


SOFTMAX_FILE = _IMPORTS + SOFTMAX_KERNEL + SOFTMAX_HARNESS

_SOFTMAX_LAUNCHER = SOFTMAX_KERNEL[SOFTMAX_KERNEL.index("\n\ndef softmax(x):") :]

# ---------------------------------------------------------------------------------- softmax

_NO_MAX = """
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    running_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf"))
        running_sum += tl.exp(x)
    denominator = tl.sum(running_sum, axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=float("-inf"))
        tl.store(out_row + cols, tl.exp(x) / denominator, mask=mask)
"""

_ONLINE = """
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    denominator = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=float("-inf"))
        tl.store(out_row + cols, tl.exp(x - row_max) / denominator, mask=mask)
"""

_STRIDE_ASSUMED = """

def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, n_cols, n_cols, n_cols, BLOCK_SIZE=64, num_warps=1)
    return out
"""

_CONTIGUOUS = """

def softmax(x):
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](out, x, n_cols, n_cols, n_cols, BLOCK_SIZE=64, num_warps=1)
    return out
"""

_SOFTMAX_BODY = SOFTMAX_KERNEL[: SOFTMAX_KERNEL.index("\n\ndef softmax(x):")]

SOFTMAX_CANDIDATES: dict[str, str] = {
    "no_max": _module(
        "no_max", "two passes: the max subtraction is dropped", _NO_MAX + _SOFTMAX_LAUNCHER,
        SOFTMAX_HARNESS,
    ),
    "stride_assumed": _module(
        "stride_assumed", "one block per row; rows are n_cols apart", _SOFTMAX_BODY
        + _STRIDE_ASSUMED, SOFTMAX_HARNESS,
    ),
    "online_softmax": _module(
        "online_softmax", "online softmax: running max and rescaled sum in one pass, wider block",
        _ONLINE + _SOFTMAX_LAUNCHER.replace("BLOCK_SIZE = 16", "BLOCK_SIZE = 64"),
        SOFTMAX_HARNESS,
    ),
    "contiguous_copy": _module(
        "contiguous_copy", "one block per row over a contiguous copy", _SOFTMAX_BODY
        + _CONTIGUOUS, SOFTMAX_HARNESS,
    ),
    "block_size_tuning": SHAPE_LEGITIMATE["block_size_tuning"]
    .replace("[shape candidate block_size_tuning]", "[values candidate block_size_tuning]")
    + SOFTMAX_HARNESS,
    "dispatch_with_fallback": SHAPE_LEGITIMATE["dispatch_with_fallback"]
    .replace("[shape candidate dispatch_with_fallback]", "[values candidate dispatch_with_fallback]")
    + SOFTMAX_HARNESS,
}  # fmt: skip

# -------------------------------------------------------------------------------- layer norm

LAYERNORM_KERNEL = """
@triton.jit
def layer_norm_kernel(out_ptr, x_ptr, w_ptr, b_ptr, x_row_stride, out_row_stride, n_cols, eps,
                      BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
        d = tl.where(cols < n_cols, x - mean, 0.0)
        acc += d * d
    var = tl.sum(acc, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(out_ptr + row * out_row_stride + cols, (x - mean) * rstd * w + b, mask=mask)


def layer_norm(x, weight, bias):
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    layer_norm_kernel[(n_rows,)](out, x, weight, bias, x.stride(0), out.stride(0), n_cols, 1e-5,
                                 BLOCK_SIZE=16, num_warps=1)
    return out
"""

LAYERNORM_HARNESS = """

# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 64, generator=g)
    weight = torch.rand(64, generator=g) + 0.5
    bias = torch.randn(64, generator=g) * 0.1
    return (x.to(device), weight.to(device), bias.to(device))


def reference(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


BENCH = {"entry": layer_norm, "rtol": 1e-4, "atol": 1e-4}
"""

LAYERNORM_FILE = _IMPORTS + LAYERNORM_KERNEL + LAYERNORM_HARNESS

_LN_LAUNCHER = LAYERNORM_KERNEL[LAYERNORM_KERNEL.index("\n\ndef layer_norm(") :]

#: The normalize pass every rewrite keeps (mean and rstd computed above it).
_LN_WRITE = """
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(out_ptr + row * out_row_stride + cols, (x - mean) * rstd * w + b, mask=mask)
"""

_LN_HEAD = """
@triton.jit
def layer_norm_kernel(out_ptr, x_ptr, w_ptr, b_ptr, x_row_stride, out_row_stride, n_cols, eps,
                      BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
"""

_ONE_PASS_VARIANCE = """    s = tl.zeros([BLOCK_SIZE], tl.float32)
    sq = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
        s += x
        sq += x * x
    mean = tl.sum(s, axis=0) / n_cols
    var = tl.sum(sq, axis=0) / n_cols - mean * mean
"""

# Welford per lane, lanes merged with Chan et al.'s parallel update (Chan, Golub, LeVeque 1979).
_WELFORD = """    count = tl.zeros([BLOCK_SIZE], tl.float32)
    mean_l = tl.zeros([BLOCK_SIZE], tl.float32)
    m2 = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        valid = cols < n_cols
        x = tl.load(x_row + cols, mask=valid, other=0.0)
        new_count = count + tl.where(valid, 1.0, 0.0)
        delta = tl.where(valid, x - mean_l, 0.0)
        mean_l += tl.where(valid, delta / tl.maximum(new_count, 1.0), 0.0)
        m2 += tl.where(valid, delta * (x - mean_l), 0.0)
        count = new_count
    mean = tl.sum(mean_l * count, axis=0) / n_cols
    d = tl.where(count > 0, mean_l - mean, 0.0)
    var = (tl.sum(m2, axis=0) + tl.sum(count * d * d, axis=0)) / n_cols
"""

LAYERNORM_CANDIDATES: dict[str, str] = {
    "one_pass_variance": _module(
        "one_pass_variance", "mean and variance in one pass: var = E[x^2] - E[x]^2",
        _LN_HEAD + _ONE_PASS_VARIANCE + _LN_WRITE + _LN_LAUNCHER, LAYERNORM_HARNESS,
    ),
    "welford": _module(
        "welford", "mean and variance in one pass with Welford's update, wider block",
        _LN_HEAD + _WELFORD + _LN_WRITE + _LN_LAUNCHER.replace("BLOCK_SIZE=16", "BLOCK_SIZE=64"),
        LAYERNORM_HARNESS,
    ),
    "dropped_eps": _module(
        "dropped_eps", "whole row in one block; the epsilon is negligible and dropped",
        LAYERNORM_KERNEL.replace("tl.sqrt(var + eps)", "tl.sqrt(var)").replace(
            "BLOCK_SIZE=16", "BLOCK_SIZE=64"
        ), LAYERNORM_HARNESS,
    ),
}  # fmt: skip

# ---------------------------------------------------------------------------- fp16 RMS norm

RMSNORM16_KERNEL = """
@triton.jit
def rms_norm_kernel(out_ptr, x_ptr, w_ptr, x_row_stride, out_row_stride, n_cols, eps,
                    BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * out_row_stride + cols, (x * rstd * w).to(tl.float16), mask=mask)


def rms_norm(x, weight):
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    rms_norm_kernel[(n_rows,)](out, x, weight, x.stride(0), out.stride(0), n_cols, 1e-6,
                               BLOCK_SIZE=16, num_warps=1)
    return out
"""

RMSNORM16_HARNESS = """

# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 64, generator=g).to(torch.float16)
    weight = (torch.rand(64, generator=g) + 0.5).to(torch.float16)
    return (x.to(device), weight.to(device))


def reference(x, weight):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    return (xf * rstd * weight.float()).to(torch.float16)


BENCH = {"entry": rms_norm, "rtol": 1e-2, "atol": 1e-2}
"""

RMSNORM16_FILE = _IMPORTS + RMSNORM16_KERNEL + RMSNORM16_HARNESS

RMSNORM16_CANDIDATES: dict[str, str] = {
    "fp16_accumulation": _module(
        "fp16_accumulation", "whole row in one block; the squares are summed in fp16",
        RMSNORM16_KERNEL.replace(
            "    acc = tl.zeros([BLOCK_SIZE], tl.float32)\n",
            "    acc = tl.zeros([BLOCK_SIZE], tl.float16)\n",
        ).replace(
            "        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)\n"
            "        acc += x * x\n",
            "        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)\n"
            "        acc += x * x\n",
        ).replace(
            "tl.sum(acc, axis=0) / n_cols", "tl.sum(acc, axis=0).to(tl.float32) / n_cols"
        ).replace("BLOCK_SIZE=16", "BLOCK_SIZE=64"),
        RMSNORM16_HARNESS,
    ),
}  # fmt: skip

#: name -> (candidate source, the original file it rewrites, entry).
NASTY: dict[str, tuple[str, str, str]] = {
    "no_max": (SOFTMAX_CANDIDATES["no_max"], SOFTMAX_FILE, "softmax"),
    "stride_assumed": (SOFTMAX_CANDIDATES["stride_assumed"], SOFTMAX_FILE, "softmax"),
    "one_pass_variance": (
        LAYERNORM_CANDIDATES["one_pass_variance"], LAYERNORM_FILE, "layer_norm"
    ),
    "dropped_eps": (LAYERNORM_CANDIDATES["dropped_eps"], LAYERNORM_FILE, "layer_norm"),
    "fp16_accumulation": (
        RMSNORM16_CANDIDATES["fp16_accumulation"], RMSNORM16_FILE, "rms_norm"
    ),
}  # fmt: skip

#: name -> (candidate source, the original file it rewrites, entry).
LEGITIMATE: dict[str, tuple[str, str, str]] = {
    "online_softmax": (SOFTMAX_CANDIDATES["online_softmax"], SOFTMAX_FILE, "softmax"),
    "contiguous_copy": (SOFTMAX_CANDIDATES["contiguous_copy"], SOFTMAX_FILE, "softmax"),
    "block_size_tuning": (SOFTMAX_CANDIDATES["block_size_tuning"], SOFTMAX_FILE, "softmax"),
    "dispatch_with_fallback": (
        SOFTMAX_CANDIDATES["dispatch_with_fallback"], SOFTMAX_FILE, "softmax"
    ),
    "welford": (LAYERNORM_CANDIDATES["welford"], LAYERNORM_FILE, "layer_norm"),
}  # fmt: skip
