"""Theoretical occupancy of one kernel launch, by the CUDA occupancy calculator's rules
(``cuda_occupancy.h``, ``cudaOccMaxActiveBlocksPerMultiprocessor``; CUDA C++ Programming Guide,
compute capability table). The device limits come from :mod:`.devices`.

Blocks per SM are the least of four limits:

- warps: ``max_warps_per_sm // ceil(threads / 32)``;
- blocks: ``max_blocks_per_sm``;
- registers: a warp is given ``ceil(regs * 32 / 256) * 256`` registers; each of the 4
  sub-partitions holds ``(65,536 / 4) // that`` warps, so the SM holds 4 times as many, in whole
  blocks. A block whose registers exceed 65,536 (counted with its warps rounded up to a
  multiple of 4, as the hardware checks) or more than 255 registers per thread cannot launch;
- shared memory: a block takes ``ceil((dynamic + static + 1 KB reserved) / 128) * 128`` bytes
  of the SM's shared memory (the largest carveout: Triton sets no preference). More than the
  device's per-block limit cannot launch.

Standard library only.
"""

from __future__ import annotations

from .devices import Device

#: Limiter names, in the calculator's order of precedence for ties.
LIMITERS = ("warps", "registers", "shared memory", "blocks")


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _register_limit(dev: Device, registers: int, warps: int) -> int:
    """Blocks per SM allowed by the register file (0: the block cannot launch)."""
    if registers <= 0:
        return 1 << 30
    per_warp = _round_up(registers * 32, dev.reg_unit)
    assumed = per_warp * _round_up(warps, dev.sub_partitions)  # the hardware's check
    if registers > dev.max_regs_per_thread or assumed > dev.regs_per_sm:
        return 0
    per_partition = (dev.regs_per_sm // dev.sub_partitions) // per_warp
    return per_partition * dev.sub_partitions // warps


def _smem_limit(dev: Device, shared_bytes: int) -> int:
    """Blocks per SM allowed by shared memory (0: the block cannot launch)."""
    if shared_bytes > dev.smem_per_block:
        return 0
    per_block = _round_up(shared_bytes + dev.smem_reserved, dev.smem_unit)
    return dev.smem_per_sm // per_block


def occupancy(dev: Device, registers: int, threads: int, shared_bytes: int) -> dict:
    """Theoretical occupancy of a block of ``threads`` threads using ``registers`` registers
    per thread and ``shared_bytes`` bytes of shared memory (dynamic + static) on ``dev``.

    Returns ``{"blocks": blocks per SM, "warps": active warps per SM, "max_warps": the SM's
    warp slots, "percent": warps / max_warps * 100 (one decimal), "limiter": the binding limit,
    one of :data:`LIMITERS`}``; ``blocks`` 0 when the block cannot launch at all (then
    ``limiter`` names the resource).

    Raises:
        ValueError: ``threads`` < 1.
    """
    if threads < 1:
        raise ValueError(f"threads per block must be >= 1, got {threads}")
    warps = -(-threads // 32)
    limits = {
        "warps": dev.max_warps_per_sm // warps if threads <= dev.max_threads_per_block else 0,
        "registers": _register_limit(dev, registers, warps),
        "shared memory": _smem_limit(dev, shared_bytes),
        "blocks": dev.max_blocks_per_sm,
    }
    blocks = min(limits.values())
    limiter = next(name for name in LIMITERS if limits[name] == blocks)
    active = blocks * warps
    return {
        "blocks": blocks,
        "warps": active,
        "max_warps": dev.max_warps_per_sm,
        "percent": round(100.0 * active / dev.max_warps_per_sm, 1),
        "limiter": limiter,
    }


def max_threads_per_block(dev: Device, registers: int) -> int:
    """Most threads per block a kernel with ``registers`` registers per thread can launch
    with on ``dev`` (what ``cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)`` reports): the device's
    1,024, lowered in whole warps (4 at a time, the sub-partitions) until the block's registers
    fit the register file."""
    if registers > dev.max_regs_per_thread:
        return 0
    warps = dev.max_threads_per_block // 32
    while warps > 0 and _register_limit(dev, registers, warps) == 0:
        warps -= dev.sub_partitions
    return max(warps, 0) * 32
