"""``accelopt target check [TARGET]``: prove that a target works end to end.

Connects to the target (``local``, ``ssh://...``, ``ray://...`` or ``ray:auto``; default: the
configured ``accelopt.target``), reports the device names and the python / torch / triton (or
neuronxcc) versions found there, then evaluates one tiny probe kernel with its harness through
the shipped worker and prints the result's summary. The probes are kernel files shipped as package
data, ``accelopt_core/onsite/probes/triton_add.py`` (element-wise add) and ``nki_add.py`` (used
where the target has the Neuron SDK and no Triton). Exit status 0 when the kernel came back
correct, 1 otherwise (with the reason); ``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from importlib import resources
from typing import Any

from rich.console import Console

from accelopt_cli.render_target import print_target_report
from accelopt_core.onsite.protocol import EvalRequest
from accelopt_core.settings import Settings

#: The probe kernels (package data under ``accelopt_core/onsite/probes/``): backend ->
#: (file name, BENCH entry). Each is a kernel file with its harness, sent as a user's file is.
PROBES: dict[str, tuple[str, str]] = {
    "triton": ("triton_add.py", "add"),
    "nki": ("nki_add.py", "tensor_add"),
}


def probe_source(backend: str) -> str:
    """The source of the probe kernel file for ``backend`` ("triton" or "nki"), read from the
    installed package. Raises KeyError for another backend."""
    name, _ = PROBES[backend]
    probes = resources.files("accelopt_core.onsite").joinpath("probes")
    return probes.joinpath(name).read_text("utf-8")


def add_target_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``target check [TARGET] [--settings FILE] [--json]`` to the ``accelopt`` parser.

    ``TARGET`` lands in ``args.target`` (the same destination as ``--target`` of the other
    commands), so the CLI's settings merge applies it."""
    target = subparsers.add_parser("target", help="check that a target works end to end")
    sub = target.add_subparsers(dest="target_command", required=True)
    check = sub.add_parser(
        "check",
        help="connect, report devices and versions, run one tiny kernel through the worker",
    )
    check.add_argument(
        "target",
        nargs="?",
        help="local | ssh://[user@]host[:port] | ray://host:port | ray:auto "
        "(default: the configured accelopt.target)",
    )
    check.add_argument(
        "--settings", metavar="FILE", help="JSON file with the accelopt settings section"
    )
    check.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    check.add_argument(
        "--timeout-s", type=float, default=None, help="evaluation timeout in s (default: settings)"
    )
    return target


def run_target_command(
    args: argparse.Namespace,
    settings: Settings,
    *,
    out: Console | None = None,
    err: Console | None = None,
) -> int:
    """Run ``accelopt target check``; returns the exit status (0 ok, 1 failure).

    Never raises for an unusable target: the reason is printed (stderr, or the JSON object's
    ``error`` with ``--json``). ``out`` / ``err`` default to consoles on stdout / stderr."""
    report = asyncio.run(check_target(settings, timeout_s=getattr(args, "timeout_s", None)))
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2, default=str))
    else:
        print_target_report(out or Console(), err or Console(stderr=True), report)
    return 0 if report["ok"] else 1


async def check_target(settings: Settings, *, timeout_s: float | None = None) -> dict[str, Any]:
    """Connect to ``settings.target``, probe it and evaluate the probe kernel (Triton, or NKI
    where the target has the Neuron SDK and no Triton).

    Returns a JSON-ready dict: ``target``, ``ok`` (bool), ``info`` (device names, versions),
    ``fingerprint``, ``capacity``, ``kernel`` ("triton" or "nki"), ``result``
    (:meth:`EvalResult.to_dict`), ``summary`` (one line), ``sdk`` (the NKI SDK found:
    ``{"api", "version"}``) and, where the target has both Triton and an NKI SDK, ``nki``
    (``result``, ``summary``, ``ok`` of the NKI probe, simulated without a NeuronDevice), ``connect_s`` and ``eval_s``
    (seconds), ``error`` (a message when the target could not be used), ``warnings`` (when
    closing the target failed). Never raises for an unusable target."""
    from accelopt_core.targets import make_target

    report: dict[str, Any] = {"target": settings.target, "ok": False}
    target = None
    try:
        target = make_target(settings)
        await _check(target, settings, timeout_s, report)
    except Exception as exc:  # TargetError and anything unexpected: a message, not a traceback
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if target is not None:
            try:
                await target.close()
            except Exception as exc:  # closing must not hide the verdict
                report.setdefault("warnings", []).append(f"closing the target: {exc}")
    return report


