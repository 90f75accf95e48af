"""The gate's scan of a candidate's changed statements: one walk that checks the rules holding in
all changed code (names, builtins, attributes, imports, exception handlers, defaults, stores into
module state), and :meth:`Scan.first` finds the earliest violation."""

from __future__ import annotations

import ast

from ..names import (
    attribute_of,
    canonical_module,
    dotted_name,
    module_statements,
    resolved_name,
)
from .imports import ImportChecks
from .launcher import (
    Reached,
    is_mutable_value,
    root_name,
)
from .original import FUNC_DEFS
from .rules import (
    ATTRIBUTES,
    BUILTINS,
    DYNAMIC_GETATTR,
    PROCESS,
    SWALLOW,
    Violation,
    short_source,
)
from .stack import RAW_MEMORY


class Scan(ImportChecks):
    """The rules that hold in all changed code (kernels, launcher, module level, any function):
    one walk over the changed statements, then :meth:`first` finds the earliest violation. The
    checks of imports and of the names they resolve come from :class:`.imports.ImportChecks`."""

    def __init__(
        self,
        tree: ast.Module,
        stmts: list[ast.stmt],
        aliases: dict[str, str],
        bindings: dict[str, Reached],
        package_depth: int = 0,
        allowed: frozenset[str] | None = None,
    ) -> None:
        self.nodes = [n for s in stmts for n in ast.walk(s)]
        self.package_depth = package_depth  # relative imports may reach this many levels up
        self.allowed = allowed  # the modules it may import (.stack.allowed_modules); None: any
        self.called = {id(n.func) for n in self.nodes if isinstance(n, ast.Call)}
        self.inner = {id(n.value) for n in self.nodes if isinstance(n, ast.Attribute)}
        self.module_imports = {
            (a.asname or a.name).split(".")[0]
            for stmt in module_statements(tree.body)
            if isinstance(stmt, ast.Import) or (isinstance(stmt, ast.ImportFrom) and not stmt.level)
            for a in stmt.names
        }
        self.aliases = dict(aliases)
        for node in self.nodes:  # imports inside changed functions resolve calls too
            if isinstance(node, ast.Import):
                for a in node.names:
                    full = a.name if a.asname else a.name.split(".")[0]
                    self.aliases[a.asname or full] = canonical_module(full)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    module = canonical_module(node.module)
                    self.aliases[a.asname or a.name] = f"{module}.{a.name}"
        self.bound = set(bindings) | set(self.aliases)
        classes = {n for n, r in bindings.items() if isinstance(r.node, ast.ClassDef)}
        self.mutable = {
            n
            for n, r in bindings.items()
            if isinstance(r.node, ast.expr) and is_mutable_value(r.node, self.aliases, classes)
        }

    def first(self) -> Violation | None:
        """The violation on the lowest line (the first found among those on one line)."""
        best: Violation | None = None
        for node in self.nodes:
            handler = _HANDLERS.get(type(node))
            found = handler(self, node) if handler is not None else None
            if found is not None and (best is None or found[2] < best[2]):
                best = found
        return best

    def name(self, node: ast.Name) -> Violation | None:
        rule = BUILTINS.get(node.id)
        if node.id in _ATTR_FUNCS and id(node) not in self.called:
            rule = DYNAMIC_GETATTR  # getattr passed on (reduce(getattr, names, np)) is unread
        if rule is None or node.id in self.bound or not isinstance(node.ctx, ast.Load):
            return None
        return rule[0], f"'{node.id}' is not allowed ({rule[1]})", node.lineno

    def attribute(self, node: ast.Attribute | ast.Call) -> Violation | None:
        attr = attribute_of(node)
        if attr is None:
            return None
        rule = ATTRIBUTES.get(attr[1])
        name = dotted_name(node)
        if rule is None and id(node) in self.inner:
            return None  # the whole chain is judged by its name (``torch.compiler.is_compiling``)
        if rule is None and name is not None:
            alias = name.split(".")[0] in self.aliases
            if alias:
                name = resolved_name(node, self.aliases) or name
            return self._name_violation(name, node, alias=alias)
        if rule is None:
            return None
        return rule[0], f"'{name or short_source(node)}' is not allowed ({rule[1]})", node.lineno

    def call(self, node: ast.Call) -> Violation | None:
        if attribute_of(node) is not None:
            return self.attribute(node)
        func = node.func
        if not (isinstance(func, ast.Name) and func.id in _ATTR_FUNCS and node.args):
            return None
        if func.id in self.bound:
            return None
        constant = len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
        if func.id == "getattr" and constant:
            return self._getattr_constant(node)
        if func.id == "hasattr" and constant:
            return None  # a bool: it reaches nothing
        root = root_name(node.args[0])
        if root is None or root.id not in self.aliases:
            if func.id == "getattr" and len(node.args) > 1:  # any object, by a computed name
                return (
                    DYNAMIC_GETATTR[0],
                    f"'{short_source(node)}' looks up an attribute by a computed name "
                    f"({DYNAMIC_GETATTR[1]})",
                    node.lineno,
                )
            return None
        module = resolved_name(node.args[0], self.aliases) or root.id
        if func.id in ("setattr", "delattr"):
            return (
                "gate: monkey-patching",
                f"'{short_source(node)}' changes '{module}', an imported module or its object "
                "(patching what the harness and the timing use is not allowed)",
                node.lineno,
            )
        return (
            DYNAMIC_GETATTR[0],
            f"'{short_source(node)}' looks up an attribute of '{module}' by a computed name "
            f"({DYNAMIC_GETATTR[1]})",
            node.lineno,
        )

    def _getattr_constant(self, node: ast.Call) -> Violation | None:
        """``getattr(obj, "name")``: judged as ``obj.name`` (issue 53: ``getattr(np,
        "ctypeslib")`` is ``np.ctypeslib``)."""
        attr = node.args[1].value  # type: ignore[attr-defined]
        if not isinstance(attr, str):
            return None
        rule = ATTRIBUTES.get(attr)
        if rule is not None:
            return rule[0], f"'{short_source(node)}' is not allowed ({rule[1]})", node.lineno
        base = dotted_name(node.args[0])
        if base is None:
            return None
        alias = base.split(".")[0] in self.aliases
        name = f"{resolved_name(node.args[0], self.aliases) if alias else base}.{attr}"
        return self._name_violation(name, node, alias=alias)

    def targets(self, node: ast.AST) -> Violation | None:
        for target in _store_targets(node):
            found = self._target(target)
            if found is not None:
                return found
        return None

    def _target(self, t: ast.expr) -> Violation | None:
        if isinstance(t, ast.Name):
            if t.id not in self.module_imports:
                return None
            return (
                "gate: shadowed import",
                f"'{t.id}' is assigned, but it is the imported '{self.aliases.get(t.id, t.id)}' (the gate "
                "resolves calls by their imports; rebinding an import hides what is called)",
                t.lineno,
            )
        root = root_name(t)
        if root is None or root.id not in self.aliases:
            return None
        base = resolved_name(t.value, self.aliases) or ""
        if base == "os.environ" or base.startswith("os.environ."):
            return PROCESS[0], f"'{short_source(t)} = ...' is not allowed ({PROCESS[1]})", t.lineno
        return (
            "gate: monkey-patching",
            f"'{short_source(t)}' is assigned: it patches the imported '{self.aliases[root.id]}' "
            "(patching what the harness and the timing use is not allowed)",
            t.lineno,
        )

    def defaults(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    ) -> Violation | None:
        args = node.args
        named = args.posonlyargs + args.args
        pairs = list(zip(named[len(named) - len(args.defaults) :], args.defaults, strict=True))
        pairs += [
            (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
        ]
        for arg, default in pairs:
            mutable = is_mutable_value(default, self.aliases, set()) or (
                isinstance(default, ast.Name) and default.id in self.mutable
            )
            if mutable:
                where = getattr(node, "name", "lambda")
                return (
                    "gate: mutable default",
                    f"mutable default argument '{arg.arg}={short_source(default, 40)}' in '{where}' "
                    "(a default is made once and shared by every call: a hidden result cache)",
                    default.lineno,
                )
        return None

    def exit_(self, node: ast.ClassDef) -> Violation | None:
        for stmt in node.body:  # issue 53: an array interface is a raw pointer into memory
            named = [stmt.name] if isinstance(stmt, FUNC_DEFS) else []
            named += [t.id for t in _store_targets(stmt) if isinstance(t, ast.Name)]
            for name in named:
                rule = ATTRIBUTES.get(name)
                if rule is not None and name in RAW_MEMORY:
                    return (
                        rule[0],
                        f"'{node.name}.{name}' is not allowed ({rule[1]}: numpy and torch read "
                        "and write any address an array interface names)",
                        stmt.lineno,
                    )
        for fn in node.body:
            if not (isinstance(fn, FUNC_DEFS) and fn.name in ("__exit__", "__aexit__")):
                continue
            for ret in ast.walk(fn):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    if isinstance(ret.value, ast.Constant) and ret.value.value in (None, False):
                        continue
                    return (
                        SWALLOW[0],
                        f"'{node.name}.{fn.name}' returns {short_source(ret.value, 30)}: a context "
                        f"manager that swallows exceptions is not allowed ({SWALLOW[1]})",
                        ret.lineno,
                    )
        return None

    def try_(self, node: ast.AST) -> Violation:
        kind = "except" if getattr(node, "handlers", None) else "finally"
        return (
            "gate: try/except",
            f"try/{kind} is not allowed in code the original does not have (no fallbacks: a "
            "kernel that fails must fail, not fall back)",
            node.lineno,
        )


_ATTR_FUNCS = ("getattr", "hasattr", "setattr", "delattr")


_HANDLERS = {
    ast.Import: Scan.import_,
    ast.ImportFrom: Scan.import_,
    ast.Name: Scan.name,
    ast.Attribute: Scan.attribute,
    ast.Call: Scan.call,
    ast.Assign: Scan.targets,
    ast.AugAssign: Scan.targets,
    ast.AnnAssign: Scan.targets,
    ast.Delete: Scan.targets,
    ast.For: Scan.targets,
    ast.AsyncFor: Scan.targets,
    ast.With: Scan.targets,
    ast.AsyncWith: Scan.targets,
    ast.NamedExpr: Scan.targets,
    ast.FunctionDef: Scan.defaults,
    ast.AsyncFunctionDef: Scan.defaults,
    ast.Lambda: Scan.defaults,
    ast.ClassDef: Scan.exit_,
    ast.Try: Scan.try_,
}


if hasattr(ast, "TryStar"):  # Python >= 3.11
    _HANDLERS[ast.TryStar] = Scan.try_


def _store_targets(node: ast.AST) -> list[ast.expr]:
    """The targets a statement stores into (tuples unpacked)."""
    if isinstance(node, ast.Assign):
        raw = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        raw = [node.target]
    elif isinstance(node, ast.Delete):
        raw = list(node.targets)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        raw = [i.optional_vars for i in node.items if i.optional_vars is not None]
    else:
        raw = []
    out: list[ast.expr] = []
    while raw:
        t = raw.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            raw.extend(t.elts)
        elif isinstance(t, ast.Starred):
            raw.append(t.value)
        else:
            out.append(t)
    return out
