"""Compare tables as Markdown, CSV and HTML, beside Compare's torch-identical text.

Every export shows what the text table shows: one table per label, the same
rows (threads, env, sub_label or stmt) in the same order, one column per
description, replicates merged. Markdown and HTML print each median in the
table's unit, formatted as the text table formats it (so
``trim_significant_figures`` and ``highlight_warnings`` carry over); a missing
cell is empty. Colours do not carry over.

Markdown is GitHub's: every label, row and column name escaped
(``opbench._markdown``), so that a name renders as itself and adds no heading,
link or HTML. CSV is for machines: a header, then one line per (label,
num_threads, env, row) x column, every cell of the table including missing
ones (a name that opens with ``=``, ``+``, ``-`` or ``@`` quoted with a leading
``'``, so that a spreadsheet shows it rather than runs it), with

    label, num_threads, env, row, column, median_s, iqr_s, measurements, unit

``median_s`` and ``iqr_s`` are seconds per run at full precision (empty for a
missing cell); ``unit`` is the unit the text table shows that label in
(``ns``, ``us``, ``ms`` or ``s``), for a reader that wants the same scaling.

Every function returns the text and, given ``path``, also writes it there
atomically.

Example:
    >>> from opbench import Compare, Measurement, TaskSpec
    >>> ms = [Measurement(1, [t], TaskSpec("f()", "pass", label="L", description=d))
    ...       for t, d in ((1e-6, "a"), (2e-6, "b"))]
    >>> print(to_markdown(Compare(ms)))
    ### L
    <BLANKLINE>
    | threads |  | a | b |
    |--:|---|--:|--:|
    | 1 | f() | 1.0 | 2.0 |
    <BLANKLINE>
    Times are in microseconds (us).
    <BLANKLINE>
"""
from __future__ import annotations

import csv
import html
import io
from typing import Any, Protocol

from opbench import _markdown as md
from opbench._files import PathLike, atomic_write_text
from opbench.analysis.table import Table, grades
from opbench.core.measurement import Measurement
from opbench.core.memory import MemoryCounts


class _Tables(Protocol):
    """What the exports need of a Compare: its table model."""

    def tables(self) -> list[Table]: ...

__all__ = ["to_csv", "to_html", "to_markdown"]


CSV_HEADER = (
    "label", "num_threads", "env", "row", "column", "median_s", "iqr_s", "measurements", "unit",
)


def _write_text(text: str, path: PathLike | None) -> str:
    if path is not None:
        atomic_write_text(path, text)
    return text


# -- the table model shared by every export ------------------------------------


def _cells(table: Table) -> tuple[list[str], list[list[str]], list[bool]]:
    """Header, body rows (as strings) and which columns are numeric, for one label:
    the text table's rows, in its order, with its number formatting."""
    header = ["threads"] + (["env"] if table.has_envs else []) + [""]
    header += ["" if k is None else k for k in table.columns]
    numeric = [True] + ([False] if table.has_envs else []) + [False] + [True] * len(table.columns)
    body = [
        [str(row.num_threads)] + ([row.env] if table.has_envs else []) + [row.name]
        + [text.strip() for text in row.texts]
        for row in table.rows
    ]
    return header, body, numeric


def _md_lines(note: str | None) -> list[str]:
    """A footnote as Markdown lines (none when there is no note)."""
    return [] if note is None else ["", md.escape(note)]


def to_markdown(compare: _Tables, path: PathLike | None = None) -> str:
    """The Compare as GitHub Markdown: a ``###`` heading and a pipe table per label."""
    parts = []
    for table in compare.tables():
        header, body, numeric = _cells(table)
        # Labels, rows and columns are names: escaped (opbench._markdown), so that they
        # add no heading, link or HTML; multi-line statements break lines in their cell.
        lines = [f"### {md.escape(table.label) if table.label is not None else '(no label)'}", ""]
        lines.append(md.row(header))
        lines.append("|" + "|".join("--:" if n else "---" for n in numeric) + "|")
        lines += [md.row(r) for r in body]
        lines += ["", table.note, *_md_lines(table.disturbance_note()), ""]
        parts.append("\n".join(lines))
    return _write_text("\n".join(parts), path)


def _html_escape(cell: str) -> str:
    return html.escape(cell).replace("\n", "<br>")


