"""What an evaluation says about the GPU and the shapes it checked, in the words users read.

Two producers fill :attr:`~accelopt_core.onsite.protocol.EvalResult.metrics` on the target
(``/work/notes/contracts.md``; issues 21 and 22):

* ``metrics["gpu"]``: the compile stage's facts for the configured GPU (``device``, ``arch``
  such as ``sm_90``, ``compile_s`` in s, ``cached`` launches, ``warnings``) and one entry per
  distinct compiled launch in ``kernels``: ``registers`` per thread, ``spill_stores`` /
  ``spill_loads`` (bytes, ``ptxas -v``), ``local_bytes``, ``shared_bytes`` per block,
  ``threads`` per block, ``occupancy`` (``warps`` active per SM of ``max_warps``,
  ``percent``, ``limiter``: registers, shared memory, warps or blocks; the CUDA occupancy
  calculator's rules) and ``sass`` counts (``tensor_core`` instructions of kind
  ``tensor_core_op``, ``ldg128`` / ``ldg_narrow`` global loads, ``ldgsts`` = cp.async,
  ``tma`` = UTMALDG, ``stl`` / ``ldl`` = local-memory stores / loads);
* ``metrics["not_timed"]``: ``"the CPU interpreter cannot run this kernel (<reason>)"`` when
  the interpreter could not run a kernel that compiles for the GPU;
* ``metrics["derived_inputs"]``: ``used`` and ``skipped`` shapes, values and layouts derived
  from the harness's inputs (issue 29), each a correctness check, never timed; since issue 52
  also ``deferred`` (left by a budget to the property-based search) and, on a candidate's
  result, ``search`` (its seed, examples tried, budget and counterexample).

Everything here reads those dicts defensively (a missing or mistyped key is left out, never an
exception) and returns plain text; the CLI, the search report, the language server, the
planner's prompt and the optimization memory all use it, so they say the same thing. The
derived-inputs words live in :mod:`accelopt_core.derived_facts` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelopt_core.derived_facts import (  # noqa: F401  (re-exported)
    classes_text,
    deferred_lines,
    derived_classes,
    derived_deferred,
    derived_detail_lines,
    derived_facts,
    derived_rows,
    derived_search,
    derived_summary,
    grouped_reasons,
    number,
    search_line,
    search_lines,
)

__all__ = [
    "before_after",
    "classes_text",
    "compact_facts",
    "deferred_lines",
    "derived_classes",
    "derived_deferred",
    "derived_detail_lines",
    "derived_facts",
    "derived_search",
    "derived_summary",
    "facts_change",
    "gpu_lines",
    "grouped_reasons",
    "kernel_entries",
    "launch_line",
    "lens_text",
    "not_timed",
    "not_timed_line",
    "prompt_lines",
    "sass_text",
    "search_line",
    "search_lines",
    "spill_bytes",
    "spill_warnings",
]

#: What the user should do with a kernel the CPU interpreter cannot run.
NOT_TIMED_ADVICE = "time it on a GPU target"


def _int(value: Any) -> int:
    n = number(value)
    return int(n) if n is not None else 0


def _percent(pct: float) -> str:
    """``50`` or ``12.5`` (one decimal only when the value has one)."""
    return f"{pct:.0f}" if abs(pct - round(pct)) < 0.05 else f"{pct:.1f}"


def _gpu(metrics: Mapping[str, Any] | None) -> Mapping[str, Any]:
    gpu = (metrics or {}).get("gpu")
    return gpu if isinstance(gpu, Mapping) else {}


def _bytes(n: float) -> str:
    """``0 B``, ``512 B``, ``16 KiB``, ``1.5 MiB`` (binary units, as ptxas and NVIDIA's
    occupancy calculator count shared memory)."""
    if n < 1024:
        return f"{n:.0f} B"
    if n < 1024 * 1024:
        kib = n / 1024
        return f"{kib:.0f} KiB" if kib == int(kib) else f"{kib:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def kernel_entries(
    metrics: Mapping[str, Any] | None, kernel: str | None = None
) -> list[Mapping[str, Any]]:
    """The compiled launches of ``metrics["gpu"]["kernels"]`` (all, or only those of
    ``kernel``), in the producer's order; ``[]`` without device facts."""
    rows = _gpu(metrics).get("kernels")
    if not isinstance(rows, list):
        return []
    rows = [r for r in rows if isinstance(r, Mapping)]
    return [r for r in rows if kernel is None or r.get("kernel") == kernel]


