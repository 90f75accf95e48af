"""Run in a fresh process on a CUDA GPU (tests/gpu/test_profile.py): call an example's entry once
on the inputs of a seed, as the timed run makes them (``get_inputs(seed, "cuda")``), with
Triton's own JIT and driver, and print one JSON line: each kernel it launched, in first-launch
order, as CUDA loaded it: ``name``, ``n_regs``, ``n_spills`` (Triton's: local memory bytes per
thread / 4), ``shared`` (``metadata.shared``, dynamic shared memory per block, B),
``num_warps``, ``num_stages`` and ``blocks_per_sm``, the driver's own occupancy answer
(``cuOccupancyMaxActiveBlocksPerMultiprocessor`` with that block size and dynamic shared
memory). These are the ground truth the compile stage's facts are checked against.

Usage: ``python tests/gpu/loaded_kernels.py EXAMPLE.py SEED``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import sys


def _load(path: str):
    spec = importlib.util.spec_from_file_location("accelopt_gpu_example", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _blocks_per_sm(function: int, threads: int, shared: int) -> int:
    """The CUDA driver's occupancy calculator for a loaded function (CUfunction handle)."""
    libcuda = ctypes.CDLL("libcuda.so.1")
    blocks = ctypes.c_int(0)
    err = libcuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(blocks), ctypes.c_void_p(function), ctypes.c_int(threads),
        ctypes.c_size_t(shared),
    )  # fmt: skip
    if err != 0:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed: CUresult {err}")
    return blocks.value


def main() -> None:
    import torch
    from triton import knobs

    path, seed = sys.argv[1], int(sys.argv[2])
    module = _load(path)
    order: list[int] = []  # CUfunction handles in first-launch order

    def on_launch(metadata) -> None:
        function = metadata.get()["function"] if hasattr(metadata, "get") else None
        if function is not None and function not in order:
            order.append(function)

    knobs.runtime.launch_enter_hook.add(on_launch)
    inputs = module.get_inputs(seed, "cuda")
    module.BENCH["entry"](*inputs)
    torch.cuda.synchronize()
    loaded = {}
    for obj in list(vars(module).values()):
        fn = obj
        while hasattr(fn, "fn") and not hasattr(fn, "device_caches"):
            fn = fn.fn  # Autotuner / Heuristics -> JITFunction
        for caches in getattr(fn, "device_caches", {}).values():
            for kernel in caches[0].values():
                kernel._init_handles()
                loaded[kernel.function] = kernel
    out = []
    for function in order:
        k = loaded[function]
        threads = k.metadata.num_warps * 32
        out.append(
            {
                "name": k.name,
                "n_regs": k.n_regs,
                "n_spills": k.n_spills,
                "shared": k.metadata.shared,
                "num_warps": k.metadata.num_warps,
                "num_stages": k.metadata.num_stages,
                "blocks_per_sm": _blocks_per_sm(function, threads, k.metadata.shared),
            }
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
