"""The layout's rules, checked on the source tree (README "Architecture").

- No function over 60 lines (its docstring not counted) and no class over 250 lines in
  ``accelopt_core``, ``accelopt_cli`` and ``accelopt_server``.
- Data flows down the layers: the engine never imports the CLI, the server or pygls; the CLI
  and the server never import each other; no feature module imports the server module.
- ``accelopt_core.onsite`` runs on a bare target: its modules import only the standard library
  and each other (relatively) at module level; the kernel's stack (torch, triton, numpy, the
  Neuron SDK) is imported inside functions, where the target has it.
- No module over 500 lines; no import loop between modules (imports inside functions count: a
  loop is not broken by a late import); inside ``onsite`` each room imports only the rooms below
  it (the order in ``accelopt_core/onsite/__init__.py``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("accelopt_core", "accelopt_cli", "accelopt_server")
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 250
MAX_MODULE_LINES = 500
#: The onsite rooms, lowest first (accelopt_core/onsite/__init__.py); rooms of one rank never
#: import each other.
ONSITE_RANKS = {
    "protocol": 0,
    "names": 0,
    "runtime": 1,
    "sandbox": 1,
    "gate": 2,
    "contestant": 3,
    "judge": 4,
    "triton": 5,
    "nki": 5,
    "process": 6,
}
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _modules(package: str) -> list[Path]:
    """The package's modules: ``.py`` files in folders with an ``__init__.py`` (a folder such
    as ``onsite/probes/`` holds kernel files shipped as data, not modules)."""
    return sorted(p for p in (ROOT / package).rglob("*.py") if (p.parent / "__init__.py").is_file())


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text("utf-8"), str(path))


def _function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1


def _imports(tree: ast.Module, *, top_level_only: bool) -> list[tuple[str, int, int]]:
    """(module, level, line) of each import; module-level statements only when asked."""
    if top_level_only:  # module level includes `if TYPE_CHECKING:` / try blocks at top level
        nodes = [n for stmt in tree.body if not isinstance(stmt, _DEFS) for n in ast.walk(stmt)]
    else:
        nodes = list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out.extend((alias.name, 0, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", node.level, node.lineno))
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_no_unit_over_the_size_limits(package: str) -> None:
    too_long = []
    for path in _modules(package):
        for node in ast.walk(_tree(path)):
            where = (
                f"{path.relative_to(ROOT)}:{node.__class__.__name__}:{getattr(node, 'name', '')}"
            )
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := _function_lines(node)) > MAX_FUNCTION_LINES:
                    too_long.append(f"{where} ({n} lines)")
            elif isinstance(node, ast.ClassDef):
                if (n := node.end_lineno - node.lineno + 1) > MAX_CLASS_LINES:
                    too_long.append(f"{where} ({n} lines)")
    assert not too_long, "over the size limits:\n" + "\n".join(too_long)


def _absolute(imports: list[tuple[str, int, int]]) -> list[tuple[str, int]]:
    return [(name, line) for name, level, line in imports if level == 0]


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("accelopt_core", ("accelopt_cli", "accelopt_server", "pygls", "lsprotocol")),
        ("accelopt_cli", ("accelopt_server", "pygls", "lsprotocol")),
        ("accelopt_server", ("accelopt_cli",)),
    ],
)
def test_layers_import_downwards_only(package: str, forbidden: tuple[str, ...]) -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in _modules(package)
        for name, line in _absolute(_imports(_tree(path), top_level_only=False))
        if name.split(".")[0] in forbidden
    ]
    assert not bad, "\n".join(bad)


def test_no_feature_imports_the_server_module() -> None:
    features = ROOT / "accelopt_server" / "features"
    assert features.is_dir(), "accelopt_server/features/ is the features' package"
    bad = []
    for path in sorted(features.rglob("*.py")):
        for name, level, line in _imports(_tree(path), top_level_only=False):
            if (level == 0 and name == "accelopt_server.server") or (
                level == 2 and name == "server"
            ):
                bad.append(f"{path.relative_to(ROOT)}:{line}")
    assert not bad, "features import the server module: " + ", ".join(bad)


def test_onsite_imports_only_the_standard_library_at_module_level() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    bad = []
    for path in _modules("accelopt_core/onsite"):
        for name, level, line in _imports(_tree(path), top_level_only=True):
            if level == 0 and name.split(".")[0] not in stdlib:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "\n".join(bad)


def test_onsite_never_imports_the_host_packages() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in _modules("accelopt_core/onsite")
        for name, line in _absolute(_imports(_tree(path), top_level_only=False))
        if name.split(".")[0] in PACKAGES
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_the_size_limit(package: str) -> None:
    too_long = [
        f"{path.relative_to(ROOT)} ({n} lines)"
        for path in _modules(package)
        if (n := len(path.read_text("utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not too_long, "modules over 500 lines:\n" + "\n".join(too_long)


def _module_graph() -> dict[str, set[str]]:
    """``{dotted module: dotted modules it imports}`` over the three packages, every import
    (inside functions too); ``from pkg import mod`` counts as importing ``pkg.mod``."""
    modules: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in _modules(package):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        out: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                out.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                target = ".".join(base + (node.module.split(".") if node.module else []))
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
                out.update(subs)
                if len(subs) < len(node.names) and known(target):
                    out.add(known(target))
        out.discard(name)
        graph[name] = out
    return graph


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(component) > 1:
                loops.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return loops


def test_no_import_loops() -> None:
    loops = _loops(_module_graph())
    assert not loops, "import loops:\n" + "\n".join(" <-> ".join(c) for c in loops)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports inside ``accelopt_core.onsite`` from a room to one not below it."""
    prefix = "accelopt_core.onsite."
    bad = []
    for name, targets in graph.items():
        if not name.startswith(prefix):
            continue
        room = name[len(prefix) :].split(".")[0]
        assert room in ONSITE_RANKS, f"{name}: a room missing from ONSITE_RANKS"
        for target in targets:
            other = target[len(prefix) :].split(".")[0] if target.startswith(prefix) else None
            if other and other != room and ONSITE_RANKS[other] >= ONSITE_RANKS[room]:
                bad.append(f"{name} imports {target} ({other} is not below {room})")
    return sorted(bad)


def test_onsite_rooms_import_only_the_rooms_below() -> None:
    bad = _upward(_module_graph())
    assert not bad, "\n".join(bad)


def test_the_layout_checks_find_a_loop_and_an_upward_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _loops(graph) == [["a", "b", "c"]]
    on = "accelopt_core.onsite."
    rooms = {
        on + "runtime.loading": {on + "judge.compare", on + "protocol"},
        on + "triton.evaluation": {on + "nki.profile", on + "judge.compare"},
        on + "judge.compare": {on + "judge.rules", on + "runtime.failures"},
    }
    assert _upward(rooms) == [
        f"{on}runtime.loading imports {on}judge.compare (judge is not below runtime)",
        f"{on}triton.evaluation imports {on}nki.profile (nki is not below triton)",
    ]
