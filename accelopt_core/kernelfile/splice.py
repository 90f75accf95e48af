"""Splicing a candidate back into its file: :func:`restore_harness` gives a candidate the
ORIGINAL harness, verbatim (candidates may rewrite kernels and launchers, never
``get_inputs`` / ``reference`` / ``BENCH``; DESIGN.md)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from accelopt_core.kernelfile.harness import harness_statements
from accelopt_core.kernelfile.model import HARNESS_NAMES, KernelFile
from accelopt_core.kernelfile.nodes import FUNC_DEF, IMPORT, bound_names, names_loaded
from accelopt_core.kernelfile.positions import Positions, syntax_diagnostic
from accelopt_core.textdiff import offset_of

__all__ = ["restore_harness"]

#: A replacement of ``source[start:end]`` by a text: (start, end, text).
_Edit = tuple[int, int, str]
_Binders = dict[str, list[ast.stmt]]


def restore_harness(
    candidate_source: str, original: KernelFile, *, tree: ast.Module | None = None
) -> str:
    """Give a candidate the ORIGINAL harness, verbatim.

    The candidate's own ``get_inputs`` / ``reference`` / ``BENCH`` (and any harness-only
    helper of the original: a module-level def or assignment used by the harness and by no
    kernel or launcher) are replaced in place by the original's text; missing ones are added
    (helpers before the first harness statement, the rest at the end, in the original order,
    each with its comment block); imports the harness needs and the candidate lacks are added
    after the candidate's imports. Kernels and launchers stay the candidate's, byte for byte.

    ``tree`` is ``candidate_source`` already parsed, when the caller has it (read, not
    mutated). The original's harness pieces are computed once per original file.

    Raises ValueError (``candidate:line:col: syntax error: ...``) when the candidate does not
    parse. An original without a harness (or unparsable) leaves the candidate unchanged.
    """
    cand_tree = tree if tree is not None else _parse_candidate(candidate_source)
    harness = _original_harness(original)
    if harness is None:
        return candidate_source
    cpos = Positions(candidate_source)
    binders = _candidate_binders(cand_tree, harness.parts)
    edits = _replacements(candidate_source, cpos, binders, harness)
    missing = sorted((n for n in harness.parts if n not in binders), key=harness.line_of)
    helpers = [n for n in missing if n not in HARNESS_NAMES]
    at_end = [n for n in missing if n in HARNESS_NAMES]
    if helpers and binders:
        edits.append(_helpers_insertion(cpos, binders, [harness.with_comments(n) for n in helpers]))
    else:
        at_end = helpers + at_end
    imports = harness.import_texts({n for s in cand_tree.body for n in bound_names(s)})
    if imports:
        at = _import_insertion_offset(cand_tree, cpos, candidate_source)
        edits.append((at, at, "\n".join(imports) + "\n"))
    result = _apply(candidate_source, edits)
    return _append(result, [harness.with_comments(n) for n in at_end])


def _parse_candidate(source: str) -> ast.Module:
    """The candidate's module. Raises ValueError ``candidate:line:col: syntax error: ...``."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError) as exc:
        diag = syntax_diagnostic(exc)
        where = f"candidate:{diag.range.start_line}:{diag.range.start_col + 1}"
        raise ValueError(f"{where}: {diag.message}") from None


# --- the original's harness -----------------------------------------------------------------


@dataclass
class _Harness:
    """The original's harness pieces: statements by name (harness roots and harness-only
    helpers) and the imports they need, with the text they are copied from."""

    source: str
    pos: Positions
    parts: dict[str, ast.stmt]
    imports: list[ast.stmt]
    _texts: dict[tuple[str, bool], str] = field(default_factory=dict)

    def line_of(self, name: str) -> int:
        return self.parts[name].lineno

    def text(self, name: str) -> str:
        """The statement's text (decorators and a trailing comment included); computed once."""
        if (name, False) not in self._texts:
            self._texts[name, False] = self.source[slice(*_stmt_span(self.pos, self.parts[name]))]
        return self._texts[name, False]

    def with_comments(self, name: str) -> str:
        """The statement's text with the column-0 comment block above it; computed once."""
        if (name, True) not in self._texts:
            self._texts[name, True] = self._with_comments(name)
        return self._texts[name, True]

    def _with_comments(self, name: str) -> str:
        stmt = self.parts[name]
        first = _leading_comments(self.pos.lines, self.pos.stmt(stmt).start_line)
        start = offset_of(self.pos.lines, first, 0)
        return self.source[start : _stmt_span(self.pos, stmt)[1]]

    def import_texts(self, bound: set[str]) -> list[str]:
        """Texts of the needed imports that bind a name not in ``bound``, in source order."""
        return [
            self.source[slice(*_stmt_span(self.pos, s))]
            for s in self.imports
            if not set(bound_names(s)) <= bound
        ]


