"""Diagnostics: the parse's findings, the no-harness hint, and failed profiles.

* the kernel parse (:attr:`accelopt_core.kernelfile.KernelFile.diagnostics`): syntax errors,
  incomplete harnesses, ... located where the parser found them;
* a file with kernels but no harness at all: the parser's *information* diagnostic on the first
  kernel's name (code ``no-harness``), which a code action answers with "insert a benchmark
  harness";
* a failed on-save profile: one error on the offending line (the failure's line if the worker
  reported one, else the kernel's name), with the status as code, e.g. ``compile_error`` or
  ``incorrect`` with the maximum error. They are replaced by the next profile (cleared when fixed).
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from accelopt_core.kernelfile import KernelFile, KernelInfo
from accelopt_core.onsite.protocol import EvalResult

from .edits import to_lsp_position, to_lsp_range

SOURCE = "accelopt"
#: The parser's code for "this file has kernels but no harness" (answered by a code action).
NO_HARNESS = "no-harness"
#: Parser diagnostics not shown: a file without kernels is simply not ours.
HIDDEN = ("no-kernels",)

_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "info": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def parse_diagnostics(
    kernel_file: KernelFile, lines: Sequence[str], codec: PositionCodec
) -> list[types.Diagnostic]:
    """The parse's diagnostics (syntax error, harness problems, the no-harness note) as LSP
    diagnostics; "no kernels" is not shown."""
    out = [
        types.Diagnostic(
            range=to_lsp_range(lines, codec, d.range),
            message=d.message,
            severity=_SEVERITY.get(d.severity, types.DiagnosticSeverity.Warning),
            code=d.code or None,
            source=SOURCE,
        )
        for d in kernel_file.diagnostics
        if d.code not in HIDDEN
    ]
    return out


def failure_message(kernel: str, result: EvalResult) -> str:
    """``softmax_kernel: incorrect result: max abs error 0.31 ...`` for a failed profile."""
    status = result.status.replace("_", " ")
    text = f"{kernel}: {status}"
    if result.message:
        text += f": {result.message}"
    if result.status == "incorrect" and result.max_abs_error is not None:
        if "max" not in (result.message or "").lower():
            text += f" (max abs error {result.max_abs_error:.3g}"
            if result.max_rel_error is not None:
                text += f", max rel error {result.max_rel_error:.3g}"
            text += ")"
    return text


def profile_diagnostic(
    kernel: KernelInfo, result: EvalResult, lines: Sequence[str], codec: PositionCodec
) -> types.Diagnostic:
    """One error diagnostic for a failed profile, on ``result.line`` when the worker located the
    failure in this file (the whole line, indentation skipped), else on the kernel's name."""
    if result.line and 1 <= result.line <= len(lines):
        text = lines[result.line - 1].rstrip("\r\n")
        indent = len(text) - len(text.lstrip())
        rng = types.Range(
            start=to_lsp_position(lines, codec, result.line - 1, indent),
            end=to_lsp_position(lines, codec, result.line - 1, len(text)),
        )
    else:
        rng = to_lsp_range(lines, codec, kernel.name_range)
    return types.Diagnostic(
        range=rng,
        message=failure_message(kernel.name, result),
        severity=types.DiagnosticSeverity.Error,
        code=result.status,
        source=SOURCE,
    )
