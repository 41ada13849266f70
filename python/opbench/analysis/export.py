"""Compare tables as Markdown, CSV and HTML, beside Compare's torch-identical text.

Every export shows what the text table shows: one table per label, the same
rows (threads, env, sub_label or stmt) in the same order, one column per
description, replicates merged. Markdown and HTML print each median in the
table's unit, formatted as the text table formats it (so
``trim_significant_figures`` and ``highlight_warnings`` carry over); a missing
cell is empty. Colours do not carry over.

CSV is for machines: a header, then one line per (label, num_threads, env,
row) x column, every cell of the table including missing ones, with

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

from opbench._files import PathLike, atomic_write_text
from opbench.analysis.table import Table
from opbench.core.measurement import Measurement


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


def _md_escape(cell: str) -> str:
    # A pipe would end the cell and `<` could open an HTML tag; multi-line
    # statements become line breaks inside the cell.
    cell = cell.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
    return cell.replace("\n", "<br>")


def to_markdown(compare: _Tables, path: PathLike | None = None) -> str:
    """The Compare as GitHub Markdown: a ``###`` heading and a pipe table per label."""
    parts = []
    for table in compare.tables():
        header, body, numeric = _cells(table)
        lines = [f"### {_md_escape(table.label) if table.label is not None else '(no label)'}", ""]
        lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
        lines.append("|" + "|".join("--:" if n else "---" for n in numeric) + "|")
        lines += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in body]
        lines += ["", table.note, ""]
        parts.append("\n".join(lines))
    return _write_text("\n".join(parts), path)


def _html_escape(cell: str) -> str:
    return html.escape(cell).replace("\n", "<br>")


def to_html(compare: _Tables, path: PathLike | None = None) -> str:
    """The Compare as HTML ``<table>`` fragments (one per label, captioned with the
    label), every cell escaped; numeric cells carry ``class="num"``."""
    parts = []
    for table in compare.tables():
        header, body, numeric = _cells(table)
        caption = "" if table.label is None else table.label
        lines = ['<table class="opbench-compare">', f"<caption>{_html_escape(caption)}</caption>",
                 "<thead>", "<tr>" + "".join(f"<th>{_html_escape(h)}</th>" for h in header) + "</tr>",
                 "</thead>", "<tbody>"]
        for r in body:
            tds = "".join(
                f'<td class="num">{_html_escape(c)}</td>' if n else f"<td>{_html_escape(c)}</td>"
                for c, n in zip(r, numeric)
            )
            lines.append(f"<tr>{tds}</tr>")
        lines += ["</tbody>", f'<tfoot><tr><td colspan="{len(header)}">'
                  f"{_html_escape(table.note)}</td></tr></tfoot>", "</table>"]
        parts.append("\n".join(lines))
    return _write_text("\n".join(parts) + "\n", path)


def to_csv(compare: _Tables, path: PathLike | None = None) -> str:
    """The Compare as CSV: one line per table cell, values in seconds (see module doc)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for table in compare.tables():
        label = "" if table.label is None else table.label
        for row in table.rows:
            for column, m in zip(table.columns, row.cells):
                if m is None:
                    stats: list[Any] = ["", "", ""]
                elif isinstance(m, Measurement):
                    stats = [repr(m.median), repr(m.iqr), len(m.times)]
                else:  # instruction counts: per run, exact (no spread)
                    stats = [repr(m.per_run), "", len(m.counts)]
                writer.writerow([label, row.num_threads, row.env, row.name,
                                 "" if column is None else column, *stats, table.unit])
    return _write_text(buffer.getvalue(), path)
