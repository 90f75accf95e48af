"""The compile stage's process and the judge's handle on it (issue 21, item 1).

The judge forks it right after the candidate and reference processes (:func:`spawn`), so it
runs while the interpreter evaluation does. It executes the candidate's module, so it gets the
candidate's isolation (:func:`..contestant.process.isolate`: fds closed, capabilities dropped,
private directories, death with the judge; ``RLIMIT_AS`` on CPU; the evaluation's deadline).
In it, triton is switched to compile mode (:func:`.twin.switch_to_compiler`: the warm
parent's prepared compile-mode modules, else a fresh import; the compiled extension and
Triton's on-disk cache are kept) and :func:`.compile.run_stage` compiles every launch. On a CUDA target the device found there is
compiled for; a name that differs from the request's ``gpu`` is a warning.

Its one answer is data only, checked here (:func:`_checked`): a candidate can make its own
stage fail, never another candidate pass. :func:`merge` adds it to the evaluation's result:
a compile or launch failure replaces a passing (or interpreter-limited) verdict; a kernel the
interpreter cannot run keeps its failure status and gains ``metrics["gpu"]`` and
``metrics["not_timed"]``. Standard library only at module level.
"""

from __future__ import annotations

import os
import time

from ..protocol import result_dict
from ..runtime.channel import Channel, ChannelError
from ..runtime.interpreter import INTERP, WAY_OUT
from .devices import Device, from_runtime, lookup
from .twin import switch_to_compiler

#: Longest Nsight Compute run, s; longest wait of the stage for the judge's go, s.
NCU_TIMEOUT_S, NCU_WAIT_S = 120.0, 3600.0


def device_for(req: dict) -> tuple[Device | None, str | None]:
    """``(device, warning)`` for the request's ``gpu`` (default :data:`.devices.DEFAULT`
    when the key is absent; ``None``/``"none"``: no stage); an unknown name gives no stage
    and a warning."""
    from .devices import DEFAULT

    name = req.get("gpu", DEFAULT)
    try:
        return lookup(name), None
    except KeyError as exc:
        return None, f"no compile stage: {exc.args[0]}"


def _cuda_device(requested: Device, warnings: list[str]) -> Device:
    """On a CUDA target: the table's device for the GPU there (a warning when it differs from
    ``requested``, or when it is not in the table and ``requested`` is kept)."""
    import torch

    name = torch.cuda.get_device_name(0)
    found = from_runtime(name, torch.cuda.get_device_capability(0))
    if found is None:
        warnings.append(
            f"the GPU here ({name}) is not in the device table; compiled for {requested.name}"
        )
        return requested
    if found.name != requested.name:
        warnings.append(
            f"the GPU here is {name} ({found.arch}); the setting names "
            f"{requested.name}: compiled for {found.name}"
        )
    return found


def _body(fds: tuple[int, ...], setup: dict) -> None:
    """The stage process after the fork; never returns."""
    import faulthandler
    import signal

    from ..contestant.process import isolate
    from ..runtime.device import limit_address_space
    from ..sandbox.policy import close_unix_sockets
    from .ncu import ncu_path

    try:
        fds = isolate(fds, setup["dirs"], signal.SIGKILL, setup["judge"])
        if not (setup["use_cuda"] and ncu_path()):  # Nsight Compute, run from here, is not
            close_unix_sockets(bool(setup["use_cuda"]))  # known to do without them: untried
        # Silent on a crash: the candidate process runs the same launcher beside this one and
        # writes its own dump to the same stderr, and two dumps written at once interleave
        # mid-line, so the supervisor found no candidate line in either (a SIGSEGV reported
        # without its line under load). This process's death is reported as a warning.
        faulthandler.disable()
        if not setup["use_cuda"]:
            limit_address_space(int(setup["memory_limit_mb"]) * 1024 * 1024)
        chan = Channel(*fds)
        if not setup["use_cuda"]:  # issue 50, item 5: the judge sends the inputs (or None)
            setup["receive_inputs"] = lambda: chan.recv(float(setup["timeout_s"]))
        switch_to_compiler()
        warnings: list[str] = []
        if setup["use_cuda"]:
            setup["gpu"] = _cuda_device(setup["gpu"], warnings)
        from ..sandbox.writes import guard_process
        from .compile import run_stage

        denied: list[dict] = []  # issue 53: it runs the candidate's code too
        guard_process(setup["dirs"], denied.append)

        try:
            answer = run_stage(setup)
        except Exception as exc:  # noqa: BLE001 - no verdict from a stage that broke
            answer = {"warning": f"compile stage failed: {type(exc).__name__}: {exc}"[:400]}
        if "gpu" in answer:
            answer["gpu"]["warnings"] = warnings + answer["gpu"]["warnings"]
        if denied:  # the judge rejects the candidate, naming the first (issue 53)
            answer.update(denied[0])
        ncu = _ncu_path(setup, answer)
        answer["ncu_ready"] = ncu is not None
        chan.send(answer)
        if ncu is not None:
            _serve_ncu(chan, setup, answer, ncu)
    finally:
        os._exit(0)