# Inline styles of graded cells (``colors=True``): the terminal's colours, so a notebook
# shows what the terminal does, with no stylesheet to carry.
_GRADE_STYLE = {"best": "color:#1a7f37;font-weight:bold", "good": "color:#0550ae;font-weight:bold",
                "bad": "color:#cf222e;opacity:0.7", "very bad": "color:#cf222e;font-weight:bold"}
_BUSY_STYLE = "color:#9a6700;font-weight:bold"


def to_html(compare: _Tables, path: PathLike | None = None, *, colors: str | None = None) -> str:
    """The Compare as HTML ``<table>`` fragments (one per label, captioned with the
    label), every cell escaped; numeric cells carry ``class="num"``. With ``colors``
    (``"columnwise"`` or ``"rowwise"``), cells are coloured as Compare colours the
    terminal (``class="best"``, ``"good"``, ``"bad"``, ``"very-bad"`` and their
    colour inline); a disturbed cell (``(busy)``) has ``class="busy"``."""
    parts = []
    for table in compare.tables():
        header, body, numeric = _cells(table)
        graded: list[list[str | None]] = (
            grades(table, colors == "rowwise") if colors
            else [[None] * len(table.columns) for _ in table.rows])
        caption = "" if table.label is None else table.label
        lines = ['<table class="opbench-compare">', f"<caption>{_html_escape(caption)}</caption>",
                 "<thead>", "<tr>" + "".join(f"<th>{_html_escape(h)}</th>" for h in header) + "</tr>",
                 "</thead>", "<tbody>"]
        for r, row, row_grades in zip(body, table.rows, graded):
            keys = r[:len(r) - len(table.columns)]
            tds = "".join(f'<td class="num">{_html_escape(c)}</td>' if n else
                          f"<td>{_html_escape(c)}</td>" for c, n in zip(keys, numeric))
            tds += "".join(_html_cell(c, g, m) for c, g, m in
                           zip(r[len(keys):], row_grades, row.cells))
            lines.append(f"<tr>{tds}</tr>")
        busy = table.disturbance_note()
        foot = _html_escape(table.note) + (f"<br>{_html_escape(busy)}" if busy else "")
        lines += ["</tbody>", f'<tfoot><tr><td colspan="{len(header)}">{foot}</td></tr></tfoot>',
                  "</table>"]
        parts.append("\n".join(lines))
    return _write_text("\n".join(parts) + "\n", path)


def _html_cell(text: str, grade: str | None, cell: Any) -> str:
    classes, style = ["num"], []
    if grade is not None:
        classes.append(grade.replace(" ", "-"))
        style.append(_GRADE_STYLE[grade])
    if getattr(cell, "disturbed", False):
        classes.append("busy")
        style.append(_BUSY_STYLE)
    attrs = f' style="{";".join(style)}"' if style else ""
    return f'<td class="{" ".join(classes)}"{attrs}>{_html_escape(text)}</td>'


# What makes a spreadsheet read a cell as a formula (OWASP's "CSV injection"), also
# after a tab or line break it skips.
_FORMULA = ("=", "+", "-", "@", "\t", "\n")


def _csv_text(cell: str) -> str:
    """A name as a CSV cell that a spreadsheet shows as text: one that would open a
    formula gets a leading ``'``. A carriage return becomes a line feed, which the
    writer quotes (it would end the record unquoted)."""
    cell = cell.replace("\r\n", "\n").replace("\r", "\n")
    return "'" + cell if cell.startswith(_FORMULA) else cell


def to_csv(compare: _Tables, path: PathLike | None = None) -> str:
    """The Compare as CSV: one line per table cell, values in seconds (see module doc).
    A name that a spreadsheet would run as a formula (it opens with ``=``, ``+``,
    ``-`` or ``@``) is written with a leading ``'``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for table in compare.tables():
        label = "" if table.label is None else _csv_text(table.label)
        for row in table.rows:
            for column, m in zip(table.columns, row.cells):
                if m is None:
                    stats: list[Any] = ["", "", ""]
                elif isinstance(m, Measurement):
                    stats = [repr(m.median), repr(m.iqr), len(m.times)]
                elif isinstance(m, MemoryCounts):  # allocations per call, exact
                    stats = [repr(m.median), "", m.repeats]
                else:  # instruction counts: per run, exact (no spread)
                    stats = [repr(m.per_run), "", len(m.counts)]
                writer.writerow([label, row.num_threads, _csv_text(row.env), _csv_text(row.name),
                                 "" if column is None else _csv_text(column), *stats, table.unit])
    return _write_text(buffer.getvalue(), path)
