"""Reading a FlashInfer Trace dataset through the ``flashinfer-bench`` package (issue 35).

``flashinfer_bench.data`` (the optional extra ``accelopt[fib]``) is the schema: every file is
validated by its ``Definition``, ``Solution`` and ``Trace`` models, never by a copy. This module
finds the dataset root of a solution, a definition by name, the workloads of a definition and
the Triton solutions of a dataset (for ``accelopt bench``), and turns every mistake into a
:class:`FibError` that names the file, the line and the field
(``workloads/rmsnorm.jsonl:3:1: field workload.axes: missing axis 'batch_size'``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from accelopt_core.kernelfile.model import KernelFileError

__all__ = [
    "FibError",
    "fib_data",
    "find_definition",
    "find_root",
    "line_of",
    "load_model",
    "read_workloads",
]


class FibError(KernelFileError):
    """A FlashInfer-Bench dataset file cannot be used; ``path:line:col: message``, the message
    naming the field (``field spec.entry_point: ...``)."""


def fib_data():
    """``flashinfer_bench.data``; FibError (the way to install it) when the package is missing."""
    try:
        import flashinfer_bench.data as data
    except ImportError as exc:
        raise FibError(
            "flashinfer-bench",
            f"the flashinfer-bench package is needed to read FlashInfer-Bench datasets ({exc}); "
            'install it with `pip install -e ".[fib]"` (or `pip install flashinfer-bench`)',
        ) from None
    return data


# --- locating --------------------------------------------------------------------------------


def line_of(text: str, loc: tuple) -> int:
    """1-based line of the JSON key path ``loc`` in ``text`` (each key searched after the
    previous one; list indices skipped), 1 when not found."""
    pos, line = 0, 1
    for part in loc:
        if not isinstance(part, str):
            continue
        found = re.compile(r'"' + re.escape(part) + r'"\s*:').search(text, pos)
        if found is None:
            break
        pos = found.end()
        line = text.count("\n", 0, found.start()) + 1
    return line


#: Model-level validator messages of the schema -> the field they are about.
_MESSAGE_FIELDS = (
    ("Reference must", ("reference",)),
    ("entry point format", ("spec", "entry_point")),
    ("Entry source file", ("spec", "entry_point")),
    ("Duplicate source path", ("sources",)),
    ("references undefined axis", ("inputs",)),
    ("Input and output names", ("outputs",)),
    ("Constraints must", ("constraints",)),
)


def _validation_error(path: Path, text: str, exc: Exception, prefix: tuple = (), line0=0):
    """The FibError of a pydantic ValidationError ``exc`` of the file ``path`` (text
    ``text``; ``line0``: the JSONL line the text is on)."""
    first = exc.errors()[0] if hasattr(exc, "errors") else {"loc": (), "msg": str(exc)}
    loc = tuple(first.get("loc") or ())
    message = str(first.get("msg", exc)).removeprefix("Value error, ")
    loc = tuple(p for p in loc if not str(p).startswith(("function-after", "tagged-union")))
    for key, more in _MESSAGE_FIELDS:  # a model validator's error names only the model
        if key in message and more[: len(loc)] == loc:
            loc = more
            break
    field = ".".join(str(p) for p in prefix + loc) or "(file)"
    got = first.get("input")
    if isinstance(got, (str, int, float)) and first.get("type") != "missing":
        message += f" (got {got!r})"
    line = line0 or line_of(text, loc)
    return FibError(str(path), f"field {field}: {message}", line)


def load_model(model, path: Path, text: str | None = None, prefix: tuple = (), line0: int = 0):
    """``model`` (a flashinfer_bench.data class) validated from the JSON text of ``path``;
    FibError for unreadable or invalid JSON and for a schema violation (file, line, field)."""
    from pydantic import ValidationError

    try:
        text = path.read_text("utf-8") if text is None else text
    except (OSError, UnicodeDecodeError) as exc:
        raise FibError(str(path), f"cannot read: {exc}") from None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        line = line0 or exc.lineno
        raise FibError(str(path), f"not valid JSON: {exc.msg}", line, exc.colno) from None
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise _validation_error(path, text, exc, prefix, line0) from None


# --- the dataset -----------------------------------------------------------------------------


def find_root(solution: Path, dataset: str | Path | None = None) -> Path:
    """The dataset root of ``solution``: ``dataset`` when given (it must hold
    ``definitions/``), else the nearest ancestor holding ``definitions/`` with the solution
    under its ``solutions/``. Raises FibError naming the way out."""
    if dataset is not None:
        root = Path(dataset).resolve()
        if not (root / "definitions").is_dir():
            raise FibError(str(dataset), "is not a FlashInfer Trace dataset (no definitions/)")
        return root
    for parent in solution.parents:
        if (parent / "definitions").is_dir() and (parent / "solutions") in solution.parents:
            return parent
    raise FibError(
        str(solution),
        "is not inside a FlashInfer Trace dataset (no definitions/ above its solutions/); "
        "give the dataset root with --dataset ROOT",
    )


def _json_files(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.rglob(pattern)) if folder.is_dir() else []


def find_definition(root: Path, name: str, solution: Path, text: str):
    """(Definition, its file) named ``name`` under ``root/definitions``; FibError at the
    solution's ``definition`` field when there is none."""
    data = fib_data()
    for path in _json_files(root / "definitions", "*.json"):
        try:
            found = json.loads(path.read_text("utf-8")).get("name") == name
        except (OSError, ValueError, AttributeError):
            found = False
        if found:
            return load_model(data.Definition, path), path
    raise FibError(
        str(solution),
        f"field definition: no definition named {name!r} under {root / 'definitions'}",
        line_of(text, ("definition",)),
    )


