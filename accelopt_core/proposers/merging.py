"""Merging a reply's code into the current source by top-level name.

Models often answer with only what they changed: the launcher alone, the kernel alone, the
kernel and the launcher in two blocks, or a new helper kernel with the kernel that calls it.
:func:`merge_code` folds each such block into the current source:

- a block that defines every top-level function and class of the source's code (the harness
  aside: ``get_inputs``, ``reference`` and the helpers only they use, such as a shape table's
  accessor) is a whole module and replaces it (it may reorder, restructure or drop code);
- otherwise each top-level ``def`` / ``class`` (with its decorators) and each assignment to plain
  names replaces the source's statement of the same name in place; a new name is inserted
  where the block puts it (before the next statement both share, else after the previous one,
  else before the harness); an import that binds a name the source lacks is added after the
  source's imports. Other statements (``if __name__ == ...``, calls, docstrings) are not
  merged, nor are the harness names (``get_inputs``, ``reference``, ``BENCH``), which are
  restored from the original anyway.

A block with no top-level ``def`` or ``class`` is a snippet or a usage example, never merged.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from accelopt_core.kernelfile.model import HARNESS_NAMES
from accelopt_core.kernelfile.nodes import FUNC_DEF, IMPORT, bound_names, names_loaded

#: Names the harness owns: never merged (``restore_harness`` puts the original's back).
_HARNESS = frozenset(HARNESS_NAMES)
_DEFS = (*FUNC_DEF, ast.ClassDef)
#: A statement to insert (its lines) and whether it follows a statement (blank lines before it)
#: rather than precedes one (blank lines after it).
_Insert = tuple[list[str], bool]


@dataclass
class Merged:
    """The result of merging blocks into a source.

    Attributes:
        source / tree: the merged module and its AST.
        changed: names whose statement the blocks replaced with different code.
        added: names the blocks added.
        whole: True when a block replaced the whole module.
    """

    source: str
    tree: ast.Module
    changed: set[str] = field(default_factory=set)
    added: set[str] = field(default_factory=set)
    whole: bool = False


def defines_code(tree: ast.Module) -> bool:
    """True when the module defines at least one top-level function or class."""
    return any(isinstance(node, _DEFS) for node in tree.body)


def merge_code(
    source: str, tree: ast.Module, blocks: list[tuple[str, ast.Module]], entry: str | None = None
) -> Merged:
    """Fold ``blocks`` (code and its AST, in reply order) into ``source`` (parsed as ``tree``);
    ``entry``: the launcher the harness times (else read from ``BENCH["entry"]``).

    Returns a :class:`Merged`; raises SyntaxError when a merge produced code that does not
    parse (it cannot, for blocks and a source that parse, but the caller reports it)."""
    merged = Merged(source, tree)
    for code, block in blocks:
        if _is_whole(block, merged.tree, entry):
            merged = Merged(code, block, whole=True)
            continue
        text, changed, added = _merge_one(merged.source, merged.tree, code, block)
        new_tree = ast.parse(text)
        merged = Merged(
            text,
            new_tree,
            merged.changed | changed,
            (merged.added | added) - changed,
            merged.whole,
        )
    return merged


def unused_additions(merged: Merged) -> list[str]:
    """The names ``merged`` added that nothing else in the module reads, when nothing was
    changed: such a merge does nothing (e.g. a renamed launcher)."""
    if merged.whole or merged.changed:
        return []
    loaded: set[str] = set()
    for node in merged.tree.body:
        if not (set(bound_names(node)) & merged.added):
            loaded |= names_loaded(node)
    return sorted(n for n in merged.added if n not in loaded)


# -- one block -------------------------------------------------------------------------------
def _top_names(tree: ast.Module) -> set[str]:
    return {node.name for node in tree.body if isinstance(node, _DEFS)}


def _is_whole(block: ast.Module, current: ast.Module, entry: str | None) -> bool:
    """The block redefines every top-level function and class of ``current``'s code (the
    harness and its own helpers aside)."""
    wanted = _top_names(current) - _HARNESS - _harness_only(current, entry)
    return bool(wanted) and wanted <= _top_names(block)


def _harness_only(tree: ast.Module, entry: str | None) -> set[str]:
    """Module-level names the harness statements use that no kernel (a ``jit``-decorated def)
    or the launcher reaches: the harness's own helpers."""
    binders: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        if not isinstance(node, IMPORT):
            for name in bound_names(node):
                binders.setdefault(name, []).append(node)
    harness = [n for n in tree.body if set(bound_names(n)) & _HARNESS]
    entry = entry or _bench_entry(harness)
    roots = {n.name for n in tree.body if isinstance(n, FUNC_DEF) and _is_jit(n)}
    roots |= {entry} if entry else set()
    code = _closure(binders, roots, set(_HARNESS))
    used = set().union(*(names_loaded(n) for n in harness)) - roots
    return _closure(binders, used, code | _HARNESS)


