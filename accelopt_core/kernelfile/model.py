"""What kernel discovery finds in a file: kernels, launchers, the harness, located diagnostics
(:class:`KernelFile` and its parts), and the error for a file that cannot be read at all.

Ranges are :class:`accelopt_core.textdiff.SourceRange` (1-based lines, 0-based code-point
columns, end exclusive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from accelopt_core.kernelfile.sizes import SizePlan
from accelopt_core.onsite.names import Backend
from accelopt_core.textdiff import SourceRange

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
]

Severity = Literal["error", "warning", "information"]

#: Harness names a file defines at module level (DESIGN.md).
HARNESS_NAMES = ("get_inputs", "reference", "BENCH")
#: Keys ``BENCH`` may hold.
BENCH_KEYS = (
    "entry",
    "rtol",
    "atol",
    "flops",
    "bytes",
    "module",
    "shapes",
    "backward",
    "values",  # bounds or turns off the judge's derived values (onsite/judge/derived_values.py)
    "kernelbench",
)


@dataclass
class KernelDiagnostic:
    """A located message about a kernel file, for CLI output and LSP diagnostics.

    ``code`` is a stable identifier (``syntax-error``, ``no-kernels``, ``bench-entry-invalid``,
    ...) that code actions can key on.
    """

    message: str
    range: SourceRange
    severity: Severity
    code: str

    def format(self, path: str) -> str:
        """``softmax.py:12:5: error: ...`` (line and column 1-based, as compilers print them)."""
        return (
            f"{path}:{self.range.start_line}:{self.range.start_col + 1}: "
            f"{self.severity}: {self.message}"
        )


@dataclass
class KernelInfo:
    """One ``@triton.jit`` / ``@nki.jit`` kernel.

    Attributes:
        name: function name.
        backend: ``triton`` or ``nki``.
        range: the whole definition, decorators included.
        name_range: the identifier after ``def``.
        decorators: resolved dotted names, outermost first, call arguments dropped
            (``["triton.autotune", "triton.jit"]``; NKI ones as ``nki.jit``).
        params: parameter names in order (``*args``/``**kwargs`` without stars).
        constexpr_params: parameters annotated ``tl.constexpr`` (Triton compile-time constants).
        api_calls: calls of the Triton / NKI API inside the kernel, as written (``tl.load``,
            ``nl.matmul``), each with the range of the called name.
    """

    name: str
    backend: Backend
    range: SourceRange
    name_range: SourceRange
    decorators: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    constexpr_params: list[str] = field(default_factory=list)
    api_calls: list[tuple[str, SourceRange]] = field(default_factory=list)


@dataclass
class LauncherInfo:
    """A module-level function that launches kernels (``kernel[grid](...)`` or an NKI call).

    ``kernels`` lists the kernels it launches directly, in order of first launch;
    ``params`` its positional parameter names in order (what ``get_inputs`` must return).
    """

    name: str
    range: SourceRange
    name_range: SourceRange
    kernels: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)


@dataclass
class HarnessInfo:
    """The benchmark harness found in a file (``get_inputs`` / ``reference`` / ``BENCH``).

    Attributes:
        entry: the module-level name ``BENCH["entry"]`` starts from (``rms_norm``; ``RMSNorm``
            for ``RMSNorm.apply``; None when absent or invalid). For a harness in its own file
            bound to a kernel module (:func:`~accelopt_core.kernelfile.workload.load_workload`),
            the name in the kernel module.
        entry_expr: the entry's source text when it is not a plain name (``RMSNorm.apply``,
            ``functools.partial(rms_norm, eps=1e-6)``, a lambda), else None.
        entry_imported: the entry's name is imported into this file (a harness in its own
            file), not defined in it.
        rtol / atol: the tolerances given in ``BENCH`` (None: worker defaults by dtype).
        has_flops / has_bytes: ``BENCH`` gives the work of one call for the roofline.
        get_inputs / reference / bench: ranges of the three definitions (None when missing).
        problems: located errors and warnings about an incomplete or invalid harness.
        sizes: the module-level sizes ``get_inputs`` reads
            (:class:`~accelopt_core.kernelfile.sizes.SizePlan`: which the target may scale for
            the CPU interpreter, which not and why), None when not analysed.
    """

    entry: str | None = None
    entry_expr: str | None = None
    entry_imported: bool = False
    rtol: float | None = None
    atol: float | None = None
    has_flops: bool = False
    has_bytes: bool = False
    get_inputs: SourceRange | None = None
    reference: SourceRange | None = None
    bench: SourceRange | None = None
    problems: list[KernelDiagnostic] = field(default_factory=list)
    sizes: SizePlan | None = None

    @property
    def complete(self) -> bool:
        """All three pieces present, an entry named, and no error among :attr:`problems`."""
        return (
            self.get_inputs is not None
            and self.reference is not None
            and self.bench is not None
            and self.entry is not None
            and not any(p.severity == "error" for p in self.problems)
        )


@dataclass
class KernelFile:
    """Everything :func:`~accelopt_core.kernelfile.parse_kernel_file` found in one source file.

    ``harness`` is None when no harness piece at all is present; ``diagnostics`` holds the
    syntax error, "no kernels", the harness problems and a "no harness" note.
    """

    path: str
    source: str
    kernels: list[KernelInfo] = field(default_factory=list)
    launchers: list[LauncherInfo] = field(default_factory=list)
    harness: HarnessInfo | None = None
    diagnostics: list[KernelDiagnostic] = field(default_factory=list)
    syntax_error: KernelDiagnostic | None = None
    #: where the module lives and what measures it when it needs more than its own source
    #: (:class:`~accelopt_core.kernelfile.workload.BenchContext`; issue 13), else None.
    context: Any = None
    # name -> module-level functions it calls (transitively closed), for entry_for().
    _reach: dict[str, set[str]] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """The source parsed and holds at least one kernel."""
        return self.syntax_error is None and bool(self.kernels)

    @property
    def backend(self) -> Backend | None:
        """Backend of the first kernel (``triton`` / ``nki``), None without kernels."""
        return self.kernels[0].backend if self.kernels else None

    @property
    def kernel_names(self) -> list[str]:
        """Names of the kernels, in source order."""
        return [k.name for k in self.kernels]

    def kernel(self, name: str) -> KernelInfo:
        """The kernel called ``name``. Raises KeyError naming the kernels that do exist."""
        for k in self.kernels:
            if k.name == name:
                return k
        known = ", ".join(self.kernel_names) or "none"
        raise KeyError(f"no kernel named {name!r} in {self.path} (kernels: {known})")

    def launches(self, function: str, kernel_name: str) -> bool:
        """True when module-level ``function`` launches ``kernel_name`` directly or through
        the module-level functions it calls; for a class (``RMSNorm`` of ``RMSNorm.apply``),
        through its methods."""
        names = {function} | self._reach.get(function, set())
        for method in [n for n in self._reach if n.startswith(function + ".")]:
            names |= {method} | self._reach[method]
        return any(kernel_name in la.kernels for la in self.launchers if la.name in names)

    def launcher_for(self, kernel_name: str) -> LauncherInfo | None:
        """The launcher that launches ``kernel_name`` directly (the BENCH entry if it does,
        else the first such launcher), or None."""
        direct = [la for la in self.launchers if kernel_name in la.kernels]
        entry = self.harness.entry if self.harness else None
        for la in direct:
            if la.name == entry:
                return la
        return direct[0] if direct else None

    def entry_for(self, kernel_name: str) -> str | None:
        """The function to time for ``kernel_name``: the BENCH entry when it launches the
        kernel (directly, via a helper, or via its class's methods); else the kernel's own
        launcher when it takes the same parameters as the entry (the harness's inputs fit it);
        else None: a device helper, or a kernel the harness does not measure (e.g. a backward
        kernel under a forward-only harness: its launcher is never called with the forward
        inputs)."""
        entry = self.harness.entry if self.harness else None
        if entry is not None and self.launches(entry, kernel_name):
            return entry
        la = self.launcher_for(kernel_name)
        if la is None:
            return None
        if entry is None or la.name == entry:
            return la.name
        timed = next((x for x in self.launchers if x.name == entry), None)
        return la.name if timed is not None and timed.params == la.params else None

    def kernel_at(self, line: int, col: int) -> KernelInfo | None:
        """The kernel whose definition contains (1-based ``line``, 0-based ``col``)."""
        for k in self.kernels:
            if k.range.contains(line, col):
                return k
        return None


class KernelFileError(Exception):
    """A kernel file cannot be read at all. The message is ``path:line:col: message``."""

    def __init__(self, path: str, message: str, line: int = 1, col: int = 1) -> None:
        super().__init__(f"{path}:{line}:{col}: {message}")
        self.path = path
        self.line = line
        self.col = col
