"""The GPU device table of the compile stage (issue 21): architecture and the per-SM and
per-block limits that decide whether a compiled kernel can launch and how many warps an SM
holds (:mod:`.occupancy`).

Sources (per device):

- CUDA C++ Programming Guide, "Compute Capabilities", table "Technical Specifications per
  Compute Capability" (CUDA 12.x): for compute capability 8.0, 9.0 and 10.0 alike, 64 resident
  warps and 32 resident blocks per SM, 65,536 32-bit registers per SM and per block, 255
  registers per thread, 1,024 threads per block, grid x ≤ 2^31 - 1 and y, z ≤ 65,535; shared
  memory per SM 164 KB (8.0) / 228 KB (9.0, 10.0), per block 163 KB / 227 KB (opt-in, what
  Triton requests), 1 KB of it reserved per block by the system (the guide's "Shared Memory"
  sections for 8.x and 9.0).
- CUDA occupancy calculator (``cuda_occupancy.h``): registers allocated per warp in units of
  256, 4 sub-partitions per SM, shared memory allocated in units of 128 B.
- NVIDIA datasheets for the SM counts: A100 (108 SMs, A100 Tensor Core GPU Architecture
  whitepaper), H100 SXM5 132 and H100 PCIe 114 (H100 Tensor Core GPU Architecture
  whitepaper), H200 132 (same GH100 configuration as H100 SXM5), B200 148 (NVIDIA Blackwell
  architecture technical brief).

Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

KB = 1024


@dataclass(frozen=True)
class Device:
    """One GPU the Triton kernels are compiled for.

    Attributes:
        name: the name used in settings and results (``H100 SXM5``).
        capability: compute capability as Triton's ``GPUTarget`` arch (90 = sm_90).
        sms: streaming multiprocessors.
        smem_per_sm: shared memory per SM, bytes (the largest carveout).
        smem_per_block: shared memory per block, bytes (opt-in maximum; Triton's launch limit).
        smem_reserved: shared memory the system reserves per block, bytes.
        regs_per_sm: 32-bit registers per SM (also the per-block limit).
        max_regs_per_thread: registers per thread.
        max_warps_per_sm: resident warps per SM.
        max_blocks_per_sm: resident blocks per SM.
        max_threads_per_block: threads per block.
        reg_unit: register allocation unit per warp (registers).
        smem_unit: shared memory allocation unit (bytes).
        sub_partitions: SM sub-partitions (register files).
    """

    name: str
    capability: int
    sms: int
    smem_per_sm: int
    smem_per_block: int
    smem_reserved: int = KB
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    reg_unit: int = 256
    smem_unit: int = 128
    sub_partitions: int = 4

    @property
    def arch(self) -> str:
        """``sm_90`` for capability 90."""
        return f"sm_{self.capability}"

    def describe(self) -> dict:
        """The table row as a plain dict (for results and ``accelopt target``)."""
        return dict(asdict(self), arch=self.arch)


#: Grid limits of every architecture here (CUDA C++ Programming Guide, compute capability
#: table): blocks in x, y, z.
MAX_GRID = (2**31 - 1, 65535, 65535)

_HOPPER = {"capability": 90, "smem_per_sm": 228 * KB, "smem_per_block": 227 * KB}

DEVICES: dict[str, Device] = {
    "H100 SXM5": Device("H100 SXM5", sms=132, **_HOPPER),
    "H100 PCIe": Device("H100 PCIe", sms=114, **_HOPPER),
    "H200": Device("H200", sms=132, **_HOPPER),
    "A100": Device("A100", 80, sms=108, smem_per_sm=164 * KB, smem_per_block=163 * KB),
    "B200": Device("B200", 100, sms=148, smem_per_sm=228 * KB, smem_per_block=227 * KB),
}

#: The device of a request without ``gpu`` (EvalRequest.gpu's default).
DEFAULT = "H100 SXM5"

#: Runtime device names (``torch.cuda.get_device_name``) -> table name; first match wins.
_RUNTIME_NAMES = (
    (r"H100.*PCIe", "H100 PCIe"),
    (r"H100", "H100 SXM5"),
    (r"H200", "H200"),
    (r"A100", "A100"),
    (r"B200", "B200"),
)


def lookup(name: str | None) -> Device | None:
    """The table's device for a setting's ``name`` (case and spacing ignored, ``H100`` alone
    is the SXM5); None for ``None``, ``"none"`` or an empty name.

    Raises:
        KeyError: an unknown name (the message lists the known ones).
    """
    if name is None or not str(name).strip() or str(name).strip().lower() == "none":
        return None
    key = re.sub(r"[\s_-]+", "", str(name)).lower()
    for dev in DEVICES.values():
        if re.sub(r"\s+", "", dev.name).lower() == key:
            return dev
    if key == "h100":
        return DEVICES["H100 SXM5"]
    raise KeyError(f"unknown GPU {name!r}; known: {', '.join(DEVICES)} or none")


def from_runtime(runtime_name: str, capability: tuple[int, int] | None = None) -> Device | None:
    """The table's device for a CUDA device found on the target (``NVIDIA H100 80GB HBM3``),
    or None when the name is not in the table and no row has its ``capability``
    (``(9, 0)``)."""
    for pattern, name in _RUNTIME_NAMES:
        if re.search(pattern, runtime_name or "", re.I):
            return DEVICES[name]
    if capability is not None:
        cap = capability[0] * 10 + capability[1]
        for dev in DEVICES.values():
            if dev.capability == cap:
                return dev
    return None
