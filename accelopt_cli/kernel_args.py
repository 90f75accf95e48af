"""The kernel-file arguments shared by ``accelopt optimize`` and ``accelopt profile``: ``PATH``
(load the file, print its diagnostics) and ``--kernel`` (which kernel of the file)."""

from __future__ import annotations

from rich.console import Console

from accelopt_cli.render import print_diagnostics
from accelopt_core.kernelfile import KernelFile, KernelFileError, load_kernel_file


def load_kernel(path: str, err: Console) -> KernelFile | None:
    """Load the kernel file at ``path`` and print its diagnostics on ``err``.

    Returns None (after printing why) when the file cannot be read or parsed, has an error
    diagnostic, or holds no kernel."""
    try:
        kf = load_kernel_file(path)
    except KernelFileError as exc:
        err.print(f"[red]error:[/] {exc}")
        return None
    print_diagnostics(err, kf, path)
    if any(d.severity == "error" for d in kf.diagnostics) or not kf.kernels:
        return None
    return kf


def choose_kernel(kf: KernelFile, requested: str | None, err: Console) -> str | None:
    """The kernel to work on: ``requested`` when the file has it (else None, with the file's
    kernel names printed on ``err``); without a request, the first kernel that BENCH's entry
    launches, else the file's first kernel."""
    if requested:
        try:
            kf.kernel(requested)
        except KeyError:
            names = ", ".join(k.name for k in kf.kernels)
            err.print(f"[red]error:[/] {kf.path}: no kernel named {requested!r} (kernels: {names})")
            return None
        return requested
    entry = kf.harness.entry if kf.harness else None
    launched = next((launcher.kernels for launcher in kf.launchers if launcher.name == entry), [])
    for kernel in kf.kernels:
        if kernel.name in launched:
            return kernel.name
    return kf.kernels[0].name