#: The harness pieces of the last originals (a search splices every candidate into one).
_HARNESSES: dict[tuple, _Harness | None] = {}
_HARNESSES_KEPT = 8


def _original_harness(original: KernelFile) -> _Harness | None:
    """The original's harness pieces, or None when it has none (or does not parse); computed
    once per original (its source, entry, kernels and launchers) and shared (read only)."""
    if original.harness is None or original.syntax_error is not None:
        return None
    key = (
        original.source,
        original.harness.entry,
        tuple(original.kernel_names),
        tuple(la.name for la in original.launchers),
    )
    if key not in _HARNESSES:
        if len(_HARNESSES) >= _HARNESSES_KEPT:
            _HARNESSES.clear()  # atomic: restore_harness may run in threads
        _HARNESSES[key] = _harness_of(original)
    return _HARNESSES[key]


def _harness_of(original: KernelFile) -> _Harness | None:
    """:func:`_original_harness`, computed."""
    try:
        parts, imports = _harness_parts(original)
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not parts:
        return None
    return _Harness(original.source, Positions(original.source), parts, imports)


def _harness_parts(original: KernelFile) -> tuple[dict[str, ast.stmt], list[ast.stmt]]:
    """The original's harness statements by name (roots and harness-only helpers) and the
    import statements the harness needs, in source order. Raises what :func:`ast.parse` does."""
    tree = ast.parse(original.source)
    binders = _binders(tree.body)
    parts = harness_statements(tree.body)
    entry = original.harness.entry if original.harness else None
    helpers = _harness_only_names(original, parts, binders, entry)
    parts.update(_helper_statements(helpers, binders))
    return parts, _needed_imports(parts, binders)


def _binders(body: list[ast.stmt]) -> _Binders:
    """Name -> the module-level statements that bind it, in source order."""
    binders: _Binders = {}
    for stmt in body:
        for name in bound_names(stmt):
            binders.setdefault(name, []).append(stmt)
    return binders


def _closure(binders: _Binders, starts: set[str], skip: set[str]) -> set[str]:
    """Names reachable from ``starts`` through the names their binding statements use,
    never entering ``skip``; imports end a path."""
    seen: set[str] = set()
    stack = list(starts)
    while stack:
        n = stack.pop()
        if n in seen or n in skip:
            continue
        seen.add(n)
        for s in binders.get(n, []):
            if not isinstance(s, IMPORT):
                stack.extend(names_loaded(s))
    return seen


def _harness_only_names(
    original: KernelFile, roots: dict[str, ast.stmt], binders: _Binders, entry: str | None
) -> set[str]:
    """Module-level names the harness uses and no kernel, launcher or entry reaches."""
    harness = set(HARNESS_NAMES)
    kernel_roots = set(original.kernel_names) | {la.name for la in original.launchers}
    if entry:
        kernel_roots.add(entry)
    kernel_side = _closure(binders, kernel_roots, harness)
    used: set[str] = set()
    for name, stmt in roots.items():
        used |= names_loaded(stmt) - {name}
    if entry:
        used.discard(entry)
    return _closure(binders, used, kernel_side | harness)


def _helper_statements(helpers: set[str], binders: _Binders) -> dict[str, ast.stmt]:
    """Name -> the def / class / assignment that last binds each harness-only helper, when
    that statement binds nothing else than helpers and harness names."""
    out: dict[str, ast.stmt] = {}
    for name in sorted(helpers):
        stmts = [s for s in binders.get(name, []) if not isinstance(s, IMPORT)]
        if not stmts:
            continue
        last = stmts[-1]
        if isinstance(last, (*FUNC_DEF, ast.ClassDef, ast.Assign, ast.AnnAssign)):
            if all(n in helpers or n in HARNESS_NAMES for n in bound_names(last)):
                out[name] = last
    return out


