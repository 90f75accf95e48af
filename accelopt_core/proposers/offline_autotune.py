"""Edits of a kernel's ``@triton.autotune(configs=[...])`` list (for the offline proposer).

:func:`autotune_site` reads the config list of a kernel (a list literal in the decorator, or a
module-level ``CONFIGS = [...]`` it names); :func:`config_edits` proposes changes to it, each a
minimal text edit of the module:

* ``add``: a new config, the one with the largest block sizes with each block size doubled
  (and the smallest halved), kept within the block bounds (powers of two, 16..8192, 16..128
  for ``tl.dot`` kernels: :data:`accelopt_core.proposers.offline.BLOCK_MAX`);
* ``drop``: remove one config (lists of two or more);
* ``pin``: keep only one config (the autotuner then has nothing to choose);
* ``first``: swap a config with the first one.

Under CPU timing (Triton interpreter) the first config is the one timed, so only edits that
change the block sizes of the first config are proposed (``first`` for each distinct set of
block sizes, ``add`` inserted first); edits that differ only in ``num_warps`` /
``num_stages`` (ignored by the interpreter) are never proposed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from accelopt_core.onsite.names import module_statements
from accelopt_core.proposers.launch_limits import config_problem
from accelopt_core.proposers.offline_values import int_literal
from accelopt_core.textdiff import SourceRange, offset_of, split_lines

__all__ = [
    "ConfigInfo",
    "AutotuneSite",
    "ConfigEdit",
    "autotune_site",
    "config_edits",
    "launchable_edits",
]


@dataclass
class ConfigInfo:
    """One ``triton.Config({...}, num_warps=.., num_stages=..)`` of the list.

    Attributes:
        range: the whole ``triton.Config(...)`` call.
        blocks: its block-size entries (keys with BLOCK or TILE) -> literal value (None when
            not an integer literal).
        literals: the literal nodes of ``blocks``.
        options: ``num_warps`` / ``num_stages`` / other keywords -> literal value or None.
    """

    range: SourceRange
    blocks: dict[str, int | None] = field(default_factory=dict)
    literals: dict[str, ast.Constant] = field(default_factory=dict)
    options: dict[str, int | None] = field(default_factory=dict)

    def describe(self) -> str:
        """``BLOCK_SIZE=128, num_warps=4``."""
        items = {**self.blocks, **self.options}
        return ", ".join(f"{k}={'?' if v is None else v}" for k, v in items.items())


@dataclass
class AutotuneSite:
    """The autotune decorator of a kernel and its config list.

    Attributes:
        kernel: the kernel name; line: 1-based line of the ``@triton.autotune`` decorator.
        list_range: the ``[...]`` list literal (None when not a literal list).
        configs: its configs in order (empty when ``list_range`` is None).
        why_not: why the configs cannot be edited ('' when they can).
        keys: every config key (block sizes and options) seen in the configs.
    """

    kernel: str
    line: int
    list_range: SourceRange | None = None
    configs: list[ConfigInfo] = field(default_factory=list)
    why_not: str = ""
    keys: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ConfigEdit:
    """One edit of the config list: ``op`` (``add``, ``drop``, ``pin``, ``first``) of config
    ``index``; ``hunks`` are the (range, replacement) text edits; ``title`` / ``text`` the
    plan's."""

    op: str
    index: int
    title: str
    text: str
    hunks: tuple[tuple[SourceRange, str], ...]


def _range(node: ast.AST) -> SourceRange:
    return SourceRange(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined,arg-type]


def _is_block(key: str) -> bool:
    return "BLOCK" in key.upper() or "TILE" in key.upper()


def _config_info(node: ast.expr) -> ConfigInfo | None:
    """The config read from ``triton.Config({...}, num_warps=4)``; None for anything else."""
    if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "Config"):
        return None
    mapping = node.args[0] if node.args else None
    for kw in node.keywords:
        if kw.arg == "kwargs":
            mapping = kw.value
    if not isinstance(mapping, ast.Dict):
        return None
    info = ConfigInfo(_range(node))
    for key, value in zip(mapping.keys, mapping.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            info.blocks[key.value] = int_literal(value)
            if int_literal(value) is not None:
                info.literals[key.value] = value  # type: ignore[assignment]
    for kw in node.keywords:
        if kw.arg not in (None, "kwargs"):
            info.options[kw.arg] = int_literal(kw.value)
    return info


def autotune_site(tree: ast.Module, kernel_name: str) -> AutotuneSite | None:
    """The autotune decorator of ``kernel_name`` with its configs; None when not autotuned."""
    fn = next(
        (
            s
            for s in module_statements(tree.body)
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == kernel_name
        ),
        None,
    )
    deco = next(
        (
            d
            for d in (fn.decorator_list if fn else [])
            if isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] == "autotune"
        ),
        None,
    )
    if deco is None:
        return None
    site = AutotuneSite(kernel_name, deco.lineno)
    configs = deco.args[0] if deco.args else None
    for kw in deco.keywords:
        if kw.arg == "configs":
            configs = kw.value
    if isinstance(configs, ast.Name):
        configs = _module_list(tree, configs.id) or configs
    if not isinstance(configs, ast.List):
        shown = ast.unparse(configs) if configs is not None else "nothing"
        site.why_not = f"the configs are {shown[:60]} (line {deco.lineno}), not a list literal"
        return site
    infos = [_config_info(e) for e in configs.elts]
    if not infos or any(i is None for i in infos):
        site.why_not = f"the config list (line {configs.lineno}) holds other than triton.Config"
        return site
    site.list_range, site.configs = _range(configs), infos  # type: ignore[assignment]
    site.keys = list(dict.fromkeys(k for i in site.configs for k in (*i.blocks, *i.options)))
    return site