def _jsonl_lines(folder: Path) -> Iterator[tuple[Path, int, str]]:
    for path in _json_files(folder, "*.jsonl"):
        try:
            lines = path.read_text("utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise FibError(str(path), f"cannot read: {exc}") from None
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield path, number, line


def read_workloads(root: Path, definition) -> list[tuple[Any, Path, int]]:
    """The workloads of ``definition``: (Workload, file, line) of every workload trace under
    ``root/workloads`` naming it, each validated by the package and checked against the
    definition (:func:`check_workload`). FibError when there is none."""
    data = fib_data()
    found = []
    marker = json.dumps(definition.name)
    for path, number, line in _jsonl_lines(root / "workloads"):
        if marker not in line:
            continue
        trace = load_model(data.Trace, path, line, line0=number)
        if trace.definition == definition.name:
            check_workload(definition, trace.workload, path, number, root)
            found.append((trace.workload, path, number))
    if not found:
        raise FibError(
            str(root / "workloads"), f"no workloads of the definition {definition.name!r}"
        )
    return found


def check_workload(definition, workload, path: Path, line: int, root: Path) -> None:
    """FibError (file, line, field) when ``workload`` does not fit ``definition``: a variable
    axis without a value, an input the definition does not have, a scalar for a tensor input,
    a safetensors file that is missing."""
    for axis in definition.var_axes:
        if axis not in workload.axes:
            raise FibError(
                str(path),
                f"field workload.axes: missing axis {axis!r} (the variable axes of "
                f"{definition.name}: {', '.join(definition.var_axes)})",
                line,
            )
    for name, given in workload.inputs.items():
        spec = definition.inputs.get(name)
        where = f"field workload.inputs.{name}"
        if spec is None:
            known = ", ".join(definition.inputs)
            raise FibError(str(path), f"{where}: {definition.name} has no input {name!r} "
                           f"(its inputs: {known})", line)  # fmt: skip
        if given.type == "scalar" and spec.shape is not None:
            raise FibError(str(path), f"{where}: a scalar for a tensor input", line)
        if given.type == "safetensors" and not (root / given.path).is_file():
            raise FibError(str(path), f"{where}.path: no such file {root / given.path}", line)


# --- a whole dataset (accelopt bench) ---------------------------------------------------------


def list_definitions(root: Path) -> list[tuple[str, str, Path]]:
    """(name, op_type, file) of every definition under ``root/definitions``, by name. A file
    that is not a JSON object with a ``name`` is left out here (binding one of its solutions
    names the problem). Raises nothing."""
    found = []
    for path in _json_files(root / "definitions", "*.json"):
        try:
            data = json.loads(path.read_text("utf-8"))
            found.append((str(data["name"]), str(data.get("op_type", "")), path))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(found)


def triton_solutions(root: Path) -> tuple[dict[str, list[tuple[str, Path]]], dict[str, str]]:
    """(definition -> [(solution name, file)] of its Triton solutions, by name; definition ->
    the first FibError of a solution file naming it that the package rejects)."""
    data = fib_data()
    found: dict[str, list[tuple[str, Path]]] = {}
    errors: dict[str, str] = {}
    for path in _json_files(root / "solutions", "*.json"):
        try:
            solution = load_model(data.Solution, path)
        except FibError as exc:
            try:
                definition = json.loads(path.read_text("utf-8")).get("definition")
            except (OSError, ValueError, AttributeError):
                definition = None
            if isinstance(definition, str):
                errors.setdefault(definition, str(exc))
            continue
        if solution.spec.language.value == "triton":
            found.setdefault(solution.definition, []).append((solution.name, path))
    return {k: sorted(v) for k, v in found.items()}, errors


def best_solution(root: Path, definition: str, candidates: list[tuple[str, Path]]):
    """The (name, file) of ``candidates`` (Triton solutions of ``definition``) whose trace
    FlashInfer-Bench ranks best (``TraceSet.get_best_trace``: passed, within atol = rtol =
    1e-2, the largest ``speedup_factor``); the first by name when none of them has a trace.
    Trace lines the package rejects are skipped."""
    if len(candidates) < 2:
        return candidates[0]
    data = fib_data()
    names = {name for name, _ in candidates}
    marker = json.dumps(definition)
    traces = []
    for path, number, line in _jsonl_lines(root / "traces"):
        if marker in line:
            try:
                trace = load_model(data.Trace, path, line, line0=number)
            except FibError:
                continue
            if trace.definition == definition and trace.solution in names:
                traces.append(trace)
    best = data.TraceSet(traces={definition: traces}).get_best_trace(definition)
    if best is None:
        return candidates[0]
    return next(c for c in candidates if c[0] == best.solution)
