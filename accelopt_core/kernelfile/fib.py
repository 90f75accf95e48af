"""FlashInfer-Bench solutions as AccelOpt workloads (issue 35), seen from the host.

A FlashInfer Trace dataset (``ROOT/definitions/**.json``, ``ROOT/solutions/**.json``,
``ROOT/workloads/**.jsonl``, ``ROOT/traces/**.jsonl``) is read through the ``flashinfer-bench``
package's own schema (``flashinfer_bench.data``: ``Definition``, ``Solution``, ``Trace``;
the optional extra ``accelopt[fib]``), never a copy of it. :func:`bind_solution` turns one
solution JSON into a :class:`FibWorkload`: the solution's sources as the kernel module (what
candidates rewrite), the definition's ``reference`` as a module of its own, the safetensors
tensors the workloads name (read here, shipped inside the request: a remote target has no copy
of the dataset and may lack the ``safetensors`` package), and a generated harness
(:mod:`.fib_harness`) whose ``BENCH["shapes"]`` are workloads: :data:`TIMED_WORKLOADS` timed
ones and one held out. :func:`exported_solution` binds a source file exported beside its JSON
(``solutions/x/sol.json`` and ``solutions/x/sol/main.py``), for the editor.

The dataset is read by :mod:`.fib_data`; every mistake in it is a
:class:`~.fib_data.FibError` naming the file, the line and the field.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

from accelopt_core.kernelfile.fib_data import (
    FibError,
    fib_data,
    find_definition,
    find_root,
    line_of,
    load_model,
    read_workloads,
)
from accelopt_core.kernelfile.fib_harness import harness_source

__all__ = [
    "BLOBS_MODULE",
    "HARNESS_MODULE",
    "REFERENCE_MODULE",
    "TIMED_WORKLOADS",
    "FibRef",
    "FibWorkload",
    "bind_solution",
    "export_sources",
    "exported_solution",
    "package_name",
    "pick_workloads",
]

#: Workloads timed per evaluation (evenly spread over the definition's workloads by size);
#: one more is checked and never timed (held out).
TIMED_WORKLOADS = 3
#: Module names of the generated files shipped with every request.
HARNESS_MODULE = "_accelopt_fib_harness"
REFERENCE_MODULE = "_accelopt_fib_reference"
BLOBS_MODULE = "_accelopt_fib_blobs"
#: Cap on the safetensors tensors shipped with one request (bytes before base64).
BLOB_CAP_BYTES = 4 * 2**20


@dataclass(frozen=True)
class FibRef:
    """Where a bound solution came from, for writing results back.

    Attributes:
        root: the dataset root (absolute). solution_file: the solution JSON (absolute).
        solution / definition / op_type: names from the dataset.
        entry_file: the entry source's path in the solution (``main.py``).
        package: the files prefix its sources are shipped under (``fib_rmsnorm_triton``).
        workloads: the uuids of ``BENCH["shapes"]`` in order (the last one held out when
            there are several).
    """

    root: str
    solution_file: str
    solution: str
    definition: str
    op_type: str
    entry_file: str
    package: str
    workloads: tuple[str, ...]


@dataclass
class FibWorkload:
    """A solution bound to its definition and workloads: the files of the request, the kernel
    module's key and name in them, the generated harness, and :class:`FibRef`."""

    ref: FibRef
    files: dict[str, str]
    kernel_path: str
    kernel_module: str
    harness_path: str
    harness_source: str
    entry: str
    display: str