def _ncu_path(setup: dict, answer: dict) -> str | None:
    """``ncu`` when this stage may profile (a CUDA target with ``ncu`` on PATH and kernels
    compiled), else None."""
    from .ncu import ncu_path

    if not setup["use_cuda"] or not answer.get("gpu", {}).get("kernels"):
        return None
    return ncu_path()


def _serve_ncu(chan: Channel, setup: dict, answer: dict, ncu: str) -> None:
    """Wait for the judge's go (sent after its timing, for a passing candidate), run Nsight
    Compute on the compiled kernels (:func:`.ncu.profile`) and send ``{"ncu": ...}`` or
    ``{"warning": ...}``."""
    from .ncu import profile

    try:
        go = chan.recv(NCU_WAIT_S)
    except ChannelError:
        return
    if not go.get("ncu"):
        return
    kernels = [k["kernel"] for k in answer["gpu"]["kernels"]]
    timeout = max(1.0, min(float(go.get("timeout_s") or NCU_TIMEOUT_S), NCU_TIMEOUT_S))
    chan.send(
        profile(dict(setup, device="cuda", tmp=setup["dirs"].get("tmp")), kernels, ncu, timeout)
    )


#: How long :meth:`StagePeer.failure` looks for the stage's answer, s (a poll, not a wait).
POLL_S = 0.001