def _module_list(tree: ast.Module, name: str) -> ast.List | None:
    """The list literal of a module-level ``name = [...]`` bound once."""
    found = [
        s
        for s in module_statements(tree.body)
        if isinstance(s, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)
    ]
    if len(found) == 1 and isinstance(found[0].value, ast.List):
        return found[0].value
    return None


def _text(source: str, lines: list[str], rng: SourceRange) -> str:
    return source[offset_of(lines, *rng.start) : offset_of(lines, *rng.end)]


def _scaled_config(
    source: str, lines: list[str], cfg: ConfigInfo, factor: float, top: int
) -> str | None:
    """The text of ``cfg`` with every literal block size scaled by ``factor`` (None when one
    leaves ``16..top``)."""
    base = offset_of(lines, *cfg.range.start)
    text = _text(source, lines, cfg.range)
    edits = []
    for key, lit in cfg.literals.items():
        if not _is_block(key):
            continue
        new = int(lit.value * factor)
        if not 16 <= new <= top or new & (new - 1):
            return None
        start = offset_of(lines, lit.lineno, lit.col_offset) - base
        end = offset_of(lines, lit.end_lineno or lit.lineno, lit.end_col_offset or 0) - base
        edits.append((start, end, str(new)))
    if not edits:
        return None
    for start, end, new_text in sorted(edits, reverse=True):
        text = text[:start] + new_text + text[end:]
    return text


def _block_key(cfg: ConfigInfo) -> tuple[tuple[str, int | None], ...]:
    return tuple(sorted((k, v) for k, v in cfg.blocks.items() if _is_block(k)))


def _size(cfg: ConfigInfo) -> int:
    size = 1
    for key, value in cfg.blocks.items():
        size *= value if _is_block(key) and value else 1
    return size


def config_edits(source: str, site: AutotuneSite, *, cpu: bool, top: int) -> list[ConfigEdit]:
    """The proposed edits of ``site``'s config list, preferred first (``add`` first). Under
    ``cpu`` timing only edits changing the first config's block sizes (``add`` inserted first,
    ``first``); else ``add`` (appended), ``pin`` and ``drop`` (the GPU autotuner times every
    config, so their order does not matter). ``top`` is the largest block size allowed (8192,
    128 for ``tl.dot`` kernels)."""
    if site.list_range is None or not site.configs:
        return []
    lines = split_lines(source)
    cfgs = site.configs
    edits = _add_edits(source, lines, site, cpu=cpu, top=top)
    seen = {_block_key(cfgs[0])}
    for i, cfg in enumerate(cfgs):
        if cpu and i and _block_key(cfg) not in seen:
            seen.add(_block_key(cfg))
            a, b = _text(source, lines, cfgs[0].range), _text(source, lines, cfg.range)
            edits.append(
                ConfigEdit("first", i, f"autotune: config {i + 1} first ({cfg.describe()})",
                           f"Move config {i + 1} ({cfg.describe()}) of {site.kernel}'s autotune "
                           f"list (line {cfg.range.start_line}) first (swapped with config 1).",
                           ((cfgs[0].range, b), (cfg.range, a))))  # fmt: skip
    if cpu:
        return edits
    for i, cfg in enumerate(cfgs if len(cfgs) > 1 else []):
        edits.append(
            ConfigEdit("pin", i, f"autotune: pin config {i + 1} ({cfg.describe()})",
                       f"Keep only config {i + 1} ({cfg.describe()}) in {site.kernel}'s autotune "
                       f"list (line {site.list_range.start_line}).", _pin_hunks(cfgs, i)))  # fmt: skip
    for i, cfg in enumerate(cfgs if len(cfgs) > 1 else []):
        edits.append(
            ConfigEdit("drop", i, f"autotune: drop config {i + 1} ({cfg.describe()})",
                       f"Remove config {i + 1} ({cfg.describe()}) from {site.kernel}'s autotune "
                       f"list (line {cfg.range.start_line}).",
                       (_drop_hunk(cfgs, i),)))  # fmt: skip
    return edits