def check_solution(solution, definition, path: Path, text: str) -> str:
    """The entry source's text; FibError (field named) for a solution AccelOpt cannot run: not
    Triton, an entry point that is no Python file or whose function the entry file does not
    define, outputs a destination-passing entry could not be given."""
    line = line_of(text, ("spec", "entry_point"))
    if solution.spec.language.value != "triton":
        raise FibError(
            str(path),
            f"field spec.language: {solution.spec.language.value!r}; AccelOpt optimizes "
            'Triton solutions (spec.language "triton")',
            line_of(text, ("spec", "language")),
        )
    entry = solution.get_entry_source()
    symbol = solution.get_entry_symbol()
    if entry is None or not entry.path.endswith(".py"):
        raise FibError(str(path), f"field spec.entry_point: {solution.spec.entry_point!r} "
                       "is not a Python file of the sources", line)  # fmt: skip
    try:
        tree = ast.parse(entry.content)
    except (SyntaxError, ValueError):
        return entry.content  # located by the kernel file's own syntax diagnostic
    if not any(isinstance(n, ast.FunctionDef) and n.name == symbol for n in tree.body):
        raise FibError(
            str(path),
            f"field spec.entry_point: {entry.path} defines no top-level function {symbol!r}",
            line,
        )
    if solution.spec.destination_passing_style:
        bound = {a for s in definition.inputs.values() for a in s.shape or []}
        for name, spec in definition.outputs.items():
            missing = [a for a in spec.shape or [] if a in definition.var_axes and a not in bound]
            if missing:
                raise FibError(str(path), f"field spec.destination_passing_style: output {name!r}"
                               f" has axes no input binds ({', '.join(missing)})", line)  # fmt: skip
    return entry.content


# --- picking workloads and building the files ------------------------------------------------


def _size(definition, workload) -> int:
    values = {**definition.const_axes, **workload.axes}
    total = 0
    for spec in definition.inputs.values():
        count = 1
        for axis in spec.shape or []:
            count *= values.get(axis, 1)
        total += count
    return total


def pick_workloads(definition, workloads: list) -> list:
    """The workloads of ``BENCH["shapes"]``: all of them when at most :data:`TIMED_WORKLOADS`
    + 1, else :data:`TIMED_WORKLOADS` + 1 spread evenly over them sorted by input elements
    (the smallest and the largest among them); the last one returned is held out (the second
    smallest of the picked, so the largest is timed). Deterministic."""
    ordered = sorted(workloads, key=lambda w: (_size(definition, w), w.uuid))
    count = TIMED_WORKLOADS + 1
    if len(ordered) > count:
        step = (len(ordered) - 1) / (count - 1)
        ordered = [ordered[round(i * step)] for i in range(count)]
    if len(ordered) > 1:
        ordered = [w for i, w in enumerate(ordered) if i != 1] + [ordered[1]]
    return ordered


def _blob(root: Path, name: str, given, definition, workload, path: Path, line: int):
    """(dtype, shape, bytes) of a safetensors input, checked against the definition."""
    import safetensors.torch
    import torch

    where = f"field workload.inputs.{name}"
    try:
        tensors = safetensors.torch.load_file(str(root / given.path))
    except Exception as exc:  # noqa: BLE001 - a damaged file, named
        raise FibError(str(path), f"{where}.path: cannot read {given.path}: {exc}", line) from None
    if given.tensor_key not in tensors:
        raise FibError(str(path), f"{where}.tensor_key: {given.tensor_key!r} is not in "
                       f"{given.path}", line)  # fmt: skip
    tensor = tensors[given.tensor_key].contiguous()
    spec = definition.inputs[name]
    values = {**definition.const_axes, **workload.axes}
    expected = [values[a] for a in spec.shape or []]
    if list(tensor.shape) != expected or str(tensor.dtype) != f"torch.{spec.dtype.value}":
        raise FibError(str(path), f"{where}: {given.path}[{given.tensor_key}] is "
                       f"{str(tensor.dtype)[6:]} {list(tensor.shape)}, the definition wants "
                       f"{spec.dtype.value} {expected}", line)  # fmt: skip
    raw = tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    return spec.dtype.value, expected, raw


