"""Per-kernel GPU facts of the compile stage (issue 21, item 3): registers, spills, local and
shared memory, threads, theoretical occupancy and SASS counts of each distinct compiled launch,
in the shape of ``metrics["gpu"]["kernels"]`` (notes/contracts.md).

The tools' answers for one compiled kernel are kept beside it in Triton's on-disk cache (the
group of its hash, file :data:`FACTS_FILE`), so a cached compile costs no tool run; the SASS of
all new kernels comes from one disassembler run (:func:`.cubin.disassemble`), started before the
compiles by the stage (:class:`.cubin.EarlyDisassembly`).

Standard library only at module level.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

from . import cubin, sass
from .capture import Launch, cached_json
from .devices import Device
from .occupancy import occupancy

#: The file the tools' answers are cached in, in the kernel's Triton cache group.
FACTS_FILE = "accelopt-facts-v1.json"


def _cache(kernel_hash: str):
    from triton.runtime.cache import get_cache_manager

    return get_cache_manager(kernel_hash)


def _cached(launch: Launch) -> dict | None:
    """The tools' answers for ``launch``'s kernel from Triton's cache, or None."""
    return cached_json(_cache(launch.hash), FACTS_FILE)


def _binaries(launch: Launch) -> tuple[bytes, str]:
    """``(cubin, PTX)`` of ``launch``'s kernel from Triton's cache.

    Raises:
        cubin.ToolError: either is missing.
    """
    cache = _cache(launch.hash)
    bin_path = cache.get_file(f"{launch.kernel}.cubin")
    ptx_path = cache.get_file(f"{launch.kernel}.ptx")
    if not bin_path or not ptx_path:
        raise cubin.ToolError(f"{launch.kernel}: cubin or PTX missing from Triton's cache")
    with open(bin_path, "rb") as f:
        binary = f.read()
    with open(ptx_path) as f:
        return binary, f.read()


def _resources(launch: Launch, binary: bytes, ptx: str) -> dict:
    """The tools' answers but SASS (``cuobjdump --dump-resource-usage``, ``ptxas -v``)."""
    meta = launch.metadata
    found = cubin.inspect(binary, ptx, meta.target.arch, bool(meta.enable_fp_fusion), sass=False)
    usage = found["usage"].get(launch.kernel, {})
    verbose = found["ptxas"].get(launch.kernel, {})
    return {
        "registers": usage.get("registers", 0),
        "ptxas_registers": verbose.get("registers"),
        "spill_stores": verbose.get("spill_stores", 0),
        "spill_loads": verbose.get("spill_loads", 0),
        "local_bytes": usage.get("local", 0) + usage.get("stack", 0),
        "static_shared": usage.get("shared", 0),
    }


def tool_facts_many(
    launches: list[Launch], workers: int = 4, early: cubin.EarlyDisassembly | None = None
) -> list[dict]:
    """:func:`tool_facts` of each launch: cached answers read from Triton's cache, the others
    computed with the tools run concurrently (one ``nvdisasm`` per architecture for all their
    SASS, :func:`.cubin.disassemble`; ``early``'s for its architecture) and stored there.
    ``early`` stays its caller's to cancel (the stage does, on every way out).

    Raises:
        cubin.ToolError: a tool fails, or a cubin is not in Triton's cache.
    """
    found = [_cached(launch) for launch in launches]
    todo = [i for i, facts in enumerate(found) if facts is None]
    if not todo:
        return found
    binaries = {i: _binaries(launches[i]) for i in todo}
    by_arch: dict[int, dict] = {}
    for i in todo:
        code = cubin.text_sections(binaries[i][0]).get(launches[i].kernel, b"")
        by_arch.setdefault(launches[i].metadata.target.arch, {})[i] = code

    def disassemble(cc: int, codes: dict) -> dict:
        if early is not None and cc == early.capability:
            return early.finish(codes)
        return cubin.disassemble(codes, cc)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        sass_jobs = [pool.submit(disassemble, cc, codes) for cc, codes in by_arch.items()]
        rest = pool.map(lambda i: _resources(launches[i], *binaries[i]), todo)
        computed = dict(zip(todo, rest, strict=True))
        texts = {i: text for job in sass_jobs for i, text in job.result().items()}
    for i in todo:
        facts = dict(computed[i], sass=sass.facts(texts[i]))
        _cache(launches[i].hash).put(json.dumps(facts), FACTS_FILE, binary=False)
        found[i] = facts
    return found


def tool_facts(launch: Launch) -> dict:
    """``{"registers", "spill_stores", "spill_loads", "local_bytes", "static_shared",
    "ptxas_registers", "sass": sass.facts(...)}`` of the kernel ``launch`` ran, from its cubin
    and PTX in Triton's cache (cached there once computed).

    Raises:
        cubin.ToolError: a tool fails, or the cubin is not in Triton's cache.
    """
    return tool_facts_many([launch])[0]


def kernel_entry(launch: Launch, count: int, tools: dict, dev: Device) -> dict:
    """One ``metrics["gpu"]["kernels"]`` entry for the kernel ``launch`` ran ``count`` times,
    with its :func:`tool_facts` ``tools`` on ``dev``. ``shared_bytes`` is Triton's dynamic
    shared memory per block; the occupancy adds the static shared memory ptxas reports."""
    threads = launch.num_warps * 32
    shared = launch.shared + int(tools.get("static_shared") or 0)
    return {
        "kernel": launch.kernel,
        "config": launch.config,
        "grid": list(launch.grid),
        "launches": count,
        "registers": tools["registers"],
        "spill_stores": tools["spill_stores"],
        "spill_loads": tools["spill_loads"],
        "local_bytes": tools["local_bytes"],
        "shared_bytes": launch.shared,
        "threads": threads,
        "occupancy": {
            k: v
            for k, v in occupancy(dev, tools["registers"], threads, shared).items()
            if k != "blocks"
        },
        "sass": tools["sass"],
    }


def collect(
    launches: list[Launch], dev: Device, early: cubin.EarlyDisassembly | None = None
) -> tuple[list[dict], list[str]]:
    """``(kernels, warnings)`` for ``launches``: one entry per distinct compiled kernel (hash),
    in first-launch order, the tools run concurrently (``early``: the disassembler started
    before the compiles, finished here when there is new code); warnings for spills and for a ptxas
    register count that differs from the cubin's."""
    distinct: dict[str, tuple[Launch, int]] = {}
    for launch in launches:
        first, count = distinct.get(launch.hash, (launch, 0))
        distinct[launch.hash] = (first, count + 1)
    firsts = [first for first, _ in distinct.values()]
    tools = tool_facts_many(
        firsts, max(1, min(len(firsts) + 1, os.cpu_count() or 1, 4)), early=early
    )
    kernels, warnings = [], []
    for (first, count), found in zip(distinct.values(), tools, strict=True):
        kernels.append(kernel_entry(first, count, found, dev))
        warnings.extend(_warnings(first, found, dev))
    return kernels, warnings


def _warnings(launch: Launch, tools: dict, dev: Device) -> list[str]:
    out = []
    if tools["spill_stores"] or tools["spill_loads"]:
        out.append(
            f"{launch.kernel}: {tools['spill_stores']} bytes spill stores, "
            f"{tools['spill_loads']} bytes spill loads on {dev.arch} ({launch.config})"
        )
    ptxas_regs = tools.get("ptxas_registers")
    if ptxas_regs is not None and ptxas_regs != tools["registers"]:
        out.append(
            f"{launch.kernel}: ptxas -v reports {ptxas_regs} registers, the cubin "
            f"{tools['registers']}"
        )
    return out
