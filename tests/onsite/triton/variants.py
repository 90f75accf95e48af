"""Candidates of examples/triton/matmul.py for the compile stage (issue 21): correct and fast
under the CPU interpreter, but each fails on an H100 in its own way, plus a legitimate retiling.
Checked against Triton 3.9 for sm_90: all six failure kinds fail there."""

from __future__ import annotations

from pathlib import Path

MATMUL = (Path(__file__).resolve().parents[3] / "examples" / "triton" / "matmul.py").read_text()

_TILE = "    BLOCK_M = 16\n    BLOCK_N = 16\n    BLOCK_K = 16\n"
_OPTS = "        num_warps=1,\n        num_stages=1,\n"


def tiled(m: int, n: int, k: int, warps: int = 4, stages: int = 3, src: str = MATMUL) -> str:
    """The matmul with a BLOCK_M x BLOCK_N x BLOCK_K tile, ``warps`` warps, ``stages`` stages."""
    out = src.replace(_TILE, f"    BLOCK_M = {m}\n    BLOCK_N = {n}\n    BLOCK_K = {k}\n")
    return out.replace(_OPTS, f"        num_warps={warps},\n        num_stages={stages},\n")


#: A legitimate retiling: 32x32x32, 4 warps, 2 stages.
RETILE = tiled(32, 32, 32, 4, 2)
#: tl.dot with K = 8 (Triton needs K >= 16).
DOT_K8 = tiled(16, 16, 8, 1, 1)
#: 256x256x64 fp16 tile with 4 stages: 262,144 B of shared memory > 232,448 B.
SMEM = tiled(256, 256, 64, 8, 4)
#: 64 warps: 2,048 threads per block > 1,024.
WARPS64 = tiled(32, 32, 32, 64, 1)
#: A `break` in the K loop (Triton 3.9 has no break).
BREAK = MATMUL.replace(
    "        b_ptrs += BLOCK_K * stride_bk\n",
    "        b_ptrs += BLOCK_K * stride_bk\n        if k >= K:\n            break\n",
)
#: A plain-Python helper called from the kernel.
HELPER = MATMUL.replace(
    "@triton.jit\ndef matmul_kernel(",
    "def _twice(x):\n    return x\n\n\n@triton.jit\ndef matmul_kernel(",
).replace("    c_ptrs = c_ptr +", "    acc = _twice(acc)\n    c_ptrs = c_ptr +")
#: An accumulator that starts as a Python int and becomes a tl.dot target.
INT_ACC = MATMUL.replace(
    "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n", "    acc = 0\n"
)

#: name -> (source, expected message fragment).
FAILING = {
    "dot K=8": (
        DOT_K8,
        "does not compile for sm_90 (H100 SXM5): Input shapes should have M >= 1, N >= 1 and K >= 16",
    ),
    "shared memory": (
        SMEM,
        "cannot launch on H100 SXM5 (sm_90): shared memory per block 262,144 B > 232,448 B",
    ),
    "num_warps=64": (
        WARPS64,
        "cannot launch on H100 SXM5 (sm_90): threads per block 2,048 > 1,024",
    ),
    "break": (BREAK, "does not compile for sm_90 (H100 SXM5): unsupported AST node type: Break"),
    "helper": (HELPER, "does not compile for sm_90 (H100 SXM5): Unsupported function referenced"),
    "int accumulator": (
        INT_ACC,
        'does not compile for sm_90 (H100 SXM5): AssertionError("Loop-carried variable acc has initial type int32',
    ),
}
