"""Terminal text of ``accelopt target check``: the target's devices, software stack and
capacity, the probe kernel's result and the sandbox warning (:mod:`accelopt_cli.target`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.onsite.sandbox.policy import warning_in

__all__ = ["print_target_report"]


def _stack_line(info: dict[str, Any]) -> str:
    stack = [f"python {info.get('python') or '?'}"]
    for name in ("torch", "triton", "neuronxcc", "nki"):
        if info.get(name):
            stack.append(escape(f"{name} {info[name]}"))
    if not info.get("torch") and not info.get("neuronxcc") and not info.get("nki"):
        stack.append("[red]torch missing[/]")
    executable = f" ({escape(str(info['executable']))})" if info.get("executable") else ""
    return " · ".join(stack) + executable


def _print_nki(out: Console, report: dict[str, Any]) -> None:
    """The NKI SDK line and, when it ran beside the Triton probe, the NKI probe's result."""
    sdk = report.get("sdk")
    if sdk:
        out.print(escape(f"NKI SDK: {sdk['api']} {sdk.get('version') or '?'}"), soft_wrap=True)
    nki = report.get("nki")
    if nki:
        result = EvalResult.from_dict(nki["result"])
        line = f"check kernel (nki add): {result.summary()} on {result.device or '?'}"
        out.print(escape(line), soft_wrap=True)


def print_target_report(out: Console, err: Console, report: dict[str, Any]) -> None:
    """The human form of ``accelopt target check``'s report (see
    :func:`accelopt_cli.target.check_target` for its keys): devices, software stack, capacity,
    the probe kernel's result, then ``ok`` or the error on ``err``."""
    info = report.get("info") or {}
    out.print(f"[bold]target[/] {escape(str(report['target']))}", soft_wrap=True)
    if info:
        devices = ", ".join(map(str, info.get("device_names") or [])) or "?"
        out.print(f"devices: {escape(devices)}", soft_wrap=True)
        out.print(_stack_line(info), soft_wrap=True)
        out.print(
            f"capacity {report.get('capacity')} · connected in {report.get('connect_s', 0):.2f} s"
        )
    if "result" in report:
        result = EvalResult.from_dict(report["result"])
        eval_s = f" in {result.eval_s:.2f} s" if result.eval_s is not None else ""
        line = f"check kernel ({report.get('kernel')} add){eval_s}: {result.summary()}"
        out.print(escape(line), soft_wrap=True)
        if result.device:
            out.print(f"ran on: {escape(result.device)}", soft_wrap=True)
        unconfined = warning_in(result.warnings)  # candidates would run unconfined there
        if unconfined is not None:
            err.print(f"[yellow]warning:[/] {escape(unconfined)}", soft_wrap=True)
    _print_nki(out, report)
    if report["ok"]:
        out.print("[green]ok[/]: the target works end to end")
    else:
        error = escape(str(report.get("error", "the check failed")))
        err.print(f"[red]error:[/] {error}", soft_wrap=True)