async def _check(
    target: Any, settings: Settings, timeout_s: float | None, report: dict[str, Any]
) -> None:
    """Probe ``target`` and evaluate the probe kernel on it, filling ``report`` as it goes (so
    that what was learnt before a failure is kept). Raises what the target raises."""
    t0 = time.perf_counter()
    info = await _probe(target)
    report["connect_s"] = round(time.perf_counter() - t0, 3)
    report["info"] = info
    report["fingerprint"] = target.fingerprint
    report["capacity"] = target.capacity
    has_nki = info.get("nki") or info.get("neuronxcc")
    backend = "nki" if has_nki and not info.get("triton") else "triton"
    report["kernel"] = backend
    result = await target.evaluate(_check_request(settings, backend, timeout_s))
    report["result"] = result.to_dict()
    report["summary"] = result.summary()
    report["eval_s"] = result.eval_s
    report["ok"] = result.ok
    if not result.ok:
        report["error"] = f"the check kernel failed: {result.summary()}"
    sdk = nki_sdk(info, result.versions)
    if sdk:
        report["sdk"] = sdk
    if sdk and backend == "triton":
        nki = await target.evaluate(_check_request(settings, "nki", timeout_s))
        report["nki"] = {"result": nki.to_dict(), "summary": nki.summary(), "ok": nki.ok}


def nki_sdk(info: dict[str, Any], versions: dict[str, Any]) -> dict[str, Any] | None:
    """The NKI SDK the target has, from the worker's versions (else the target's probe):
    ``{"api": "nki" | "neuronxcc.nki", "version": str}``, or None without one."""
    api = versions.get("nki_api")
    if api:
        key = "nki" if api == "nki" else "neuronxcc"
        return {"api": api, "version": versions.get(key)}
    for key, api in (("nki", "nki"), ("neuronxcc", "neuronxcc.nki")):
        if info.get(key):
            return {"api": api, "version": info[key]}
    return None


def _check_request(settings: Settings, backend: str, timeout_s: float | None) -> EvalRequest:
    from accelopt_core.onsite.judge.roofline import peak_table

    source = probe_source(backend)
    ev = settings.evaluation
    return EvalRequest(
        candidate_source=source,
        harness_source=source,
        entry=PROBES[backend][1],
        seeds=[1, 2],
        warmup_ms=min(ev.warmup_ms, 10.0),
        rep_ms=min(ev.rep_ms, 20.0),
        timeout_s=timeout_s or ev.timeout_s,
        memory_limit_mb=ev.memory_limit_mb,
        peaks=peak_table(),
        source_name="accelopt_check_add.py",
        gpu=settings.gpu_name,  # issue 21: the check compiles for the configured GPU too
    )


async def _probe(target: Any) -> dict[str, Any]:
    """The target's own probe (ssh, ray), else a worker probe on this machine (local)."""
    probe = getattr(target, "probe", None)
    if probe is not None:
        return dict(await probe())
    from accelopt_core.targets.shipping import decode_probe, encode_stdin, worker_argv

    proc = await asyncio.create_subprocess_exec(
        *worker_argv(sys.executable),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(encode_stdin({"probe": True})), 120)
    data = decode_probe(out) or {}
    versions = data.get("versions") or {}
    devices = [str(d) for d in data.get("devices") or []]
    return {
        "python": versions.get("python"),
        "torch": versions.get("torch"),
        "triton": versions.get("triton"),
        "neuronxcc": versions.get("neuronxcc"),
        "nki": versions.get("nki"),
        "device_names": devices or ["cpu"],
        "executable": sys.executable,
    }


__all__ = [
    "PROBES",
    "add_target_parser",
    "check_target",
    "nki_sdk",
    "probe_source",
    "run_target_command",
]