def launchable_edits(edits: list[ConfigEdit], cfgs: list[ConfigInfo]) -> list[ConfigEdit]:
    """The ``edits`` after which every config of the list can launch on the GPU (issue 21;
    :func:`accelopt_core.proposers.launch_limits.config_problem`: ``num_warps`` x 32 at most
    1,024 threads per block), since the autotuner compiles and runs each one: ``pin`` keeps a
    launchable config, ``drop`` removes the only unlaunchable one, ``add`` (a copy of a config
    with other blocks, same options) and ``first`` (a reordering) need a list that launches
    already."""
    bad = {i for i, cfg in enumerate(cfgs) if config_problem(cfg.options)}
    if not bad:
        return edits
    out = []
    for edit in edits:
        if (edit.op == "pin" and edit.index not in bad) or (
            edit.op == "drop" and bad == {edit.index}
        ):
            out.append(edit)
    return out


def _pin_hunks(cfgs: list[ConfigInfo], i: int) -> tuple[tuple[SourceRange, str], ...]:
    """The hunks removing every config but ``i``: those before it (up to its start) and
    those after it (from its end)."""
    hunks = []
    if i > 0:
        first, r = cfgs[0].range, cfgs[i].range
        hunks.append(
            (SourceRange(first.start_line, first.start_col, r.start_line, r.start_col), "")
        )
    if i + 1 < len(cfgs):
        r, last = cfgs[i].range, cfgs[-1].range
        hunks.append((SourceRange(r.end_line, r.end_col, last.end_line, last.end_col), ""))
    return tuple(hunks)


def _drop_hunk(cfgs: list[ConfigInfo], i: int) -> tuple[SourceRange, str]:
    """The hunk removing config ``i``: up to the next config, or from the previous one's end."""
    if i + 1 < len(cfgs):
        r, nxt = cfgs[i].range, cfgs[i + 1].range
        return SourceRange(r.start_line, r.start_col, nxt.start_line, nxt.start_col), ""
    prev, r = cfgs[i - 1].range, cfgs[i].range
    return SourceRange(prev.end_line, prev.end_col, r.end_line, r.end_col), ""


def _add_edits(
    source: str, lines: list[str], site: AutotuneSite, *, cpu: bool, top: int
) -> list[ConfigEdit]:
    """``add`` edits (messages number configs from 1, as the judge does): the largest config with its blocks doubled, the smallest halved; inserted
    first under ``cpu`` timing (the first config is the one timed), else appended."""
    cfgs = site.configs
    existing = {_text(source, lines, c.range) for c in cfgs}
    largest = max(range(len(cfgs)), key=lambda i: (_size(cfgs[i]), -i))
    smallest = min(range(len(cfgs)), key=lambda i: (_size(cfgs[i]), i))
    out = []
    for index, factor in ((largest, 2.0), (smallest, 0.5)):
        new = _scaled_config(source, lines, cfgs[index], factor, top)
        if new is None or new in existing:
            continue
        existing.add(new)
        verb = "doubled" if factor > 1 else "halved"
        hunk = _insert_hunk(lines, cfgs, new, first=cpu)
        out.append(
            ConfigEdit("add", index, f"autotune: add config {index + 1} with blocks {verb}",
                       f"Add to {site.kernel}'s autotune list (line {site.list_range.start_line}"  # type: ignore[union-attr]
                       f") a copy of config {index + 1} ({cfgs[index].describe()}) with its block "
                       f"sizes {verb}{', first' if cpu else ''}.", (hunk,)))  # fmt: skip
    return out


def _insert_hunk(
    lines: list[str], cfgs: list[ConfigInfo], new: str, *, first: bool
) -> tuple[SourceRange, str]:
    """Insert config text ``new`` before the first config or after the last: on a line of
    its own when the configs are one per line, else inline."""
    anchor = cfgs[0].range if first else cfgs[-1].range
    line = lines[anchor.start_line - 1]
    own_line = len(cfgs) > 1 and cfgs[0].range.start_line != cfgs[1].range.start_line
    own_line = own_line or line[: anchor.start_col].strip() == ""
    indent = line[: anchor.start_col] if line[: anchor.start_col].strip() == "" else ""
    sep = f",\n{indent}" if own_line and indent else ", "
    if first:
        at = SourceRange(anchor.start_line, anchor.start_col, anchor.start_line, anchor.start_col)
        return at, new + sep
    return SourceRange(anchor.end_line, anchor.end_col, anchor.end_line, anchor.end_col), sep + new
