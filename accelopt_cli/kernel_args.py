"""The kernel-file arguments shared by ``accelopt optimize`` and ``accelopt profile``: ``PATH``
(load the file, print its diagnostics), ``--harness`` (a harness in its own file),
``--dataset`` (the FlashInfer-Bench dataset of a solution JSON) and
``--kernel`` (which kernel of the file)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from accelopt_cli.render import print_diagnostics
from accelopt_core.kernelfile import KernelFile, KernelFileError
from accelopt_core.kernelfile.workload import load_workload


def load_kernel(
    path: str, err: Console, harness: str | None = None, dataset: str | None = None
) -> KernelFile | None:
    """Load the kernel module of ``path`` and print its diagnostics on ``err``.

    ``path`` is a kernel file (its harness inside, or ``harness`` naming a harness file or a
    KernelBench problem) or a harness file that imports its kernel
    (:func:`accelopt_core.kernelfile.workload.load_workload`; imports resolve from the file's
    package root, the working directory and the harness's directory). Returns None (after
    printing why) when a file cannot be read or parsed, has an error diagnostic, or the kernel
    module holds no kernel. A FlashInfer-Bench solution JSON is bound to its definition and
    workloads in the dataset above it, or in ``dataset``."""
    try:
        kf = load_workload(path, harness=harness, workspace=[Path.cwd()], dataset=dataset)
    except KernelFileError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        return None
    except Exception as exc:  # noqa: BLE001 - a binding bug still gets a message, no traceback
        where = f"{path} (harness {harness})" if harness else path
        err.print(
            f"[red]error:[/] {escape(where)}:1:1: cannot bind the kernel file: "
            f"{escape(type(exc).__name__)}: {escape(str(exc))} (an AccelOpt bug: please report "
            "it with the file; `accelopt profile` on the file alone may still work)",
            highlight=False,
        )
        return None
    shown = kf.path if kf.context is not None and kf.context.harness_path else path
    print_diagnostics(err, kf, shown)
    if any(d.severity == "error" for d in kf.diagnostics) or not kf.kernels:
        return None
    return kf


def choose_kernel(kf: KernelFile, requested: str | None, err: Console) -> str | None:
    """The kernel to work on: ``requested`` when the file has it (else None, with the file's
    kernel names printed on ``err``); without a request, the first kernel that BENCH's entry
    launches (directly, through the functions it calls or the methods of its class), else the
    first kernel any launcher launches (never a ``@triton.jit`` device helper), else the
    file's first kernel. ``accelopt optimize`` then prefers the kernel the entry spends the
    most time in (:func:`accelopt_cli.optimize.busiest_kernel`)."""
    if requested:
        try:
            kf.kernel(requested)
        except KeyError:
            names = ", ".join(k.name for k in kf.kernels)
            err.print(f"[red]error:[/] {kf.path}: no kernel named {requested!r} (kernels: {names})")
            return None
        return requested
    entry = kf.harness.entry if kf.harness else None
    for kernel in kf.kernels:
        if entry and kf.launches(entry, kernel.name):
            return kernel.name
    launched = {k for launcher in kf.launchers for k in launcher.kernels}
    return next((k.name for k in kf.kernels if k.name in launched), kf.kernels[0].name)
