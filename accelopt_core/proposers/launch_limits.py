"""Which launch configurations the configured GPU can launch, for the offline proposer (issue
21): a configuration that cannot launch on the device is never proposed.

The limit checked here is the one a launch configuration alone decides: threads per block =
``num_warps`` x 32 (the warp size) at most 1,024 (CUDA C Programming Guide, "Features and
Technical Specifications", *maximum number of threads per block*: 1,024 on every compute
capability from 2.0 to 10.x, so on every GPU of the ``accelopt.gpu`` setting: A100 sm_80,
H100/H200 sm_90, B200 sm_100). Shared memory per block depends on what the compiler makes of
the tiles; the compile stage measures it and rejects a candidate over the device's limit.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["MAX_THREADS_PER_BLOCK", "WARP_SIZE", "config_problem", "threads_problem"]

#: Threads in one warp on every NVIDIA GPU (CUDA C Programming Guide, "SIMT Architecture").
WARP_SIZE = 32
#: Most threads one block may have (CUDA C Programming Guide, "Features and Technical
#: Specifications": 1,024 for compute capabilities 2.0 to 10.x).
MAX_THREADS_PER_BLOCK = 1024


def threads_problem(num_warps: int | None) -> str | None:
    """Why a launch with ``num_warps`` warps per program cannot launch, or None when it can
    (or ``num_warps`` is unknown): ``num_warps=64 is 2,048 threads per block, over the CUDA
    limit of 1,024``."""
    if num_warps is None or num_warps < 1:
        return None
    threads = num_warps * WARP_SIZE
    if threads <= MAX_THREADS_PER_BLOCK:
        return None
    return (
        f"num_warps={num_warps} is {threads:,} threads per block, over the CUDA limit of "
        f"{MAX_THREADS_PER_BLOCK:,}"
    )


def config_problem(options: Mapping[str, int | None]) -> str | None:
    """Why a ``triton.Config`` with these keyword ``options`` (``num_warps``, ``num_stages``,
    ... -> literal value or None) cannot launch, or None when it can."""
    return threads_problem(options.get("num_warps"))
