"""Kernels of issue 52 item 2 (layouts by principle), written for these tests: a 3-D Triton
kernel (``y = 2x + 1`` over a 4×8×16 input, one program per row, every stride passed) with
its harness, and launcher rewrites an LLM plausibly proposes for it.

Wrong on a stride pattern callers make, and correct on the harness's contiguous inputs and on
issue 29's two layouts (a last-dimension slice, the last two dimensions swapped)
(:data:`NASTY`):

- ``batch_extent``: the batch stride taken as the extent of one matrix,
  ``max(rows × row stride, cols × col stride)`` (right for a dense or row-padded matrix stored
  either way); wrong on a permutation of dims 0 and 1 and on a slice along dim 1;
- ``flat_buffer``: the input viewed as its flat buffer (``as_strided`` with storage offset 0,
  so padded rows can be indexed by stride) and read from there: wrong on a view that starts
  inside its buffer (storage offset);
- ``packed_if_full``: rows assumed packed, batch stride rows × cols, whenever the last two
  strides are the contiguous ones and the tensor covers its whole buffer: wrong on a stride-0
  (expanded) batch dimension, whose buffer holds a whole tensor.

Legitimate rewrites (:data:`LEGITIMATE`): ``contiguous_copy`` (``.contiguous()`` first, then
packed strides) and ``wider_block`` (every stride passed, as the baseline, a wider block).
"""

from __future__ import annotations

_IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n\n"

KERNEL = """
@triton.jit
def scale3d_kernel(out_ptr, x_ptr, stride_b, stride_r, stride_c, n_rows, n_cols,
                   BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // n_rows
    r = pid % n_rows
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + b * stride_b + r * stride_r + cols * stride_c, mask=mask, other=0.0)
    tl.store(out_ptr + pid * n_cols + cols, x * 2.0 + 1.0, mask=mask)
"""


def _launcher(prepare: str, strides: str, head: str = "") -> str:
    """The launcher, with ``prepare`` (lines, indented) before the launch and ``strides`` the
    kernel's three stride arguments."""
    return (
        "\n\ndef scale3d(x):\n" + head + "    n_batch, n_rows, n_cols = x.shape\n"
        "    out = torch.empty((n_batch, n_rows, n_cols), dtype=x.dtype, device=x.device)\n"
        "    block = triton.next_power_of_2(n_cols)\n" + prepare
        + f"    scale3d_kernel[(n_batch * n_rows,)](out, {strides}, n_rows, n_cols,\n"
        "                                        BLOCK=block, num_warps=1)\n"
        "    return out\n"
    )  # fmt: skip


LAUNCHER = _launcher("", "x, x.stride(0), x.stride(1), x.stride(2)")

HARNESS = """

# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(4, 8, 16, generator=g).to(device),)


def reference(x):
    return x * 2.0 + 1.0


BENCH = {"entry": scale3d, "rtol": 1e-5, "atol": 1e-5}
"""

SCALE3D_FILE = _IMPORTS + KERNEL + LAUNCHER + HARNESS


def _candidate(name: str, title: str, launcher: str) -> str:
    return f"# {title} [layout candidate {name}]\n" + _IMPORTS + KERNEL + launcher + HARNESS


_BATCH_EXTENT = _launcher(
    "    batch_stride = max(n_rows * x.stride(1), n_cols * x.stride(2))  # one matrix's extent\n",
    "x, batch_stride, x.stride(1), x.stride(2)",
)

_FLAT_BUFFER = _launcher(
    "    flat = x.as_strided((x.untyped_storage().nbytes() // x.element_size(),), (1,), 0)\n",
    "flat, x.stride(0), x.stride(1), x.stride(2)",
)

_PACKED_IF_FULL = _launcher(
    "    strides = (x.stride(0), x.stride(1), x.stride(2))\n"
    "    full = x.untyped_storage().nbytes() == x.numel() * x.element_size()\n"
    "    if full and strides[1:] == (n_cols, 1):  # no padding anywhere: packed rows and batches\n"
    "        strides = (n_rows * n_cols, n_cols, 1)\n",
    "x, strides[0], strides[1], strides[2]",
)

_CONTIGUOUS_COPY = _launcher("", "x, n_rows * n_cols, n_cols, 1", head="    x = x.contiguous()\n")

#: name -> (candidate source, the layout class it is wrong on, the name of one part of that
#: class it is wrong on alone).
_BATCH = _candidate("batch_extent", "batch stride from one matrix's extent", _BATCH_EXTENT)
_FLAT = _candidate("flat_buffer", "the flat buffer, indexed by stride", _FLAT_BUFFER)
_PACKED = _candidate("packed_if_full", "packed strides when nothing is padded", _PACKED_IF_FULL)
NASTY: dict[str, tuple[str, str, str]] = {
    "batch_extent": (_BATCH, "layout: permuted", "x permuted (1, 0, 2)"),
    "batch_extent_sliced": (_BATCH, "layout: sliced", "x sliced along dim 1"),
    "flat_buffer": (_FLAT, "layout: offset", "x at storage offset 1"),
    "packed_if_full": (_PACKED, "layout: expanded", "x expanded along dim 0 (stride 0)"),
}

#: name -> candidate source: legitimate rewrites, correct on every layout the baseline is.
LEGITIMATE: dict[str, str] = {
    "contiguous_copy": _candidate(
        "contiguous_copy", "a contiguous copy, then packed strides", _CONTIGUOUS_COPY
    ),
    "wider_block": _candidate(
        "wider_block",
        "every stride passed, one power of two wider block",
        LAUNCHER.replace("triton.next_power_of_2(n_cols)", "2 * triton.next_power_of_2(n_cols)"),
    ),
}
