"""Kernel files: discovery of kernels, launchers and the harness (AST), source positions, and
splicing a candidate back into its file (the harness is always restored from the original).

Modules: :mod:`.model` (the records and the error), :mod:`.positions` (AST node ->
SourceRange), :mod:`.nodes` (small AST questions), :mod:`.discovery` (parse / load a file),
:mod:`.harness` (one checker per harness part), :mod:`.splice` (restore_harness),
:mod:`.skeleton` (harness_skeleton), :mod:`.source` (normalisation, fingerprints),
:mod:`.project` (import roots, module names), :mod:`.closure` (the local import closure),
:mod:`.entries` (what ``BENCH["entry"]`` refers to), :mod:`.sizes` (the module-level sizes
``get_inputs`` reads), :mod:`.workload` (binding a kernel module to its harness, once),
:mod:`.kernelbench` (KernelBench problems as harnesses).
The text helpers (``SourceRange``, ``split_lines``, hunks, diffs) live in
:mod:`accelopt_core.textdiff` and are re-exported here.
"""

from accelopt_core.kernelfile.discovery import load_kernel_file, parse_kernel_file
from accelopt_core.kernelfile.model import (
    BENCH_KEYS,
    HARNESS_NAMES,
    Backend,
    HarnessInfo,
    KernelDiagnostic,
    KernelFile,
    KernelFileError,
    KernelInfo,
    LauncherInfo,
    Severity,
)
from accelopt_core.kernelfile.skeleton import harness_skeleton
from accelopt_core.kernelfile.source import normalize_source, quick_has_kernels, source_fingerprint
from accelopt_core.kernelfile.splice import restore_harness
from accelopt_core.textdiff import (
    SourceRange,
    apply_hunks,
    minimal_hunks,
    split_lines,
    unified_diff,
)

__all__ = [
    "BENCH_KEYS",
    "HARNESS_NAMES",
    "Backend",
    "HarnessInfo",
    "KernelDiagnostic",
    "KernelFile",
    "KernelFileError",
    "KernelInfo",
    "LauncherInfo",
    "Severity",
    "SourceRange",
    "apply_hunks",
    "harness_skeleton",
    "load_kernel_file",
    "minimal_hunks",
    "normalize_source",
    "parse_kernel_file",
    "quick_has_kernels",
    "restore_harness",
    "source_fingerprint",
    "split_lines",
    "unified_diff",
]