class StagePeer:
    """The judge's end of the stage process: its pid, channel and device."""

    def __init__(self, proc, device: Device, watch=None, wants_inputs: bool = False) -> None:
        self.proc, self.device = proc, device
        self._raw: dict | None = None  # its answer, once received (:meth:`settle`)
        #: its own directories as made (issue 53: :func:`..sandbox.writes.peer_watch`)
        self.watch = watch
        #: issue 50, item 5: the stage waits for one ``{"inputs": ...}`` message (off CUDA)
        self.wants_inputs = wants_inputs

    def feed(self, ref, seed: int) -> None:
        """Send the stage the inputs of each of its calls (``get_inputs(seed, device)``, then
        those of the first :data:`.compile.MAX_SHAPES` of ``BENCH["shapes"]``) as the
        reference process's segments (:meth:`.judge.reference.Reference.stage_inputs`, kept
        by the warm worker's store), so the stage makes no values of its own; or None, and it
        makes them as before (a backward harness, a harness that raises on one). Once, and
        only to a stage that waits for it. Raises Failure when the reference process dies or
        hangs."""
        from .compile import MAX_SHAPES

        if not self.wants_inputs:
            return
        shapes = [None, *(ref.shapes or [])[:MAX_SHAPES]]
        segs = None
        try:
            segs = None if ref.backward else ref.stage_inputs(seed, shapes)
        finally:  # the stage hears once, whatever happened
            self.wants_inputs = False
            try:
                self.proc.chan.send({"inputs": segs})
            except ChannelError:
                pass  # the stage is gone: its answer says so
            for seg in segs or []:
                seg.close()

    def release(self) -> None:
        """Tell a stage still waiting for its inputs to make them itself (the evaluation
        ended before :meth:`feed`)."""
        if self.wants_inputs:
            self.wants_inputs = False
            try:
                self.proc.chan.send({"inputs": None})
            except ChannelError:
                pass

    def settle(self, deadline: float) -> None:
        """Wait for the stage's answer before the timing starts, so that compiling (seconds of
        CPU for a new kernel) never competes with the candidate's timed calls: at most half
        the time left before ``deadline`` (monotonic s), at least 5 s; a stage still busy then
        is answered for later by :meth:`answer`, as is one that died."""
        if self._raw is not None:  # :meth:`failure` received it already
            return
        left = deadline - time.monotonic()
        try:
            self._raw = self.proc.chan.recv(max(min(left, max(5.0, left / 2)), 0.01))
        except ChannelError:
            pass

    def failure(self) -> dict | None:
        """The stage's compile or launch failure (an ``incorrect`` result dict) once the stage
        has answered with one, without waiting for it (the answer is kept for :meth:`answer`);
        None while it works, when it answered with facts, or when its channel broke (then
        :meth:`answer` says so)."""
        if self._raw is None:
            try:
                self._raw = self.proc.chan.recv(POLL_S)
            except ChannelError:
                return None
        return _checked(self._raw, self.device).get("failure")

    def answer(self, deadline: float, result: dict | None = None) -> dict:
        """The stage's checked answer (:func:`_checked`), waiting until ``deadline``
        (monotonic s) unless :meth:`settle` already received it; a stage that dies or does not
        answer in time gives a warning. With a passing ``result`` on a stage that can run Nsight
        Compute, also its ``"ncu"`` facts (:meth:`ncu`)."""
        raw = self._raw
        if raw is None:
            try:
                raw = self.proc.chan.recv(max(deadline - time.monotonic(), 0.01))
            except ChannelError as exc:
                why = "did not finish in time" if exc.kind == "timeout" else "died"
                return facts_of(self.device, f"the compile stage for {self.device.name} {why}")
        answer = _checked(raw, self.device)
        written = self._written(raw)
        if written is not None:
            return {"failure": written}
        if raw.get("ncu_ready") is True and (result or {}).get("status") == "ok":
            if "gpu" in answer:
                self.ncu(answer, deadline)
        return answer

    def _written(self, raw: dict) -> dict | None:
        """Issue 53: the ``file written`` rejection when the candidate's code, run by the
        stage, tried to write outside the evaluation's directories (``raw``: the stage's
        answer, :func:`..sandbox.writes.guard`) or created, changed or removed a file in the
        stage's own directories (:attr:`watch`), else None."""
        from ..judge.rules import rejected
        from ..sandbox.writes import DENIED, WRITE_RULE, denied_message

        when = "in the compile stage"
        if DENIED in raw:
            return rejected(WRITE_RULE, denied_message(raw, when)).result
        found = self.watch.seen(when) if self.watch is not None else None
        return None if found is None else rejected(WRITE_RULE, found).result

    def ncu(self, answer: dict, deadline: float) -> None:
        """Ask the stage for Nsight Compute facts (after the timing: its replays would disturb
        it) and put them in ``answer["ncu"]`` (:func:`.ncu.checked`), or a warning in
        ``answer["gpu"]["warnings"]``."""
        from .ncu import checked

        left = deadline - time.monotonic()
        if left < 2.0:
            answer["gpu"]["warnings"].append("Nsight Compute skipped: no time left")
            return
        try:
            self.proc.chan.send({"ncu": True, "timeout_s": min(left - 1.0, NCU_TIMEOUT_S)})
            raw = self.proc.chan.recv(left)
        except ChannelError as exc:
            answer["gpu"]["warnings"].append(f"Nsight Compute gave no answer ({exc.kind})")
            return
        facts = checked(raw.get("ncu"))
        if facts is None:
            warning = str(raw.get("warning") or "Nsight Compute sent malformed facts")[:400]
            answer["gpu"]["warnings"].append(warning)
        else:
            answer["ncu"] = facts

    def stop(self) -> None:
        """Kill and reap the stage process, close the channel."""
        self.proc.kill()
        self.proc._wait(5.0)
        self.proc.chan.close()


def spawn(req: dict, ctx: dict, use_cuda: bool, dirs: dict) -> StagePeer | None:
    """Fork the stage process for the request's ``gpu`` (None: no stage). Call with the
    candidate and reference processes, before CUDA is initialised."""
    from ..judge.peers import Candidate, fork_peer
    from ..runtime.loading import project_of
    from ..sandbox.writes import peer_dirs, peer_watch

    device, warning = device_for(req)
    if device is None:
        if warning:
            ctx.setdefault("gpu_warnings", []).append(warning)
        return None
    setup = {
        "candidate_source": req["candidate_source"],
        "harness_source": req["harness_source"],
        "entry": req["entry"],
        "source_name": req.get("source_name"),
        "cand_file": ctx["cand_file"],
        "project": project_of(req),
        "seed": (req.get("seeds") or [1])[0],
        "gpu": device,
        "use_cuda": use_cuda,
        "dirs": peer_dirs(dirs, "stage"),  # issue 53: outside the candidate's directories
        "memory_limit_mb": int(req.get("memory_limit_mb") or 8192),
        "judge": os.getpid(),
        "timeout_s": float(req.get("timeout_s") or 120.0),
    }
    watch = peer_watch(setup["dirs"])  # issue 53: before the stage runs the candidate's code
    proc = fork_peer(dict(req), ctx, lambda fds: _body(fds, setup), Candidate)
    return StagePeer(proc, device, watch, wants_inputs=not use_cuda)


