"""``accelopt target check [TARGET]``: prove that a target works end to end.

Connects to the target (``local``, ``ssh://...``, ``ray://...`` or ``ray:auto``; default: the
configured ``accelopt.target``), reports the device names and the python / torch / triton (or
neuronxcc) versions found there, then evaluates one tiny built-in kernel with its harness (a
Triton element-wise add; an NKI add where the target has the Neuron SDK and no Triton) through
the shipped worker and prints the result's summary. Exit status 0 when the kernel came back
correct, 1 otherwise (with the reason); ``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.settings import Settings

#: The built-in Triton check kernel: element-wise add of 1000 floats, with its harness.
TRITON_CHECK_KERNEL = """\
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    return out


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(1000, generator=g).to(device), torch.randn(1000, generator=g).to(device))


def reference(x, y):
    return x + y


BENCH = {"entry": add, "flops": lambda x, y: x.numel(),
         "bytes": lambda x, y: 3 * x.numel() * x.element_size()}
"""

#: The built-in NKI check kernel (Trainium): add of two (128, 512) float32 tiles.
NKI_CHECK_KERNEL = """\
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def add_kernel(a_input, b_input):
    c_tile = nl.add(nl.load(a_input), nl.load(b_input))
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nl.store(c_output, value=c_tile)
    return c_output


def add(a, b):
    return add_kernel(a, b)


def get_inputs(seed: int, device: str) -> tuple:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((128, 512)).astype(np.float32),
            rng.standard_normal((128, 512)).astype(np.float32))


def reference(a, b):
    return a + b


BENCH = {"entry": add, "flops": lambda a, b: a.size, "bytes": lambda a, b: 3 * a.nbytes}
"""


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


def run_target_command(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``accelopt target check``; returns the exit status (0 ok, 1 failure).

    Never raises for an unusable target: the reason is printed (stderr, or the JSON object's
    ``error`` with ``--json``)."""
    try:
        report = asyncio.run(check_target(settings, timeout_s=getattr(args, "timeout_s", None)))
    except KeyboardInterrupt:
        raise
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2, default=str))
    else:
        _print_human(report)
    return 0 if report["ok"] else 1


async def check_target(settings: Settings, *, timeout_s: float | None = None) -> dict[str, Any]:
    """Connect to ``settings.target``, probe it and evaluate the built-in add kernel.

    Returns a JSON-ready dict: ``target``, ``ok`` (bool), ``info`` (device names, versions),
    ``fingerprint``, ``capacity``, ``kernel`` ("triton" or "nki"), ``result``
    (:meth:`EvalResult.to_dict`), ``summary`` (one line), ``connect_s`` and ``eval_s``
    (seconds), ``error`` (a message when the target could not be used). Never raises for
    an unusable target."""
    from accelopt_core.targets import make_target

    report: dict[str, Any] = {"target": settings.target, "ok": False}
    target = None
    try:
        target = make_target(settings)
        t0 = time.perf_counter()
        info = await _probe(target)
        report["connect_s"] = round(time.perf_counter() - t0, 3)
        report["info"] = info
        report["fingerprint"] = target.fingerprint
        report["capacity"] = target.capacity
        nki = bool(info.get("neuronxcc")) and not info.get("triton")
        report["kernel"] = "nki" if nki else "triton"
        result = await target.evaluate(_check_request(settings, nki, timeout_s))
        report["result"] = result.to_dict()
        report["summary"] = result.summary()
        report["eval_s"] = result.eval_s
        report["ok"] = result.ok
        if not result.ok:
            report["error"] = f"the check kernel failed: {result.summary()}"
    except Exception as exc:  # TargetError and anything unexpected: a message, not a traceback
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if target is not None:
            try:
                await target.close()
            except Exception as exc:  # closing must not hide the verdict
                report.setdefault("warnings", []).append(f"closing the target: {exc}")
    return report


def _check_request(settings: Settings, nki: bool, timeout_s: float | None) -> EvalRequest:
    from accelopt_core.hardware import peak_table

    source = NKI_CHECK_KERNEL if nki else TRITON_CHECK_KERNEL
    ev = settings.evaluation
    return EvalRequest(
        candidate_source=source,
        harness_source=source,
        entry="add",
        seeds=[1, 2],
        warmup_ms=min(ev.warmup_ms, 10.0),
        rep_ms=min(ev.rep_ms, 20.0),
        timeout_s=timeout_s or ev.timeout_s,
        memory_limit_mb=ev.memory_limit_mb,
        peaks=peak_table(),
        source_name="accelopt_check_add.py",
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
        "device_names": devices or ["cpu"],
        "executable": sys.executable,
    }


def _print_human(report: dict[str, Any]) -> None:
    from rich.console import Console

    out, err = Console(), Console(stderr=True)
    info = report.get("info") or {}
    out.print(f"[bold]target[/] {report['target']}")
    if info:
        out.print(f"devices: {', '.join(map(str, info.get('device_names') or [])) or '?'}")
        stack = [f"python {info.get('python') or '?'}"]
        for name in ("torch", "triton", "neuronxcc"):
            if info.get(name):
                stack.append(f"{name} {info[name]}")
        if not info.get("torch") and not info.get("neuronxcc"):
            stack.append("[red]torch missing[/]")
        out.print(
            " · ".join(stack) + (f" ({info['executable']})" if info.get("executable") else "")
        )
        out.print(
            f"capacity {report.get('capacity')} · connected in {report.get('connect_s', 0):.2f} s"
        )
    if "result" in report:
        result = EvalResult.from_dict(report["result"])
        eval_s = f" in {result.eval_s:.2f} s" if result.eval_s is not None else ""
        out.print(f"check kernel ({report.get('kernel')} add){eval_s}: {result.summary()}")
        if result.device:
            out.print(f"ran on: {result.device}")
    if report["ok"]:
        out.print("[green]ok[/]: the target works end to end")
    else:
        err.print(f"[red]error:[/] {report.get('error', 'the check failed')}")


__all__ = [
    "NKI_CHECK_KERNEL",
    "TRITON_CHECK_KERNEL",
    "add_target_parser",
    "check_target",
    "run_target_command",
]
