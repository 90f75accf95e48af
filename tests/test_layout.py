"""The layout's rules, checked on the source tree (README "Architecture").

- No function over 60 lines (its docstring not counted) and no class over 250 lines in
  ``accelopt_core``, ``accelopt_cli`` and ``accelopt_server``.
- Data flows down the layers: the engine never imports the CLI, the server or pygls; the CLI
  and the server never import each other; no feature module imports the server module.
- ``accelopt_core.onsite`` runs on a bare target: its modules import only the standard library
  and each other (relatively) at module level; the kernel's stack (torch, triton, numpy, the
  Neuron SDK) is imported inside functions, where the target has it.
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
