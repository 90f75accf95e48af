"""Tables that never cut a name or a number (issue 51), for every ``accelopt`` command.

rich shrinks a table that is wider than its console by cutting cells with an ellipsis
(``gathe…``); when stdout is a pipe, a file or a CI log the console is 80 columns wide (or
``$COLUMNS``), so long kernel names, paths and numbers were cut there. :func:`print_table`
lays a table out itself instead:

1. the table at its natural width when that fits the console (what a wide terminal shows);
2. else the same table with the columns marked ``wrap`` (plans, titles, reasons) and the
   headers narrowed and wrapped between words, when every word still fits its column: names
   and numbers stay whole, on one line;
3. else, on a terminal, rich's own squeeze with every cell folded onto more lines (nothing is
   cut); anywhere else a plain list, one block per row (``header: value``, one line each, never
   wrapped by rich), which reads in a log and greps.

Cells are rich markup (escape names with :func:`rich.markup.escape`); the plain list prints
their text without the markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

__all__ = ["Col", "print_heading", "print_table", "table_widths"]

#: Natural width used to measure a table without letting the console shrink it (characters).
_UNBOUNDED = 1_000_000


@dataclass(frozen=True)
class Col:
    """One column of :func:`print_table`: its header, how its cells are justified, whether its
    cells may wrap between words (``wrap``: free text such as plans, titles and reasons; names,
    paths and numbers never do), and a rich style."""

    header: str
    justify: Literal["left", "center", "right"] = "left"
    wrap: bool = False
    style: str | None = None


def _table(title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[str]],
           caption: str | None, widths: Sequence[int] | None, **options: Any) -> Table:  # fmt: skip
    table = Table(title=title, caption=caption, **options)
    for i, col in enumerate(cols):
        table.add_column(
            col.header,
            justify=col.justify,
            style=col.style,
            overflow="fold",
            no_wrap=False,
            width=widths[i] if widths is not None else None,
        )
    for row in rows:
        table.add_row(*row)
    return table


def _measure(out: Console, renderable: str | Table) -> Measurement:
    options = out.options.update_width(_UNBOUNDED)
    return Measurement.get(out, options, renderable)


def table_widths(
    out: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]]
) -> list[int] | None | Literal[False]:
    """The content width of each column (characters) that fits ``out.width`` and shows every
    cell whole: ``None`` when the natural widths fit (no column needs narrowing), a list when
    columns were narrowed (the widest first; a ``wrap`` column never below its longest word,
    another never below its longest cell; a header is wrapped between its words only when
    the cells' wrapping is not enough), and ``False`` when no such layout exists. Raises
    nothing; a row shorter than ``cols`` leaves its last cells empty."""
    natural, whole_head, wrapped_head = [], [], []
    for i, col in enumerate(cols):
        head = _measure(out, col.header)
        sizes = [_measure(out, row[i] if i < len(row) else "") for row in rows]
        natural.append(max(1, head.maximum, *(m.maximum for m in sizes)))
        cells = max([0] + [m.minimum if col.wrap else m.maximum for m in sizes])
        whole_head.append(max(1, head.maximum, cells))
        wrapped_head.append(max(1, head.minimum, cells))
    # Borders, separators and padding: the table at its natural widths, less those widths.
    overhead = _measure(out, _table(None, cols, [], None, natural)).maximum - sum(natural)
    room = out.width - overhead
    if sum(natural) <= room:
        return None
    # Wrap the free-text cells first; the headers too only when that is not enough.
    least = next((low for low in (whole_head, wrapped_head) if sum(low) <= room), None)
    if least is None:
        return False
    widths = list(natural)
    for _ in range(sum(natural) - room):  # the widest column still above its least, by one
        i = max((j for j in range(len(cols)) if widths[j] > least[j]), key=lambda j: widths[j])
        widths[i] -= 1
    return widths


def print_table(
    out: Console,
    title: str,
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    *,
    caption: str | None = None,
    title_justify: Literal["left", "center", "right"] = "center",
) -> None:
    """Print ``rows`` (rich markup cells, one per column of ``cols``) under ``title`` on
    ``out`` without cutting any cell (see the module's docstring for the three layouts: the
    table, the table with its free-text columns wrapped, and the folded table on a terminal or
    the plain list elsewhere). ``caption`` goes under the table (or the list). The table is
    at least as wide as the longest word of its title and caption (a name in a title is not
    folded either)."""
    widths = table_widths(out, cols, rows)
    if widths is not False or out.is_terminal:
        words = f"{Text.from_markup(title).plain} {Text.from_markup(caption or '').plain}"
        least = min(out.width, max(cell_len(word) for word in [*words.split(), ""]))
        out.print(_table(title, cols, rows, caption, widths or None,
                         title_justify=title_justify, min_width=least))  # fmt: skip
        return
    plain = [Text.from_markup(col.header).plain for col in cols]
    out.print(Text.from_markup(title).plain, markup=False, highlight=False, soft_wrap=True)
    for row in rows:
        cells = [" ".join(Text.from_markup(cell).plain.split()) for cell in row]
        lines = [f"{head}: {cell}" for head, cell in zip(plain, cells, strict=False) if cell]
        for n, line in enumerate(lines):
            text = ("- " if n == 0 else "  ") + line
            out.print(text, markup=False, highlight=False, soft_wrap=True)
    if caption:
        out.print(Text.from_markup(caption).plain, markup=False, highlight=False, soft_wrap=True)


def print_heading(out: Console, text: str) -> None:
    """A rule headed with ``text`` (plain text: a path, a name) when the text fits on it, else
    a bare rule and ``text`` on its own line, whole: a :class:`rich.rule.Rule` cuts a title that
    is too long with an ellipsis."""
    if cell_len(text) + 6 <= out.width:
        out.print(Rule(Text(text), align="left"))
        return
    out.print(Rule())
    out.print(text, markup=False, highlight=False, soft_wrap=True)