_KERNEL_KEYS = {
    "kernel": str,
    "config": str,
    "grid": list,
    "launches": int,
    "registers": int,
    "spill_stores": int,
    "spill_loads": int,
    "local_bytes": int,
    "shared_bytes": int,
    "threads": int,
    "occupancy": dict,
    "sass": dict,
}


def facts_of(device: Device, warning: str) -> dict:
    """An answer without kernel facts: ``{"gpu": {... "kernels": [], "warnings": [warning]}}``."""
    return {
        "gpu": {
            "device": device.name,
            "arch": device.arch,
            "compile_s": 0.0,
            "cached": 0,
            "kernels": [],
            "warnings": [warning],
        }
    }


def _checked(raw: dict, device: Device) -> dict:
    """The stage's answer, kept only in the contract's shape (types checked, sizes bounded):
    ``{"gpu": ...}``, ``{"failure": incorrect result}`` or ``{"warning": text}``."""
    if isinstance(raw.get("failure"), dict):
        fail = raw["failure"]
        msg = str(fail.get("message") or "")[:1200]
        line = fail.get("line") if type(fail.get("line")) is int else None
        if msg.startswith(("does not compile for ", "cannot launch on ")):
            return {"failure": result_dict("incorrect", msg, line=line)}
        return facts_of(device, "the compile stage sent a malformed failure")
    gpu = raw.get("gpu")
    if not isinstance(gpu, dict):
        return facts_of(device, str(raw.get("warning") or "the compile stage sent no facts")[:400])
    kernels = [
        {k: v for k, v in entry.items() if k in _KERNEL_KEYS and isinstance(v, _KERNEL_KEYS[k])}
        for entry in (gpu.get("kernels") or [])[:64]
        if isinstance(entry, dict)
    ]
    out = {
        "device": str(gpu.get("device") or device.name)[:40],
        "arch": str(gpu.get("arch") or device.arch)[:12],
        "compile_s": float(gpu.get("compile_s") or 0.0),
        "cached": int(gpu.get("cached") or 0),
        "kernels": kernels,
        "warnings": [str(w)[:400] for w in (gpu.get("warnings") or [])[:20]],
    }
    return {"gpu": out}


def interpreter_limit(result: dict) -> str | None:
    """The reason when ``result`` failed because the CPU interpreter cannot run the kernel
    (:mod:`..runtime.interpreter` named it), else None."""
    msg = str(result.get("message") or "")
    if result.get("status") == "ok" or INTERP not in msg:
        return None
    reason = msg.split(WAY_OUT)[0].strip().rstrip(".")
    return reason.replace(INTERP, "the interpreter")[:400]


def merge(result: dict, answer: dict | None, ctx: dict) -> dict:
    """``result`` (the evaluation's) with the stage's ``answer``: a compile or launch failure
    is the verdict (the env fields kept), except over the candidate's own ``rejected`` (a
    hack) and, off the GPU (``ctx["interpreter"]`` not false), its own ``compile_error`` (its
    source does not compile even for the interpreter; on a CUDA target the same kernel failed
    to compile there, and the verdict reads as it does off the GPU). That kernel never runs on
    the GPU, so an ``incorrect``, ``runtime_error`` or ``timeout`` of its interpreted run is
    replaced, and the judge may stop that run as soon as the stage's failure is known
    (:meth:`StagePeer.failure`): it makes the first call of every specialization first, where
    a compile error or a hack shows (:func:`.evaluation._run`). Facts go to
    ``metrics["gpu"]``; an interpreter-limited failure also gets ``metrics["not_timed"]``.
    Warnings without facts go to ``metrics["gpu"]["warnings"]``."""
    pending = ctx.pop("gpu_warnings", [])
    if answer is None:
        return result
    limited = interpreter_limit(result)
    if "failure" in answer:
        status = result.get("status")
        off_gpu = ctx.get("interpreter") is not False
        if status == "rejected" or (off_gpu and status == "compile_error"):
            return result
        env = {k: result[k] for k in ("device", "versions") if k in result}
        return dict(answer["failure"], **env)
    metrics = result.setdefault("metrics", {})
    gpu = answer["gpu"]
    gpu["warnings"] = pending + gpu.get("warnings", [])
    metrics["gpu"] = gpu
    if answer.get("ncu"):
        metrics["ncu"] = answer["ncu"]
    if limited and gpu.get("kernels"):
        metrics["not_timed"] = f"the CPU interpreter cannot run this kernel ({limited})"
    return result
