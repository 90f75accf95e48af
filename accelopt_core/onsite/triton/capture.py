"""Every launch the entry makes, compiled for the target GPU without one (issue 21).

Triton's JIT is left to do all its own work: ``JITFunction.run`` binds the launch's real
arguments with Triton's binder (``create_function_from_signature``), specializes them
(``tt.divisibility`` 16 on pointers and on ints divisible by 16, ints equal to 1 as
constants), packs them (``_pack_args``), compiles with ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32), options=...)`` through its on-disk cache, checks shared
memory and threads against the device (``CompiledKernel._init_handles``), canonicalizes the
grid and calls the launcher; ``@triton.autotune`` prunes its configs and benchmarks each one
that would run, ``@triton.heuristics`` fills its values. Only the driver, the layer between
Triton and the GPU, is replaced: :class:`TargetDriver` answers with the target device of the
table (:mod:`.devices`) and its launcher records the launch instead of running it, after the
checks a CUDA launch makes (grid dimensions, device-side TMA without an allocator). The
kernels' outputs are never computed: the entry sees uninitialised tensors.

Triton is imported inside the functions (standard library only at module level); the process
must not run under ``TRITON_INTERPRET``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from ..contestant.autotune import option_parts
from .devices import MAX_GRID, Device
from .occupancy import max_threads_per_block


class LaunchRefused(RuntimeError):
    """A launch the CUDA driver would refuse on the target device (message: the reason)."""


@dataclass
class Launch:
    """One recorded launch.

    Attributes:
        kernel: the kernel's name.
        hash: Triton's hash of the compiled kernel (its cache group).
        config: ``BLOCK_SIZE=64, num_warps=4, num_stages=3`` (constexprs, then options).
        grid: blocks in x, y, z.
        num_warps: warps per block.
        shared: dynamic shared memory per block, bytes (Triton's metadata).
        metadata: Triton's kernel metadata (``global_scratch_size``, ``target``, ...).
        src: the ``ASTSource`` compiled (``fn``, ``signature``, ``constants``, ``attrs``).
    """

    kernel: str
    hash: str
    config: str
    grid: tuple[int, int, int]
    num_warps: int
    shared: int
    metadata: Any = None
    src: Any = None


@dataclass
class Recorder:
    """What one run of the entry compiled and launched.

    Attributes:
        launches: every launch, in order.
        current: ``(kernel, config)`` being compiled or loaded last (names a failure).
        config_failures: ``(kernel, config, exception)`` of autotune configs that failed to
            compile or load while the autotuner benchmarked them (Triton skips those on a GPU;
            here each is a failure of that config).
        registers: cubin bytes' hash -> registers per thread (cuobjdump), per process.
    """

    launches: list[Launch] = field(default_factory=list)
    current: tuple[str, str] | None = None
    config_failures: list[tuple[str, str, BaseException]] = field(default_factory=list)
    registers: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def describe(
    jit_fn,
    constants: dict,
    num_warps: int,
    num_stages: int,
    num_ctas: int = 1,
    maxnreg: int | None = None,
) -> str:
    """``BLOCK_SIZE=64, num_warps=4, num_stages=3``: the constexpr parameters of ``jit_fn``
    (a ``JITFunction``) in ``constants`` (keyed by argument path ``(i,)`` or name), then the
    options as an autotune config names them (:func:`..contestant.autotune.option_parts`)."""
    names = getattr(jit_fn, "arg_names", [])
    params = getattr(jit_fn, "params", [])
    parts = []
    for key, value in constants.items():
        index = key[0] if isinstance(key, tuple) and len(key) == 1 else None
        if isinstance(key, str) and key in names:
            index = names.index(key)
        if index is None or index >= len(params) or not params[index].is_constexpr:
            continue
        value = getattr(value, "value", value)
        parts.append(f"{names[index]}={value}")
    return ", ".join(parts + option_parts(num_warps, num_stages, num_ctas, maxnreg))


class _Function:
    """The "loaded function" handed to the launcher: the kernel's name and cubin."""

    def __init__(self, name: str, cubin: bytes) -> None:
        self.name, self.cubin = name, cubin


class TargetUtils:
    """``driver.active.utils`` for the target: device properties from the table, "loading" a
    cubin reads its registers (``cuobjdump --dump-resource-usage``) to report the most threads
    per block it can launch with, as ``cuFuncGetAttribute`` would."""

    def __init__(self, device: Device, recorder: Recorder) -> None:
        self.device, self.recorder = device, recorder

    def get_device_properties(self, device: int) -> dict:
        """CUDA's device properties of the target, as Triton's driver names them."""
        dev = self.device
        return {
            "max_shared_mem": dev.smem_per_block,
            "max_num_regs": dev.regs_per_sm,
            "multiprocessor_count": dev.sms,
            "warpSize": 32,
            "sm_clock_rate": 0,
            "mem_clock_rate": 0,
            "mem_bus_width": 0,
        }

    def load_binary(self, name: str, kernel: bytes, shared: int, device: int):
        """``(module, function, n_regs, n_spills, n_max_threads)`` as CUDA's loader gives
        them (n_spills: local memory words per thread)."""
        from .cubin import parse_resource_usage, tool_dir

        key = hash(kernel)
        usage = self.recorder.registers.get(key)
        if usage is None:
            usage = _resource_usage(kernel, tool_dir(), parse_resource_usage).get(name, {})
            self.recorder.registers[key] = usage
        regs = int(usage.get("registers", 0))
        threads = max_threads_per_block(self.device, regs)
        return None, _Function(name, kernel), regs, int(usage.get("local", 0)) // 4, threads

    def unload_module(self, module) -> None:
        """Nothing was loaded."""


#: The file a cubin's ``cuobjdump --dump-resource-usage`` answer is kept in, in the Triton
#: cache group named by the cubin's SHA-256.
USAGE_FILE = "accelopt-usage-v1.json"


def cached_json(group, name: str):
    """The JSON file ``name`` of a Triton cache group (``get_cache_manager(key)``), or None
    when it is missing or unreadable (it is then computed again)."""
    path = group.get_file(name)
    if path:
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            pass
    return None


def _resource_usage(cubin: bytes, bindir: str, parse) -> dict:
    """:func:`.cubin.parse_resource_usage` of ``cubin``, from Triton's cache keyed on the
    cubin's SHA-256 (``cuobjdump --dump-resource-usage`` run and stored on a miss)."""
    import hashlib
    import os
    import subprocess
    import tempfile

    from triton.runtime.cache import get_cache_manager

    group = get_cache_manager(hashlib.sha256(cubin).hexdigest())
    usage = cached_json(group, USAGE_FILE)
    if usage is not None:
        return usage
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run(
            [os.path.join(bindir, "cuobjdump"), "--dump-resource-usage", f.name],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    usage = parse(out)
    group.put(json.dumps(usage), USAGE_FILE, binary=False)
    return usage


def _launcher_class(device: Device, recorder: Recorder):
    """The launcher class Triton instantiates per compiled kernel (``launcher_cls(src,
    metadata)``) and calls per launch."""

    class TargetLauncher:
        """Checks a launch as the CUDA driver would and records it."""

        def __init__(self, src, metadata) -> None:
            self.src, self.metadata = src, metadata
            self.config = describe(
                src.fn,
                getattr(src, "constants", {}),
                metadata.num_warps,
                metadata.num_stages,
                getattr(metadata, "num_ctas", 1),
                getattr(metadata, "maxnreg", None),
            )
            recorder.current = (metadata.name, self.config)

        def __call__(self, gx, gy, gz, stream, function, packed, launch_meta, enter, exit_, *args):
            meta = self.metadata
            grid = (int(gx), int(gy), int(gz))
            for axis, size, limit in zip("xyz", grid, MAX_GRID, strict=True):
                if size > limit:
                    raise LaunchRefused(
                        f"grid {axis} dimension {size:,} > {limit:,} blocks (CUDA limit)"
                    )
            if getattr(meta, "global_scratch_size", 0) and gx * gy * gz > 0 and _no_allocator():
                raise LaunchRefused(
                    f"{meta.name} needs {meta.global_scratch_size:,} B of global scratch per "
                    "block (device-side TMA descriptors) but no allocator is set "
                    "(triton.set_allocator)"
                )
            launch = Launch(
                meta.name, meta.hash, self.config, grid, meta.num_warps, meta.shared, meta, self.src
            )
            with recorder.lock:
                recorder.launches.append(launch)

    return TargetLauncher


def _no_allocator() -> bool:
    """True when no ``triton.set_allocator`` allocator is set (Triton's NullAllocator)."""
    from triton.runtime import _allocation

    return isinstance(_allocation._allocator.get(), _allocation.NullAllocator)


class TargetDriver:
    """``triton.runtime.driver.active`` for the target device: Triton compiles for its
    ``GPUTarget`` and "launches" through :func:`_launcher_class`. Autotuning benchmarks each
    config by running it once (a failure is kept in :attr:`Recorder.config_failures`)."""

    def __init__(self, device: Device, recorder: Recorder) -> None:
        self.device, self.recorder = device, recorder
        self.utils = TargetUtils(device, recorder)
        self.launcher_cls = _launcher_class(device, recorder)

    @classmethod
    def is_active(cls) -> bool:
        return True

    def get_current_target(self):
        """``GPUTarget("cuda", capability, 32)``."""
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.device.capability, 32)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        """One device."""

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def map_python_to_cpp_type(self, ty: str) -> str:
        from triton.backends.nvidia.driver import ty_to_cpp

        return ty_to_cpp(ty)

    def get_benchmarker(self):
        """Runs each autotune config once; returns equal timings (the first config that
        would run on the GPU is then kept)."""
        recorder = self.recorder

        def bench(kernel_call, quantiles=None, **_):
            try:
                kernel_call()
            except Exception as exc:
                kernel, config = recorder.current or ("?", "?")
                recorder.config_failures.append((kernel, config, exc))
                raise
            return [1.0, 1.0, 1.0] if quantiles else 1.0

        return bench

    def get_empty_cache_for_benchmark(self):
        import torch

        return torch.empty(1, dtype=torch.int8)

    def clear_cache(self, cache) -> None:
        """Nothing to flush."""


def _compile_hook(recorder: Recorder):
    """``knobs.runtime.jit_cache_hook``: notes which kernel and config is being compiled
    (names a compile failure); never skips the compile."""

    def hook(*, key, repr, fn, compile, is_manual_warmup, already_compiled):  # noqa: A002
        recorder.current = (
            fn.name,
            describe(
                fn.jit_function, compile["constants"], compile["num_warps"], compile["num_stages"]
            ),
        )
        return False

    return hook


def install(device: Device) -> Recorder:
    """Make Triton compile for ``device`` and record launches in this process: the active
    driver becomes a :class:`TargetDriver`, the JIT's compile hook names what is being
    compiled. Returns the :class:`Recorder`.

    Raises:
        RuntimeError: the process runs under ``TRITON_INTERPRET`` (nothing would compile).
    """
    import os

    if os.environ.get("TRITON_INTERPRET") == "1":
        raise RuntimeError("the compile stage cannot run under TRITON_INTERPRET=1")
    from triton import knobs
    from triton.runtime import driver

    recorder = Recorder()
    driver.set_active(TargetDriver(device, recorder))
    knobs.runtime.jit_cache_hook = _compile_hook(recorder)
    return recorder