def _closure(binders: dict[str, list[ast.stmt]], starts: set[str], skip: set[str]) -> set[str]:
    """Names reachable from ``starts`` through the names their statements read, never
    entering ``skip``."""
    seen: set[str] = set()
    stack = list(starts)
    while stack:
        name = stack.pop()
        if name in seen or name in skip:
            continue
        seen.add(name)
        for node in binders.get(name, []):
            stack.extend(names_loaded(node))
    return seen


def _is_jit(node: ast.stmt) -> bool:
    """A def decorated with something named ``jit`` (``triton.jit``, ``nki.jit``, ...)."""
    return any("jit" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


def _bench_entry(harness: list[ast.stmt]) -> str | None:
    """The plain name ``BENCH = {"entry": name, ...}`` gives, or None."""
    for node in harness:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict):
            for key, item in zip(value.keys, value.values, strict=False):
                if isinstance(key, ast.Constant) and key.value == "entry":
                    return item.id if isinstance(item, ast.Name) else None
    return None


def _span(node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) line range of a top-level statement, decorators included."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start - 1, node.end_lineno or node.lineno


def _mergeable_names(node: ast.stmt) -> list[str]:
    """The names a block statement is merged by: a def/class's name, or an assignment's
    plain-name targets; [] for anything else (and for harness names)."""
    if isinstance(node, _DEFS):
        names = [node.name]
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not all(isinstance(t, (ast.Name, ast.Tuple)) for t in targets):
            return []
        names = bound_names(node)
    else:
        return []
    return [] if set(names) & _HARNESS else names


def _merge_one(
    source: str, tree: ast.Module, code: str, block: ast.Module
) -> tuple[str, set[str], set[str]]:
    """``source`` with ``block`` merged in; the changed names and the added names."""
    lines, code_lines = source.splitlines(), code.splitlines()
    owners: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (*_DEFS, ast.Assign, ast.AnnAssign)):
            for name in bound_names(node):
                owners.setdefault(name, node)
    bound = {n for node in tree.body for n in bound_names(node)}
    replace: dict[int, list[str]] = {}  # start line of a source stmt -> its new text
    inserts: dict[int, list[_Insert]] = {}  # line index -> new statements before it
    changed: set[str] = set()
    added: set[str] = set()
    pending: list[list[str]] = []  # new statements waiting for the next shared one
    last_end: int | None = None
    for node in block.body:
        names = _mergeable_names(node)
        start, end = _span(node)
        text = code_lines[start:end]
        old = next((owners[n] for n in names if n in owners), None)
        if old is not None:
            at, old_end = _span(old)
            if ast.dump(old) != ast.dump(node):
                replace[at] = text
                changed |= set(names)
            before = _comments_above(lines, at)
            inserts.setdefault(before, []).extend((p, False) for p in pending)
            pending, last_end = [], old_end
        elif names:
            pending.append(text)
            added |= set(names)
    imports = _new_imports(block, code_lines, bound)
    if pending and last_end is not None:  # after the last statement both share
        inserts.setdefault(last_end, []).extend((p, True) for p in pending)
    elif pending:
        at = _comments_above(lines, _harness_start(tree, len(lines)))
        inserts.setdefault(at, []).extend((p, False) for p in pending)
    if imports:
        inserts.setdefault(_imports_end(tree), []).insert(0, (imports, False))
    return _rebuild(lines, tree, replace, inserts), changed, added


def _new_imports(block: ast.Module, code_lines: list[str], bound: set[str]) -> list[str]:
    """The block's import statements that bind a name the source does not bind."""
    out: list[str] = []
    for node in block.body:
        if isinstance(node, IMPORT) and set(bound_names(node)) - bound:
            start, end = _span(node)
            out += code_lines[start:end]
    return out


def _imports_end(tree: ast.Module) -> int:
    """Line index after the source's leading docstring and imports (0 without any)."""
    end = 0
    for i, node in enumerate(tree.body):
        doc = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if not (doc or isinstance(node, IMPORT)):
            break
        end = _span(node)[1]
    return end


def _comments_above(lines: list[str], at: int) -> int:
    """``at`` moved up over the column-0 comment lines directly above it."""
    while at > 0 and lines[at - 1].startswith("#"):
        at -= 1
    return at


def _harness_start(tree: ast.Module, n_lines: int) -> int:
    """Line index of the first harness statement (where new code goes when the block shares
    no statement with the source), else the end of the source."""
    for node in tree.body:
        if set(bound_names(node)) & _HARNESS:
            return _span(node)[0]
    return n_lines


def _rebuild(
    lines: list[str],
    tree: ast.Module,
    replace: dict[int, list[str]],
    inserts: dict[int, list[_Insert]],
) -> str:
    """The source lines with the replacements and insertions made (a new statement separated
    from its neighbours by two blank lines; the new imports by none)."""
    spans = {_span(node)[0]: _span(node)[1] for node in tree.body}
    out: list[str] = []
    i = 0
    while i <= len(lines):
        for stmt, after in inserts.get(i, []):
            if stmt and stmt[0].lstrip().startswith(("import ", "from ")):
                out += stmt
            else:
                out += (["", ""] if after else []) + stmt + ([] if after else ["", ""])
        if i == len(lines):
            break
        if i in replace:
            out += replace[i]
            i = spans[i]
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out).rstrip("\n") + "\n"