def _spec(definition, solution, picked: list, root: Path) -> tuple[dict, dict]:
    """(the harness's SPEC, the blobs key -> (dtype, shape, bytes))."""
    workloads, blobs = {}, {}
    for workload, path, line in picked:
        inputs, fixed = {}, set()
        for name, given in workload.inputs.items():
            if given.type == "safetensors":
                key = f"{workload.uuid}/{name}"
                blobs[key] = _blob(root, name, given, definition, workload, path, line)
                inputs[name] = {"type": "safetensors", "blob": key}
                fixed.update(definition.inputs[name].shape or [])
            else:
                inputs[name] = given.model_dump(mode="json")
        workloads[workload.uuid] = {
            "axes": dict(workload.axes),
            "inputs": inputs,
            "fixed": sorted(fixed),
        }
    spec = {
        "definition": definition.name,
        "entry": solution.get_entry_symbol(),
        "dps": solution.spec.destination_passing_style,
        "sampling": definition.op_type == "sampling",
        "gemm": definition.op_type == "gemm",
        "axes": {a: getattr(s, "value", None) for a, s in definition.axes.items()},
        "inputs": [[n, s.dtype.value, s.shape] for n, s in definition.inputs.items()],
        "outputs": [[n, s.dtype.value, s.shape] for n, s in definition.outputs.items()],
        "workloads": workloads,
    }
    return spec, blobs


def _blobs_module(blobs: dict, where: Path) -> str:
    import base64

    total = sum(len(raw) for _, _, raw in blobs.values())
    if total > BLOB_CAP_BYTES:
        raise FibError(str(where), f"the safetensors inputs of the picked workloads are "
                       f"{total / 2**20:.1f} MiB, over the {BLOB_CAP_BYTES // 2**20} MiB "
                       "shipped with each request")  # fmt: skip
    lines = ['"""Safetensors inputs of the FlashInfer-Bench workloads (generated)."""', "BLOBS = {"]
    for key, (dtype, shape, raw) in sorted(blobs.items()):
        data = base64.b64encode(raw).decode("ascii")
        lines.append(f"    {json.dumps(key)}: ({json.dumps(dtype)}, {shape!r}, {data!r}),")
    return "\n".join(lines + ["}", ""])


def package_name(solution_name: str) -> str:
    """The package the solution's sources are shipped under: ``fib_`` + the name with
    non-identifier characters replaced (``rmsnorm-triton v1`` -> ``fib_rmsnorm_triton_v1``)."""
    return "fib_" + re.sub(r"\W", "_", solution_name, flags=re.ASCII)


def bind_solution(
    path: str | Path,
    *,
    dataset: str | Path | None = None,
    exported: Path | None = None,
) -> FibWorkload:
    """The solution JSON ``path`` bound to its definition and workloads (see the module doc).
    ``exported``: the folder the sources were exported to (``sol/`` beside ``sol.json``): a
    source found there replaces the JSON's, and the kernel module is shown as that file.

    Raises:
        FibError: the package is missing, the file is not a solution of a dataset, or a file
            of the dataset is invalid (file, line, field named).
    """
    data = fib_data()
    path = Path(path).resolve()
    text = path.read_text("utf-8") if path.is_file() else ""
    if not text:
        raise FibError(str(path), "no such file (a FlashInfer-Bench solution JSON)")
    solution = load_model(data.Solution, path, text)
    root = find_root(path, dataset)
    definition, _ = find_definition(root, solution.definition, path, text)
    check_solution(solution, definition, path, text)
    picked = pick_workloads_traced(definition, read_workloads(root, definition))
    spec, blobs = _spec(definition, solution, picked, root)
    package = package_name(solution.name)
    files = {f"{package}/{s.path}": s.content for s in solution.sources if s.path.endswith(".py")}
    entry_file = solution.get_entry_path().as_posix()
    for source in solution.sources if exported is not None else ():
        on_disk = exported / source.path
        if source.path.endswith(".py") and on_disk.is_file():
            files[f"{package}/{source.path}"] = on_disk.read_text("utf-8")
    kernel_path = f"{package}/{entry_file}"
    kernel_module = kernel_path[: -len(".py")].replace("/", ".")
    uuids = [w.uuid for w, _, _ in picked]
    caps = {a: max(int(spec["workloads"][u]["axes"].get(a) or 0) for u in uuids)
            for a, c in spec["axes"].items() if c is None}  # fmt: skip
    caps.update({a: int(c) for a, c in spec["axes"].items() if c is not None})
    caps = {a: caps[a] for a in spec["axes"]}
    harness = harness_source(
        spec, kernel_module=kernel_module, reference_module=REFERENCE_MODULE,
        blobs_module=BLOBS_MODULE, caps=caps, shapes=uuids, solution=solution.name,
        entry_point=solution.spec.entry_point,
    )  # fmt: skip
    files[f"{REFERENCE_MODULE}.py"] = definition.reference
    if blobs:
        files[f"{BLOBS_MODULE}.py"] = _blobs_module(blobs, path)
    files[f"{HARNESS_MODULE}.py"] = harness
    ref = FibRef(
        root=str(root), solution_file=str(path), solution=solution.name,
        definition=definition.name, op_type=definition.op_type, entry_file=entry_file,
        package=package, workloads=tuple(uuids),
    )  # fmt: skip
    return FibWorkload(
        ref=ref,
        files=files,
        kernel_path=kernel_path,
        kernel_module=kernel_module,
        harness_path=f"{HARNESS_MODULE}.py",
        harness_source=harness,
        entry=solution.get_entry_symbol(),
        display=str(exported / entry_file) if exported else f"{path}::{entry_file}",
    )


