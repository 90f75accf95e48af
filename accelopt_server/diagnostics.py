"""Diagnostics: the parse's findings, the no-harness hint, and failed profiles.

* the kernel parse (:attr:`accelopt_core.kernelfile.KernelFile.diagnostics`): syntax errors,
  incomplete harnesses, ... located where the parser found them;
* a file with kernels but no harness at all: the parser's *information* diagnostic on the first
  kernel's name (code ``no-harness``), which a code action answers with "insert a benchmark
  harness";
* a failed on-save profile: one error on the offending line (the failure's line if the worker
  reported one, else the kernel's name), with the status as code, e.g. ``compile_error`` or
  ``incorrect`` with the maximum error; a kernel that does not compile or cannot launch on the
  configured GPU (issue 21) has the code ``gpu-compile`` / ``gpu-launch``, and one the CPU
  interpreter cannot run but the GPU compiles is *information* (code ``not-timed``: "time it on
  a GPU target"). They are replaced by the next profile (cleared when fixed);
* register spills on the configured GPU: a *warning* on the kernel's name (code ``spills``),
  never an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from accelopt_core import devicefacts
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


#: Message prefixes of the compile stage's failures (contracts: "does not compile for sm_90
#: (H100 SXM5): ...", "cannot launch on H100 SXM5 (sm_90): ...") -> diagnostic code.
_GPU_FAILURES = (("does not compile for ", "gpu-compile"), ("cannot launch on ", "gpu-launch"))


def _code_and_severity(result: EvalResult) -> tuple[str, types.DiagnosticSeverity]:
    """The diagnostic code and severity of a failed profile (see the module docstring)."""
    if devicefacts.not_timed(result.metrics):
        return "not-timed", types.DiagnosticSeverity.Information
    for prefix, code in _GPU_FAILURES:
        if (result.message or "").startswith(prefix):
            return code, types.DiagnosticSeverity.Error
    return result.status, types.DiagnosticSeverity.Error


def spill_diagnostics(
    kernel: KernelInfo, result: EvalResult, lines: Sequence[str], codec: PositionCodec
) -> list[types.Diagnostic]:
    """One warning (code ``spills``) on the kernel's name for each of its compiled launches
    that spills registers on the configured GPU (:func:`accelopt_core.devicefacts.spill_warnings`)."""
    rng = to_lsp_range(lines, codec, kernel.name_range)
    return [
        types.Diagnostic(
            range=rng,
            message=message,
            severity=types.DiagnosticSeverity.Warning,
            code="spills",
            source=SOURCE,
        )
        for name, message in devicefacts.spill_warnings(result.metrics)
        if name == kernel.name
    ]


def profile_diagnostic(
    kernel: KernelInfo, result: EvalResult, lines: Sequence[str], codec: PositionCodec
) -> types.Diagnostic:
    """One diagnostic for a failed profile (an error; information for a kernel the CPU
    interpreter cannot run), on ``result.line`` when the worker located the
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
    code, severity = _code_and_severity(result)
    untimed = devicefacts.not_timed_line(result.metrics)
    return types.Diagnostic(
        range=rng,
        message=f"{kernel.name}: {untimed}" if untimed else failure_message(kernel.name, result),
        severity=severity,
        code=code,
        source=SOURCE,
    )
