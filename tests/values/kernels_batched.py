"""Faster rewrites of tests/values/kernels_layouts.py's 3-D ``scale3d`` (4×8×16), for issue 52's
end-to-end test: one program per matrix instead of one per row (8× fewer programs, faster
under the interpreter), as an LLM plausibly proposes it, with the launcher's stride mistakes of
kernels_layouts.py. Each first line ends with ``[batched candidate <name>]``.

- ``batched_strided`` (legitimate): every stride passed;
- ``batched_contiguous`` (legitimate): ``.contiguous()`` first, then packed strides;
- ``batched_extent`` (wrong on a permutation of dims 0/1 and a slice along dim 1): the batch
  stride taken as one matrix's extent;
- ``batched_flat`` (wrong on a storage offset): the buffer read from its start;
- ``batched_packed`` (wrong on stride 0): packed strides assumed when nothing is padded.
"""

from __future__ import annotations

import re

from tests.values.kernels_layouts import HARNESS

MARKER = re.compile(r"\[batched candidate (\w+)\]")

_IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n\n"

_KERNEL = """
@triton.jit
def scale3d_kernel(out_ptr, x_ptr, stride_b, stride_r, stride_c, n_rows, n_cols,
                   BLOCK_R: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    rows = tl.arange(0, BLOCK_R)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    x = tl.load(x_ptr + b * stride_b + rows * stride_r + cols * stride_c, mask=mask, other=0.0)
    tl.store(out_ptr + b * n_rows * n_cols + rows * n_cols + cols, x * 2.0 + 1.0, mask=mask)
"""


def _launcher(prepare: str, strides: str, head: str = "") -> str:
    return (
        "\n\ndef scale3d(x):\n" + head + "    n_batch, n_rows, n_cols = x.shape\n"
        "    out = torch.empty((n_batch, n_rows, n_cols), dtype=x.dtype, device=x.device)\n"
        + prepare
        + f"    scale3d_kernel[(n_batch,)](out, {strides}, n_rows, n_cols,\n"
        "        BLOCK_R=triton.next_power_of_2(n_rows), BLOCK=triton.next_power_of_2(n_cols),\n"
        "        num_warps=1)\n"
        "    return out\n"
    )  # fmt: skip


def name_of(text: str) -> str | None:
    """The candidate name in ``text`` (a source, a prompt), or None."""
    found = MARKER.search(text)
    return found.group(1) if found else None


def _candidate(name: str, launcher: str) -> str:
    head = f"# one program per matrix [batched candidate {name}]\n"
    return head + _IMPORTS + _KERNEL + launcher + HARNESS


LEGITIMATE = {
    "batched_strided": _candidate(
        "batched_strided", _launcher("", "x, x.stride(0), x.stride(1), x.stride(2)")
    ),
    "batched_contiguous": _candidate(
        "batched_contiguous",
        _launcher("", "x, n_rows * n_cols, n_cols, 1", head="    x = x.contiguous()\n"),
    ),
}
NASTY = {
    "batched_extent": _candidate(
        "batched_extent",
        _launcher(
            "    batch_stride = max(n_rows * x.stride(1), n_cols * x.stride(2))\n",
            "x, batch_stride, x.stride(1), x.stride(2)",
        ),
    ),
    "batched_flat": _candidate(
        "batched_flat",
        _launcher(
            "    flat = x.as_strided((x.untyped_storage().nbytes() // x.element_size(),), (1,), 0)\n",
            "flat, x.stride(0), x.stride(1), x.stride(2)",
        ),
    ),
    "batched_packed": _candidate(
        "batched_packed",
        _launcher(
            "    strides = (x.stride(0), x.stride(1), x.stride(2))\n"
            "    full = x.untyped_storage().nbytes() == x.numel() * x.element_size()\n"
            "    if full and strides[1:] == (n_cols, 1):\n"
            "        strides = (n_rows * n_cols, n_cols, 1)\n",
            "x, strides[0], strides[1], strides[2]",
        ),
    ),
}
