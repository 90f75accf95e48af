"""The device table and the occupancy calculator against hand-computed cases (CUDA occupancy
calculator rules: 256-register units per warp, 4 sub-partitions, 1 KB reserved per block,
128-byte shared memory units)."""

from __future__ import annotations

import pytest

from accelopt_core.onsite.triton.devices import DEVICES, from_runtime, lookup
from accelopt_core.onsite.triton.occupancy import max_threads_per_block, occupancy

H100 = DEVICES["H100 SXM5"]
A100 = DEVICES["A100"]


def test_table_names_and_limits() -> None:
    assert [DEVICES[n].arch for n in ("H100 SXM5", "H100 PCIe", "H200", "A100", "B200")] == [
        "sm_90",
        "sm_90",
        "sm_90",
        "sm_80",
        "sm_100",
    ]
    assert H100.smem_per_block == 232_448 and A100.smem_per_block == 166_912
    assert lookup("h100 sxm5") is H100 and lookup("H100") is H100 and lookup("none") is None
    with pytest.raises(KeyError, match="known: H100 SXM5"):
        lookup("V100")
    assert from_runtime("NVIDIA H100 80GB HBM3").name == "H100 SXM5"
    assert from_runtime("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert from_runtime("Some GPU", (8, 0)) is A100


@pytest.mark.parametrize(
    ("dev", "regs", "threads", "smem", "warps", "limiter"),
    [
        # 32 regs x 32 = 1,024 per warp; 16,384 / 1,024 = 16 warps per sub-partition -> 64.
        (H100, 32, 128, 0, 64, "warps"),
        # 44 regs -> 1,408 -> 1,536 per warp; 16,384 // 1,536 = 10 -> 40 warps, 10 blocks of 4.
        (H100, 44, 128, 0, 40, "registers"),
        # 128 regs -> 4,096 per warp: 4 per sub-partition -> 16 warps = 2 blocks of 8 warps.
        (H100, 128, 256, 0, 16, "registers"),
        # 24,576 B + 1 KB = 25,600 B per block; 233,472 // 25,600 = 9 blocks of 4 warps.
        (H100, 32, 128, 24_576, 36, "shared memory"),
        # On an A100: 167,936 // 25,600 = 6 blocks.
        (A100, 32, 128, 24_576, 24, "shared memory"),
        # One warp per block: 32 blocks per SM at most.
        (H100, 16, 32, 0, 32, "blocks"),
        # Over the per-block limits: no block at all.
        (H100, 32, 128, 262_144, 0, "shared memory"),
        (H100, 32, 2048, 0, 0, "warps"),
        (H100, 255, 1024, 0, 0, "registers"),
    ],
)
def test_occupancy_hand_computed(dev, regs, threads, smem, warps, limiter) -> None:
    got = occupancy(dev, regs, threads, smem)
    assert (got["warps"], got["limiter"]) == (warps, limiter)
    assert got["max_warps"] == 64 and got["percent"] == round(100 * warps / 64, 1)


def test_max_threads_per_block() -> None:
    assert max_threads_per_block(H100, 64) == 1024  # 2,048 regs/warp x 32 warps = 65,536
    assert max_threads_per_block(H100, 65) == 896  # 2,304 x 28 = 64,512 (warps in 4s)
    assert max_threads_per_block(H100, 256) == 0