def spill_bytes(entry: Mapping[str, Any]) -> int:
    """Spill stores + spill loads of one compiled launch, bytes (``ptxas -v``)."""
    return _int(entry.get("spill_stores")) + _int(entry.get("spill_loads"))


def _occupancy(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    occ = entry.get("occupancy")
    return occ if isinstance(occ, Mapping) else {}


def _occupancy_short(entry: Mapping[str, Any]) -> str | None:
    """``occupancy 50% (registers)``, or None without an occupancy."""
    occ = _occupancy(entry)
    pct = number(occ.get("percent"))
    if pct is None:
        return None
    limiter = occ.get("limiter")
    return f"occupancy {_percent(pct)}%" + (f" ({limiter})" if isinstance(limiter, str) else "")


def lens_text(metrics: Mapping[str, Any] | None, kernel: str) -> str | None:
    """One code-lens phrase for ``kernel``: ``sm_90: 44 regs · occupancy 50% (registers)``,
    with ``· spills 24 B`` when it spills and ``· 3 configs`` when several configs of it were
    compiled (the first one is shown: the launch the harness makes first). None without
    device facts for that kernel."""
    rows = kernel_entries(metrics, kernel)
    if not rows:
        return None
    first = rows[0]
    arch = _gpu(metrics).get("arch")
    parts = []
    regs = number(first.get("registers"))
    if regs is not None:
        parts.append(f"{regs:.0f} regs")
    occ = _occupancy_short(first)
    if occ:
        parts.append(occ)
    if spill_bytes(first):
        parts.append(f"spills {_bytes(spill_bytes(first))}")
    if len(rows) > 1:
        parts.append(f"{len(rows)} configs")
    head = f"{arch}: " if isinstance(arch, str) else ""
    return head + " · ".join(parts) if parts else None


def sass_text(sass: Mapping[str, Any] | None) -> str:
    """The SASS facts a kernel engineer reads, one phrase: ``tensor cores: 8 HGMMA · global
    loads: 4 × 128-bit, 0 narrower · cp.async (LDGSTS): 2 · TMA (UTMALDG): 0 · local memory:
    STL 0, LDL 0``; ``""`` without SASS counts."""
    if not isinstance(sass, Mapping) or not sass:
        return ""
    tc = _int(sass.get("tensor_core"))
    op = sass.get("tensor_core_op") if isinstance(sass.get("tensor_core_op"), str) else ""
    parts = [f"tensor cores: {tc} {op}".rstrip() if tc else "tensor cores: none"]
    parts.append(
        f"global loads: {_int(sass.get('ldg128'))} × 128-bit, "
        f"{_int(sass.get('ldg_narrow'))} narrower"
    )
    parts.append(f"cp.async (LDGSTS): {_int(sass.get('ldgsts'))}")
    parts.append(f"TMA (UTMALDG): {_int(sass.get('tma'))}")
    parts.append(f"local memory: STL {_int(sass.get('stl'))}, LDL {_int(sass.get('ldl'))}")
    return " · ".join(parts)


def launch_line(entry: Mapping[str, Any]) -> str:
    """One compiled launch's resources, one line: ``44 registers/thread · no spills · shared
    memory 0 B/block · 128 threads/block · occupancy 32/64 warps per SM (50%, limited by
    registers)``."""
    parts = []
    regs = number(entry.get("registers"))
    if regs is not None:
        parts.append(f"{regs:.0f} registers/thread")
    spills = spill_bytes(entry)
    parts.append(
        f"spills {_int(entry.get('spill_stores'))} B stored, {_int(entry.get('spill_loads'))} B "
        "loaded"
        if spills
        else "no spills"
    )
    shared = number(entry.get("shared_bytes"))
    if shared is not None:
        parts.append(f"shared memory {_bytes(shared)}/block")
    threads = number(entry.get("threads"))
    if threads is not None:
        parts.append(f"{threads:.0f} threads/block")
    occ = _occupancy(entry)
    pct = number(occ.get("percent"))
    if pct is not None:
        warps = f"{_int(occ.get('warps'))}/{_int(occ.get('max_warps'))} warps per SM, "
        limiter = occ.get("limiter")
        why = f", limited by {limiter}" if isinstance(limiter, str) else ""
        parts.append(f"occupancy {warps if occ.get('max_warps') else ''}{_percent(pct)}%{why}")
    return " · ".join(parts)


def _device_head(gpu: Mapping[str, Any]) -> str:
    """``GPU H100 SXM5 (sm_90), compiled ahead of time in 0.41 s, 3 launches from Triton's
    cache``."""
    device, arch = gpu.get("device"), gpu.get("arch")
    head = f"GPU {device or 'unknown'}" + (f" ({arch})" if isinstance(arch, str) else "")
    compile_s = number(gpu.get("compile_s"))
    if compile_s is not None:
        head += f", compiled ahead of time in {compile_s:.2f} s"
    cached = _int(gpu.get("cached"))
    if cached:
        head += f", {cached} launch{'es' if cached != 1 else ''} from Triton's cache"
    return head


def gpu_lines(metrics: Mapping[str, Any] | None) -> list[str]:
    """The device facts as text lines (``accelopt profile``, the search report): the device
    line, then per compiled launch ``kernel [config] grid 16×1×1:`` with its resources
    (:func:`launch_line`) and, indented, its SASS facts (:func:`sass_text`); ``[]`` without
    ``metrics["gpu"]``. The producer's warnings are not repeated here (they are warnings)."""
    gpu = _gpu(metrics)
    if not gpu:
        return []
    lines = [_device_head(gpu) + ":"]
    for entry in kernel_entries(metrics):
        name = entry.get("kernel") or "kernel"
        config = f" [{entry['config']}]" if entry.get("config") else ""
        grid = entry.get("grid")
        where = ""
        if isinstance(grid, list) and grid:
            where = " grid " + "×".join(str(_int(g)) for g in grid)
        lines.append(f"  {name}{config}{where}: {launch_line(entry)}")
        sass = sass_text(entry.get("sass") if isinstance(entry.get("sass"), Mapping) else None)
        if sass:
            lines.append(f"    SASS: {sass}")
    return lines


def spill_warnings(metrics: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """``(kernel, message)`` for each compiled launch that spills registers to local memory:
    ``softmax_kernel spills 24 B stored, 24 B loaded on sm_90 (H100 SXM5) [BLOCK_SIZE=4096,
    num_warps=4]: 255 registers/thread; local memory is as slow as global memory``. Spills are
    a warning, never a failure (issue 21)."""
    gpu = _gpu(metrics)
    out = []
    for entry in kernel_entries(metrics):
        if not spill_bytes(entry):
            continue
        name = str(entry.get("kernel") or "kernel")
        where = f" on {gpu.get('arch')} ({gpu.get('device')})" if gpu.get("arch") else ""
        config = f" [{entry['config']}]" if entry.get("config") else ""
        regs = number(entry.get("registers"))
        why = f": {regs:.0f} registers/thread" if regs is not None else ""
        out.append(
            (
                name,
                f"{name} spills {_int(entry.get('spill_stores'))} B stored, "
                f"{_int(entry.get('spill_loads'))} B loaded{where}{config}{why}; local memory "
                "is as slow as global memory",
            )
        )
    return out


def not_timed(metrics: Mapping[str, Any] | None) -> str | None:
    """``metrics["not_timed"]`` (``the CPU interpreter cannot run this kernel (<reason>)``):
    the kernel compiles for the GPU but was not timed; None otherwise."""
    value = (metrics or {}).get("not_timed")
    return value if isinstance(value, str) and value.strip() else None


def not_timed_line(metrics: Mapping[str, Any] | None) -> str | None:
    """``not timed: the CPU interpreter cannot run this kernel (<reason>); time it on a GPU
    target``, or None when the kernel was not refused by the interpreter."""
    reason = not_timed(metrics)
    return f"not timed: {reason}; {NOT_TIMED_ADVICE}" if reason else None


def compact_facts(metrics: Mapping[str, Any] | None) -> dict[str, Any]:
    """The device facts worth remembering with an experience (a small JSON dict): ``arch``,
    ``device`` and per kernel (its first compiled launch) ``registers``, ``spill_bytes``,
    ``shared_bytes``, ``occupancy`` (%), ``limiter`` and the SASS counts; ``{}`` without
    device facts."""
    gpu = _gpu(metrics)
    kernels: dict[str, Any] = {}
    for entry in kernel_entries(metrics):
        name = str(entry.get("kernel") or "kernel")
        if name in kernels:
            continue
        occ = _occupancy(entry)
        sass = entry.get("sass") if isinstance(entry.get("sass"), Mapping) else {}
        kernels[name] = {
            "registers": _int(entry.get("registers")),
            "spill_bytes": spill_bytes(entry),
            "shared_bytes": _int(entry.get("shared_bytes")),
            "occupancy": number(occ.get("percent")),
            "limiter": occ.get("limiter") if isinstance(occ.get("limiter"), str) else None,
            "sass": {k: v for k, v in sass.items() if isinstance(v, (int, str))},
        }
    if not kernels:
        return {}
    return {"arch": gpu.get("arch"), "device": gpu.get("device"), "kernels": kernels}


def before_after(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> dict[str, Any]:
    """An experience's GPU facts: ``{"before": compact_facts(slow), "after":
    compact_facts(fast)}`` from the two results' metrics; ``{}`` when neither has device
    facts."""
    b, a = compact_facts(before), compact_facts(after)
    return {"before": b, "after": a} if b or a else {}


def _arrow(before: Any, after: Any, unit: str = "") -> str:
    return f"{before}{unit}" if before == after else f"{before}{unit}→{after}{unit}"


def _pct(value: Any) -> str:
    n = number(value)
    return "?" if n is None else _percent(n)


def facts_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[str]:
    """What a rewrite changed on the GPU, one line per kernel of :func:`compact_facts` dicts:
    ``softmax_kernel on sm_90: registers 44→32, occupancy 50%→75% (registers→warps), spills 0
    B, shared memory 0→16384 B, tensor cores 0→8 HGMMA``; ``[]`` when either lacks facts."""
    if not before or not after:
        return []
    b_k, a_k = before.get("kernels") or {}, after.get("kernels") or {}
    arch = after.get("arch") or before.get("arch")
    lines = []
    for name in [k for k in a_k if k in b_k]:
        b, a = b_k[name], a_k[name]
        parts = [
            f"registers {_arrow(b.get('registers'), a.get('registers'))}",
            f"occupancy {_arrow(_pct(b.get('occupancy')), _pct(a.get('occupancy')), '%')}"
            f" ({_arrow(b.get('limiter'), a.get('limiter'))})",
            f"spills {_arrow(b.get('spill_bytes'), a.get('spill_bytes'))} B",
            f"shared memory {_arrow(b.get('shared_bytes'), a.get('shared_bytes'))} B",
        ]
        bs, as_ = b.get("sass") or {}, a.get("sass") or {}
        for key, label in (("tensor_core", "tensor cores"), ("ldg128", "128-bit loads")):
            if bs.get(key) or as_.get(key):
                parts.append(f"{label} {_arrow(bs.get(key, 0), as_.get(key, 0))}")
        where = f" on {arch}" if arch else ""
        lines.append(f"{name}{where}: " + ", ".join(parts))
    return lines


def prompt_lines(metrics: Mapping[str, Any] | None) -> list[str]:
    """The planner's view of the device facts (see the glossary entries in
    ``prompts/profile_glossary.txt``): the device, and per compiled launch its resources,
    occupancy limiter and SASS counts, plus the not-timed reason; ``[]`` without them."""
    lines = []
    gpu = _gpu(metrics)
    if gpu:
        lines.append(f"compiled for {gpu.get('device') or '?'} ({gpu.get('arch') or '?'}):")
        for entry in kernel_entries(metrics):
            config = f" [{entry['config']}]" if entry.get("config") else ""
            lines.append(f"- {entry.get('kernel') or 'kernel'}{config}: {launch_line(entry)}")
            sass = sass_text(entry.get("sass") if isinstance(entry.get("sass"), Mapping) else None)
            if sass:
                lines.append(f"  SASS: {sass}")
    reason = not_timed(metrics)
    if reason:
        lines.append(f"not timed: {reason}; reason from the device facts and the code")
    summary = derived_summary(metrics)
    if summary:
        lines.append(f"inputs: {summary} (correct results are required on every one)")
    return lines
