"""The scan's import checks (:class:`.scan.Scan` inherits them): a changed import against the
package depth, ``import *``, the denylist (:func:`.rules.name_rule`, also through a module another
module re-exports: :func:`.stack.reached_module`) and the modules a candidate may import (issue
53: :func:`.stack.module_allowed`). The scan's attribute and ``getattr`` checks judge the names
they resolve with :meth:`ImportChecks._name_violation` too."""

from __future__ import annotations

import ast

from ..names import canonical_module
from .rules import (
    GLOBALS,
    MODULE_NOT_ALLOWED,
    WORKER,
    Violation,
    imported_paths,
    name_rule,
)
from .stack import module_allowed, reached_module


class ImportChecks:
    """The checks of imports and of the dotted names they resolve, mixed into :class:`.scan.Scan`,
    which sets ``package_depth`` (how many levels up a relative import may reach) and
    ``allowed`` (the modules it may import; None: any)."""

    package_depth: int
    allowed: frozenset[str] | None

    def import_(self, node: ast.Import | ast.ImportFrom) -> Violation | None:
        if isinstance(node, ast.ImportFrom) and node.level > self.package_depth:
            where = (
                "beyond the kernel's top-level package"
                if self.package_depth
                else "in a module outside a package"
            )
            return (
                WORKER[0],
                f"a relative import {where} is not allowed ({WORKER[1]})",
                node.lineno,
            )
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return (
                GLOBALS[0],
                f"'from {node.module} import *' is not allowed ({GLOBALS[1]})",
                node.lineno,
            )
        for path in imported_paths(node):
            found = self._name_violation(canonical_module(path), node, alias=True)
            if found is not None:
                return found
        if isinstance(node, ast.ImportFrom) and node.level:
            return None  # the user's own package (the depth is checked above)
        if isinstance(node, ast.ImportFrom) and node.module:
            # ``from neuronxcc import nki``: the module, or else every name taken from it
            module = canonical_module(node.module)
            found = self._module_violation(module, node.lineno)
            if found is None or all(
                self._module_violation(f"{module}.{a.name}", node.lineno) is None
                for a in node.names
            ):
                return None
            return found
        for a in node.names:
            found = self._module_violation(canonical_module(a.name), node.lineno)
            if found is not None:
                return found
        return None

    def _module_violation(self, module: str, line: int, via: str = "") -> Violation | None:
        """``gate: module not allowed`` when ``module`` is in no allowed module (issue 53);
        ``via``: the name that reaches it."""
        if self.allowed is None or module_allowed(module, self.allowed):
            return None
        what = f"'{via}' reaches module '{module}', which" if via else f"module '{module}'"
        return (
            MODULE_NOT_ALLOWED[0],
            f"{what} is not allowed ({MODULE_NOT_ALLOWED[1]}: add '{module.split('.')[0]}' to "
            "it to allow it)",
            line,
        )

    def _name_violation(self, name: str, node: ast.AST, *, alias: bool) -> Violation | None:
        """The denylist's verdict on the canonical dotted ``name`` and, when it reaches another
        module through a re-exported module attribute (``torch.os.system``:
        :func:`.stack.reached_module`), on the name in that module; for a name resolved from an
        import (``alias``), that module must also be allowed. A name rooted in anything else (a
        local ``code``, ``io``, ``self``) is judged by the module it reaches only."""
        rule = name_rule(name) if alias else None
        reached = reached_module(name)
        if rule is None and reached is not None:
            rule = name_rule(reached[1])
            if rule is None and alias:
                return self._module_violation(reached[0], node.lineno, via=name)
        if rule is None:
            return None
        return rule[0], f"'{name}' is not allowed ({rule[1]})", node.lineno
