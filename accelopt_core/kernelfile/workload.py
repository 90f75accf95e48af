"""A kernel as people write it (issue 13): the kernel module inside its package, the harness
that measures it (in the module or in a file of its own, or a KernelBench problem), and the
local import closure both need on a target.

:func:`load_workload` is the one entry point of the CLI and the server: given a kernel module
or a harness file (and optionally ``harness=``), it returns the kernel module's
:class:`~accelopt_core.kernelfile.model.KernelFile` (the file that gets rewritten) with its
:attr:`~accelopt_core.kernelfile.model.KernelFile.context` set when the kernel needs more than
its own source to run: a :class:`BenchContext` carrying the closure, the kernel module's path in
it and the harness. A standalone file with its harness inside and no local imports gets no
context and is evaluated exactly as before.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from accelopt_core.kernelfile.closure import Closure, ClosureError, check_cap, import_closure
from accelopt_core.kernelfile.discovery import load_kernel_file, parse_kernel_file
from accelopt_core.kernelfile.entries import EntryTarget, bench_module, entry_targets
from accelopt_core.kernelfile.fib import FibRef, bind_solution, exported_solution
from accelopt_core.kernelfile.fib_harness import FIB_ATOL, FIB_RTOL
from accelopt_core.kernelfile.kernelbench import (
    KERNELBENCH_ATOL,
    KERNELBENCH_RTOL,
    defines_model_new,
    harness_source,
    is_kernelbench_problem,
    problem_name,
)
from accelopt_core.kernelfile.model import HarnessInfo, KernelFile, KernelFileError
from accelopt_core.kernelfile.project import import_roots
from accelopt_core.kernelfile.sizes import find_sizes
from accelopt_core.textdiff import SourceRange

__all__ = [
    "BenchContext",
    "KERNELBENCH_HARNESS",
    "WorkloadError",
    "eval_keywords",
    "load_workload",
]

_TOP = SourceRange(1, 0, 1, 0)  # a generated harness has no range of its own

#: Path (in the closure) of the harness generated for a KernelBench problem.
KERNELBENCH_HARNESS = "_accelopt_kernelbench_harness.py"


class WorkloadError(KernelFileError):
    """The kernel and its harness cannot be put together: a harness that names no kernel
    module, an ambiguous one, an import closure over the cap, a file in it that does not
    parse. The message is ``path:line:col: message``."""


@dataclass(frozen=True)
class BenchContext:
    """Where the kernel module lives and what measures it.

    Attributes:
        files: the local import closure, import-root-relative POSIX path -> source (kernel
            module, harness, the helpers they import; never site-packages).
        kernel_path: the key of ``files`` of the kernel module (what candidates replace).
        kernel_module: its dotted name (``mypkg.ops.rms_norm``).
        harness_path: the key of ``files`` of a harness in its own file, None when the
            harness is in the kernel module.
        harness_file: the harness file on disk (absolute), None when in the kernel module.
        harness_source: the harness module's source, None when in the kernel module.
        roots: the import roots the closure was resolved against (absolute).
        kernelbench: the KernelBench problem's name when the harness is generated from one.
        fib: where a FlashInfer-Bench solution came from when the harness is generated from
            its definition and workloads (issue 35), else None.
        digest: sha256 (hex) of ``files``, ``kernel_path`` and ``harness_path``: saved search
            results are keyed on it (an edit to a helper module hides them).
    """

    files: dict[str, str]
    kernel_path: str
    kernel_module: str
    harness_path: str | None = None
    harness_file: str | None = None
    harness_source: str | None = None
    roots: tuple[str, ...] = ()
    kernelbench: str | None = None
    fib: FibRef | None = None
    digest: str = field(default="", compare=False)

    def with_kernel_source(self, source: str) -> BenchContext:
        """This context with the kernel module's text replaced (an editor's unsaved buffer),
        its digest recomputed."""
        if self.files.get(self.kernel_path) == source:
            return self
        files = {**self.files, self.kernel_path: source}
        return replace(
            self, files=files, digest=_digest(files, self.kernel_path, self.harness_path)
        )

    def request_fields(self) -> dict:
        """The :class:`~accelopt_core.onsite.protocol.EvalRequest` fields of this context."""
        return {
            "files": dict(self.files),
            "kernel_path": self.kernel_path,
            "harness_path": self.harness_path,
        }


def _digest(files: dict[str, str], kernel_path: str, harness_path: str | None) -> str:
    parts = {"files": sorted(files.items()), "kernel": kernel_path, "harness": harness_path}
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def _context(closure: Closure, kernel_path: str, roots: Sequence[Path], **extra) -> BenchContext:
    """The :class:`BenchContext` of ``closure`` whose kernel module is its file
    ``kernel_path``: every name read from the closure, nothing recomputed."""
    files = dict(closure.files)
    harness_path = extra.pop("harness_path", None)
    if harness_path is not None and harness_path not in files:
        files[harness_path] = extra["harness_source"]
    return BenchContext(
        files=files,
        kernel_path=kernel_path,
        kernel_module=closure.module_of(kernel_path) or "",
        harness_path=harness_path,
        roots=tuple(str(r) for r in roots),
        digest=_digest(files, kernel_path, harness_path),
        **extra,
    )


def _closure(paths: Sequence[Path], roots: Sequence[Path], *, capped: bool = True) -> Closure:
    """The import closure of ``paths``; WorkloadError for an unusable one (``capped``: over
    the cap too, else :func:`_capped` checks it once the kernel module is known)."""
    try:
        return (
            import_closure(paths, roots) if capped else import_closure(paths, roots, cap_bytes=None)
        )
    except ClosureError as exc:
        raise WorkloadError(exc.path, exc.message, exc.line, exc.col) from None


def _capped(closure: Closure, at: Path) -> None:
    """WorkloadError located at ``at`` (the kernel module) when the closure is over the cap."""
    try:
        check_cap(closure, at)
    except ClosureError as exc:
        raise WorkloadError(exc.path, exc.message, exc.line, exc.col) from None


def _existing(path: str | Path, what: str) -> Path:
    """``path`` resolved; WorkloadError when it is no file (located at the path, the way out
    named)."""
    resolved = Path(path).resolve()
    if resolved.is_dir():
        raise WorkloadError(str(path), f"is a directory; give the {what} file (a .py file)")
    if not resolved.is_file():
        raise WorkloadError(str(path), f"no such file (the {what}; check the path)")
    return resolved


def load_workload(
    path: str | Path,
    *,
    harness: str | Path | None = None,
    workspace: Sequence[str | Path] = (),
    dataset: str | Path | None = None,
) -> KernelFile:
    """The kernel module to optimize, with its :class:`BenchContext` when it needs one.

    ``path`` is a kernel module (its harness inside it, or ``harness`` naming a harness file
    or a KernelBench problem) or a harness file whose ``BENCH["entry"]`` is imported from the
    kernel module (``from mypkg.ops.rms_norm import rms_norm``; ``BENCH["module"]`` picks the
    module when several candidates define kernels). File names need not be module names
    (``19_ReLU.py``, ``36_RMSNorm_.py``, ``new-relu.py``): such a file is loaded and shipped
    under an internal module name (:func:`~.project.script_module`). Binding reads each file
    once and computes the import roots and the closure once; everything after reads the
    :class:`BenchContext`. A FlashInfer-Bench solution JSON (or its entry source exported
    beside it, ``sol/main.py`` next to ``sol.json``) is bound to its definition and workloads
    in the dataset above it or in ``dataset`` (:func:`_bind_fib`).

    Raises:
        KernelFileError: a file cannot be read, or (``WorkloadError``) the files cannot be
            bound: no such file, a harness that does not parse or names no kernel module / an
            ambiguous one, an unusable import closure (syntax error in a helper, over the
            5 MiB cap), a KernelBench problem given alone or a kernel file without ModelNew.
            Every message is located (``path:line:col: message``) and says the way out.
            A FlashInfer-Bench file names the field too (``FibError``).
    """
    if str(path).endswith(".json") and harness is None:
        return _bind_fib(_existing(path, "solution"), dataset)
    path = _existing(path, "kernel" if harness is not None else "kernel or harness")
    exported = exported_solution(path) if harness is None else None
    if exported is not None:
        kf = _bind_fib(exported[0], dataset, exported[0].with_suffix(""))
        if kf.path == str(path):
            return kf
    spaces = [Path(w).resolve() for w in workspace]
    if harness is not None:
        return _bind_harness_file(_existing(harness, "harness"), path, spaces)
    kf = load_kernel_file(path)
    if kf.syntax_error is None and not kf.kernels:
        if (
            kf.harness is not None
            and kf.harness.entry_imported
            or is_kernelbench_problem(kf.source)
        ):
            return _bind_harness_file(path, None, spaces, kf)
    if kf.syntax_error is not None:
        return kf
    roots = import_roots(path, workspace=spaces)
    closure = _closure([path], roots)
    if len(closure.files) > 1 or (path.parent / "__init__.py").is_file():
        kf.context = _context(closure, closure.key_of(path) or "", roots)
    return kf


def _syntax_error(kf: KernelFile, what: str) -> WorkloadError:
    """The located error of a file that does not parse."""
    diag = next((d for d in kf.diagnostics if d.severity == "error"), None)
    line, col = (diag.range.start_line, diag.range.start_col + 1) if diag else (1, 1)
    detail = diag.message if diag else "syntax error"
    return WorkloadError(kf.path, f"the {what} does not parse: {detail}", line, col)


def _bind_harness_file(
    harness: Path, kernel: Path | None, spaces: list[Path], loaded: KernelFile | None = None
) -> KernelFile:
    """The kernel module measured by the harness file ``harness`` (``loaded``: that file,
    already read and analysed), ``kernel`` when given (``--harness``)."""
    loaded = loaded or load_kernel_file(harness)
    if loaded.syntax_error is not None:
        raise _syntax_error(loaded, "harness")
    if is_kernelbench_problem(loaded.source):
        if kernel is None:
            raise WorkloadError(
                str(harness),
                "a KernelBench problem is the reference: run `accelopt optimize NEW_MODEL.py "
                f"--harness {harness.name}` with the file that defines ModelNew",
            )
        return _bind_kernelbench(harness, kernel, spaces, loaded.source)
    if loaded.harness is None:
        raise WorkloadError(
            str(harness),
            "has no harness (get_inputs, reference, BENCH) and is not a KernelBench problem "
            "(class Model, get_inputs(), get_init_inputs()); give a harness file, or run "
            "`accelopt harness` for a skeleton",
        )
    roots = import_roots(harness, workspace=spaces, extra=[kernel.parent] if kernel else [])
    closure = _closure([kernel, harness] if kernel else [harness], roots, capped=False)
    target, kf = _pick_target(harness, loaded.source, kernel, roots, closure)
    kernel_path = closure.modules[target.module]
    _capped(closure, closure.origins[kernel_path])
    kf.context = _context(
        closure,
        kernel_path,
        roots,
        harness_path=closure.key_of(harness),
        harness_file=str(harness),
        harness_source=loaded.source,
    )
    kf.harness = _harness_info(harness, loaded.harness, target.name)
    kf.diagnostics = [d for d in kf.diagnostics if d.code != "no-harness"]
    return kf


def _module_file(closure: Closure, module: str, cache: dict[str, KernelFile]) -> KernelFile | None:
    """The analysed file of the closure's module ``module`` (parsed once), None when the
    closure has no such file."""
    if module not in cache:
        rel = closure.modules.get(module)
        if rel is None:
            return None
        cache[module] = parse_kernel_file(closure.files[rel], str(closure.origins[rel]))
    return cache[module]


def _has_kernels(closure: Closure, module: str, cache: dict[str, KernelFile]) -> bool:
    found = _module_file(closure, module, cache)
    return found is not None and bool(found.kernels)


def _pick_target(
    harness: Path, source: str, kernel: Path | None, roots: Sequence[Path], closure: Closure
) -> tuple[EntryTarget, KernelFile]:
    """The entry target in the kernel module and that module's analysed file: the one in
    ``kernel`` when given, else the one whose module defines kernels (``BENCH["module"]``
    when several do)."""
    targets = entry_targets(source, harness, roots, closure=closure)
    parsed: dict[str, KernelFile] = {}
    if kernel is not None:
        name = closure.module_of(closure.key_of(kernel) or "") or kernel.stem
        found = [t for t in targets if t.module == name]
        if not found:
            raise WorkloadError(
                str(harness),
                f'BENCH["entry"] does not come from {name} ({kernel.name}); the harness '
                "must import the entry from the kernel module it measures",
                min((t.line for t in targets), default=1),
            )
        return found[0], _module_file(closure, name, parsed)
    wanted = bench_module(ast.parse(source))
    if wanted:
        targets = [t for t in targets if t.module == wanted] or targets
    with_kernels = [t for t in targets if _has_kernels(closure, t.module, parsed)]
    modules = sorted({t.module for t in with_kernels})
    if len(modules) == 1:
        return with_kernels[0], parsed[modules[0]]
    if not modules:
        named = ", ".join(sorted({f"{t.module}.{t.name}" for t in targets})) or "nothing local"
        raise WorkloadError(
            str(harness),
            f'BENCH["entry"] refers to {named}, and no module of the workspace it comes from '
            "defines a @triton.jit or @nki.jit kernel (is the entry imported from the "
            "kernel module, and is its package under the workspace?)",
            min((t.line for t in targets), default=1),  # located at the entry
        )
    raise WorkloadError(
        str(harness),
        f'BENCH["entry"] reaches kernels in several modules ({", ".join(modules)}); name the '
        'one to optimize with BENCH["module"] = "..."',
    )


def _harness_info(harness: Path, info: HarnessInfo | None, entry: str) -> HarnessInfo:
    """The harness file's :class:`HarnessInfo` (``info``), its entry renamed to the kernel
    module's name and its problems prefixed with the harness file's name (they are located
    there)."""
    info = info or HarnessInfo()
    problems = [
        replace(p, message=f"{harness.name}:{p.range.start_line}: {p.message}")
        for p in info.problems
        if not p.code.startswith("bench-entry")
    ]
    return replace(info, entry=entry, entry_expr=None, entry_imported=True, problems=problems)


def _bind_kernelbench(problem: Path, kernel: Path, spaces: list[Path], text: str) -> KernelFile:
    """A kernel file defining ``ModelNew`` measured by the KernelBench problem ``problem``
    (source ``text``): the harness is generated
    (:func:`accelopt_core.kernelfile.kernelbench.harness_source`); the problem's sizes are
    the ones the target may scale."""
    roots = import_roots(kernel, workspace=spaces, extra=[problem.parent])
    closure = _closure([kernel, problem], roots)
    kernel_path, problem_path = closure.key_of(kernel) or "", closure.key_of(problem) or ""
    kf = parse_kernel_file(closure.files[kernel_path], str(kernel))
    if kf.syntax_error is not None:
        raise _syntax_error(kf, "kernel file")
    if not defines_model_new(kf.source):
        raise WorkloadError(
            str(kernel),
            "defines no ModelNew (the KernelBench convention: class ModelNew(nn.Module) whose "
            f"forward launches the Triton kernels; {problem.name} is the reference)",
        )
    name = problem_name(problem)
    source = harness_source(
        closure.module_of(problem_path) or "", closure.module_of(kernel_path) or "", name=name
    )
    kf.context = _context(
        closure,
        kernel_path,
        roots,
        harness_path=KERNELBENCH_HARNESS,
        harness_file=str(problem),
        harness_source=source,
        kernelbench=name,
    )
    sizes = replace(find_sizes(ast.parse(text)), module=problem_path)
    kf.harness = HarnessInfo(
        entry="ModelNew",
        rtol=KERNELBENCH_RTOL,
        atol=KERNELBENCH_ATOL,
        get_inputs=_TOP,
        reference=_TOP,
        bench=_TOP,
        entry_imported=True,
        sizes=sizes,
    )
    kf.diagnostics = [d for d in kf.diagnostics if d.code != "no-harness"]
    return kf


def _bind_fib(solution: Path, dataset: str | Path | None, exported: Path | None = None):
    """The kernel module of a FlashInfer-Bench solution (its entry source), measured by the
    harness generated from its definition and workloads (:func:`.fib.bind_solution`; sizes
    scalable on the CPU interpreter as a KernelBench problem's). ``exported``: the folder its
    sources were exported to. Raises FibError (file, line, field)."""
    bound = bind_solution(solution, dataset=dataset, exported=exported)
    kf = parse_kernel_file(bound.files[bound.kernel_path], bound.display)
    if kf.syntax_error is not None:
        return kf
    kf.context = BenchContext(
        files=bound.files,
        kernel_path=bound.kernel_path,
        kernel_module=bound.kernel_module,
        harness_path=bound.harness_path,
        harness_file=str(solution),
        harness_source=bound.harness_source,
        fib=bound.ref,
        digest=_digest(bound.files, bound.kernel_path, bound.harness_path),
    )
    kf.harness = HarnessInfo(
        entry=bound.entry,
        rtol=FIB_RTOL,
        atol=FIB_ATOL,
        has_bytes=True,
        has_flops=bound.ref.op_type == "gemm",
        get_inputs=_TOP,
        reference=_TOP,
        bench=_TOP,
        entry_imported=True,
        sizes=find_sizes(ast.parse(bound.harness_source)),
    )
    kf.diagnostics = [d for d in kf.diagnostics if d.code != "no-harness"]
    return kf


def eval_keywords(kf: KernelFile) -> dict:
    """The keywords of :meth:`accelopt_core.evaluation.Evaluator.evaluate` that say where
    ``kf``'s kernel lives: ``source_name`` (the file name shown in messages), ``context``
    (:attr:`KernelFile.context`), ``entry_expr`` (``BENCH["entry"]`` when it is an
    expression in the kernel module's own harness) and ``sizes`` (the harness's
    :class:`~accelopt_core.kernelfile.sizes.SizePlan`, scaled on the CPU interpreter)."""
    harness = kf.harness
    name = kf.path.replace("\\", "/").rsplit("/", 1)[-1] or "kernel.py"
    expr = harness.entry_expr if harness is not None and not harness.entry_imported else None
    sizes = harness.sizes if harness is not None else None
    return {"source_name": name, "context": kf.context, "entry_expr": expr, "sizes": sizes}