def _needed_imports(parts: dict[str, ast.stmt], binders: _Binders) -> list[ast.stmt]:
    """Imports (not ``__future__``) that last bind a name the harness statements use, in
    source order (the candidate may lack them)."""
    imports: list[ast.stmt] = []
    used = set().union(*(names_loaded(s) for s in parts.values()))
    for name in sorted(used):
        stmts = binders.get(name, [])
        last = stmts[-1] if stmts else None
        if isinstance(last, IMPORT) and last not in imports:
            if not (isinstance(last, ast.ImportFrom) and last.module == "__future__"):
                imports.append(last)
    imports.sort(key=lambda s: s.lineno)
    return imports


# --- edits on the candidate -----------------------------------------------------------------


def _candidate_binders(tree: ast.Module, parts: dict[str, ast.stmt]) -> _Binders:
    """Harness name -> the candidate's non-import statements binding it, in source order."""
    binders: _Binders = {}
    for stmt in tree.body:
        if isinstance(stmt, IMPORT):
            continue
        for name in bound_names(stmt):
            if name in parts:
                binders.setdefault(name, []).append(stmt)
    return binders


def _replacements(source: str, pos: Positions, binders: _Binders, harness: _Harness) -> list[_Edit]:
    """For each harness name the candidate binds: its last binding replaced by the original's
    text, the earlier ones deleted (with their line ending)."""
    edits: dict[int, _Edit] = {}  # id(stmt) -> edit
    for name, stmts in binders.items():
        for s in stmts[:-1]:
            start, end = _stmt_span(pos, s)
            edits.setdefault(id(s), (start, _eat_newline(source, end), ""))
        last = stmts[-1]
        if id(last) in edits and edits[id(last)][2]:
            # One statement binding two harness names (a, b = ...): keep the first replacement.
            continue
        edits[id(last)] = (*_stmt_span(pos, last), harness.text(name))
    return list(edits.values())


def _helpers_insertion(pos: Positions, binders: _Binders, texts: list[str]) -> _Edit:
    """Insert ``texts`` before the comment block of the candidate's first harness statement."""
    first = min((s for ss in binders.values() for s in ss), key=lambda s: s.lineno)
    line = _leading_comments(pos.lines, pos.stmt(first).start_line)
    at = offset_of(pos.lines, line, 0)
    return (at, at, "\n\n\n".join(texts) + "\n\n\n")


def _apply(source: str, edits: list[_Edit]) -> str:
    """``source`` with the edits applied back to front (equal positions: in list order)."""
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        source = source[:start] + text + source[end:]
    return source


def _append(source: str, texts: list[str]) -> str:
    """``source`` with ``texts`` appended, two blank lines before each, one final newline."""
    if not texts:
        return source
    body = source.rstrip("\r\n")
    tail = "\n\n\n".join(texts)
    return (body + "\n\n\n" if body else "") + tail + "\n"


# --- positions of statements ----------------------------------------------------------------


def _stmt_span(pos: Positions, stmt: ast.stmt) -> tuple[int, int]:
    """String offsets of a module-level statement, decorators and a trailing comment on its
    last line included (the line ending excluded)."""
    r = pos.stmt(stmt)
    start = offset_of(pos.lines, r.start_line, r.start_col)
    end = offset_of(pos.lines, r.end_line, r.end_col)
    if 0 < r.end_line <= len(pos.lines):
        line = pos.lines[r.end_line - 1]
        rest = line[r.end_col :].rstrip("\r\n")
        if not rest.strip() or rest.lstrip().startswith("#"):
            end += len(rest)
    return start, end


def _leading_comments(lines: list[str], start_line: int) -> int:
    """First line (1-based) of the column-0 comment block above ``start_line`` (blank lines
    between the block and the statement allowed), or ``start_line`` when there is none."""
    line = start_line
    while line > 1 and not lines[line - 2].strip():
        line -= 1
    first = line
    while first > 1 and lines[first - 2].startswith("#"):
        first -= 1
    return first if first < line else start_line


def _eat_newline(source: str, end: int) -> int:
    """``end`` moved past one line ending (``\\r\\n``, ``\\n`` or ``\\r``) if one starts there."""
    if source.startswith("\r\n", end):
        return end + 2
    if end < len(source) and source[end] in "\r\n":
        return end + 1
    return end


def _import_insertion_offset(tree: ast.Module, pos: Positions, source: str) -> int:
    """Offset just after the module's leading docstring / imports block."""
    last: ast.stmt | None = None
    for i, stmt in enumerate(tree.body):
        is_doc = (
            i == 0
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        )
        if is_doc or isinstance(stmt, IMPORT):
            last = stmt
        else:
            break
    if last is None:
        return 0
    end = _stmt_span(pos, last)[1]
    return _eat_newline(source, end) if end < len(source) else end