def pick_workloads_traced(definition, found: list) -> list:
    """:func:`pick_workloads` over (Workload, file, line) triples, keeping the triples."""
    by_uuid = {w.uuid: (w, p, n) for w, p, n in found}
    return [by_uuid[w.uuid] for w in pick_workloads(definition, [w for w, _, _ in found])]


def exported_solution(path: str | Path) -> tuple[Path, str] | None:
    """(the solution JSON, the source's path in it) when ``path`` is a source exported beside
    its solution: ``<dir>/<stem>.json`` and ``<dir>/<stem>/<source path>`` (e.g.
    ``solutions/rmsnorm/rms_triton.json`` and ``solutions/rmsnorm/rms_triton/main.py``).
    Cheap (no package import): the JSON must name the source among its ``sources``. Raises
    nothing."""
    path = Path(path).resolve()
    for folder in list(path.parents)[:4]:
        if not folder.name:  # the file system's root: no JSON beside it
            break
        candidate = folder.with_name(folder.name + ".json")
        if not candidate.is_file():
            continue
        rel = path.relative_to(folder).as_posix()
        try:
            data = json.loads(candidate.read_text("utf-8"))
            names = {s.get("path") for s in data.get("sources", [])}
        except (OSError, ValueError, AttributeError):
            continue
        if rel in names and "spec" in data and "definition" in data:
            return candidate, rel
    return None


def export_sources(path: str | Path) -> list[Path]:
    """Write the sources of the solution JSON ``path`` to ``<dir>/<stem>/`` beside it
    (``solutions/x/sol.json`` -> ``solutions/x/sol/main.py``), where an editor binds them
    back to the solution (:func:`exported_solution`). Returns the files written; a file that
    is already there with the same text is kept. FlashInfer-Bench's loader reads only
    ``*.json`` under ``solutions/``, so the exported ``.py`` files do not disturb it.

    Raises:
        FibError: the JSON is no valid solution, or an exported file exists with other text
            (never overwritten: delete it or edit it).
    """
    path = Path(path).resolve()
    solution = load_model(fib_data().Solution, path)
    folder = path.with_suffix("")
    written = []
    for source in solution.sources:
        target = folder / source.path
        if target.is_file():
            if target.read_text("utf-8") == source.content:
                continue
            raise FibError(str(target), f"exists with other text than {path.name}'s "
                           f"{source.path}; not overwritten")  # fmt: skip
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.content, "utf-8")
        written.append(target)
    return written
