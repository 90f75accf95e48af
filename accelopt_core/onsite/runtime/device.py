"""The evaluation child's runtime: device pinning, the memory limit and its watchdog, the
software versions recorded with every result, and the device probe.

Linux ``/proc`` is read for memory figures; elsewhere the watchdog sees nothing and only
``RLIMIT_AS`` (where available) limits memory.
"""

from __future__ import annotations

import os
import sys
import time

from ..protocol import result_dict
from . import stacks as nki_sdk

_WATCHDOG_PERIOD_S = 0.05


def pin_device(device) -> None:
    """Make ``device`` (an index or id; None/"" for the default) the only visible device:
    ``CUDA_VISIBLE_DEVICES`` (an index into an existing list is mapped through it) and
    ``NEURON_RT_VISIBLE_CORES``. Must run before torch / the Neuron runtime is imported."""
    if device is None or device == "":
        return
    device = str(device)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible and device.isdigit():
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if int(device) < len(ids):
            device = ids[int(device)]
    os.environ["CUDA_VISIBLE_DEVICES"] = device
    os.environ["NEURON_RT_VISIBLE_CORES"] = str(device)


def _statm_bytes(field: int, pid: int | str = "self") -> int | None:
    """Field of ``/proc/<pid>/statm`` (0: virtual size, 1: resident) in bytes, or None."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def limit_address_space(limit: int) -> None:
    """RLIMIT_AS = current address space + ``limit`` bytes (capped by the hard limit)."""
    try:
        import resource

        vm = _statm_bytes(0) or 0
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = vm + limit
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ImportError, ValueError, OSError):
        pass


def limit_memory(limit_mb: int, use_cuda: bool, ctx: dict) -> None:
    """Limit this process's memory to ``limit_mb`` MiB more than it uses now: ``RLIMIT_AS`` on
    CPU only (CUDA maps huge virtual ranges), and :func:`watch_memory` over this process."""
    if not use_cuda:
        limit_address_space(int(limit_mb) * 1024 * 1024)
    watch_memory(None, limit_mb, ctx)


def watch_memory(pid: int | None, limit_mb: int, ctx: dict) -> None:
    """A watchdog thread over process ``pid`` (None: this process; issue 10: the judge's watch
    over the candidate process): every 50 ms, exit when the supervisor (``ctx["supervisor"]``)
    is gone; when the resident memory of ``pid`` exceeds ``limit_mb`` MiB, emit a
    ``runtime_error`` "memory limit exceeded" through ``ctx["emitter"]``
    (:class:`.process.child.Emitter`), kill ``pid`` and exit with code 3. Stops when ``pid`` is gone."""
    import signal
    import threading

    limit = int(limit_mb) * 1024 * 1024
    emitter = ctx["emitter"]
    supervisor = ctx["supervisor"]

    def watch() -> None:
        while True:
            time.sleep(_WATCHDOG_PERIOD_S)
            if os.getppid() != supervisor:
                os._exit(1)
            rss = _statm_bytes(1, "self" if pid is None else pid)
            if rss is None:
                return
            if rss > limit:
                emitter.emit(
                    result_dict(
                        "runtime_error",
                        f"memory limit exceeded: resident memory {rss / 2**20:.0f} MiB > "
                        f"{limit_mb} MiB",
                        **ctx.get("env", {}),
                    )
                )
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                os._exit(3)

    threading.Thread(target=watch, name="accelopt-memory-watchdog", daemon=True).start()


def versions(torch=None, triton=None) -> dict:
    """``{"python", "torch", "triton", "numpy", "neuronxcc", "nki", "nki_api", "lnc"}``: those
    present (the modules given, installed distributions, the NKI SDK found by
    :func:`.runtime.stacks.versions_entry`, the logical-core setting ``NEURON_LOGICAL_NC_CONFIG``)."""
    import platform

    out = {"python": platform.python_version()}
    if torch is not None:
        out["torch"] = torch.__version__
    if triton is not None:
        out["triton"] = triton.__version__
    try:
        from importlib import metadata

        for dist in ("numpy", "neuronxcc"):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
    except ImportError:
        pass
    out.update(nki_sdk.versions_entry())
    lnc = os.environ.get("NEURON_LOGICAL_NC_CONFIG")
    if lnc:
        out["lnc"] = lnc
    return out


def _nki_probe() -> dict:
    """The probe of a target with an NKI SDK and no torch: NeuronCores or the simulator."""
    mode = nki_sdk.run_mode(None)
    return result_dict(
        "ok",
        "probe",
        device=nki_sdk.device_name(mode),
        devices=[nki_sdk.device_name(mode)],
        timing="neuron" if mode == "device" else "simulated",
        versions=versions(),
        nki_stack=nki_sdk.stack(),
    )


def probe(request: dict) -> dict:
    """Device names and versions, no candidate: an ``ok`` result with ``device``,
    ``devices`` (CUDA device names, else ``["cpu"]``), ``timing`` and ``versions`` (with the NKI
    SDK, when there is one); without torch, the NKI stack's probe where an NKI SDK is found,
    else ``runtime_error``."""
    pin_device(request.get("device"))
    try:
        import torch
    except ImportError as exc:
        if nki_sdk.detect_api()["api"] is not None:
            return _nki_probe()
        return result_dict(
            "runtime_error", f"torch is not installed for {sys.executable}: {exc}", device=None
        )
    names = []
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    try:
        import triton
    except ImportError:
        triton = None
    return result_dict(
        "ok",
        "probe",
        device=names[0] if names else "cpu",
        devices=names or ["cpu"],
        timing="cuda" if names else "interpreter",
        versions=versions(torch, triton),
        nki_stack=nki_sdk.stack(),
    )


def arm_hang_dump(delay_s: float):
    """After ``delay_s`` s, write every other thread's Python stack to stderr, most recent call
    first (the format :func:`.runtime.failures.line_from_text` reads the hang's line from); returns
    the timer's ``cancel``.

    Replaces ``faulthandler.dump_traceback_later``, whose C watchdog walks running threads'
    frames without the GIL and intermittently crashed the process with SIGSEGV just before
    the deadline, so a short timeout became a ``runtime_error`` (issue 14). This one holds the
    GIL; a thread stuck in C code holding the GIL gets no dump (the supervisor still kills it
    and reports ``timeout``). Cancel it before ``fork``."""
    import threading
    import traceback

    def dump() -> None:
        me = threading.get_ident()
        out = ["Timeout: stacks just before the deadline (most recent call first):"]
        for ident, frame in sys._current_frames().items():
            if ident != me:
                out.append(f"Thread {ident:#x}:")
                out.extend(reversed(traceback.format_stack(frame)))
        try:
            sys.stderr.write("\n".join(out) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    timer = threading.Timer(max(delay_s, 0.0), dump)
    timer.daemon = True
    timer.start()
    return timer.cancel


def gpu_visible(torch) -> bool:
    """True when a GPU can be used, judged without initialising CUDA: a CUDA/ROCm build of
    torch, a device node (``/dev/nvidia0``, ``/dev/kfd``) and ``CUDA_VISIBLE_DEVICES`` not
    empty or ``-1``."""
    version = getattr(torch, "version", None)
    if torch is None or not (getattr(version, "cuda", None) or getattr(version, "hip", None)):
        return False
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    try:
        nodes = os.listdir("/dev")
    except OSError:
        return False
    return "kfd" in nodes or any(n.startswith("nvidia") and n[6:].isdigit() for n in nodes)
