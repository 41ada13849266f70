"""The table model: what a Compare shows, as data.

``Compare`` (compare.py) lays Measurements out as torch does: one table per
label, a row per (num_threads, env, sub_label or stmt), a column per
description, replicates merged first, each median formatted to its column's
precision. This module builds that layout and nothing else, so the text table
(compare.py), the Markdown, CSV and HTML exports (export.py) and the plots
(plot.py) all show the same rows, columns and numbers.

Example:
    >>> from opbench import Measurement, TaskSpec
    >>> ms = [Measurement(1, [t], TaskSpec("f()", "pass", label="L", description=d))
    ...       for t, d in ((1e-6, "a"), (2e-6, "b"))]
    >>> [table] = build(ms)
    >>> table.label, table.unit, table.columns
    ('L', 'us', ('a', 'b'))
    >>> [(row.name, [text.strip() for text in row.texts]) for row in table.rows]
    [('f()', ['1.0', '2.0'])]
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import operator
from collections.abc import Iterable, Sequence

from opbench import _numerics
from opbench.measurement import Measurement, select_unit, trim_sigfig

__all__ = ["Row", "Table", "build"]


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of a table.

    Attributes:
        num_threads, env, name: the row's key (``name`` is the sub_label, else the
            statement).
        cells: one Measurement per column, None where that cell was not measured.
        texts: each cell's median as the text table prints it, in the table's
            unit, padded to the column's width ("(! 12%)" appended to a noisy
            cell when warnings are highlighted); blanks for a missing cell.
        spreads: IQR / median of each cell that carries a variance warning, else None.
    """

    num_threads: int
    env: str
    name: str
    cells: tuple[Measurement | None, ...]
    texts: tuple[str, ...]
    spreads: tuple[float | None, ...]


@dataclasses.dataclass(frozen=True)
class Table:
    """One label's results.

    Attributes:
        label: the label (None when the results had none).
        unit, scale: the time unit every cell is shown in (``"us"``, 1e-6).
        columns: the descriptions, in first-seen order (None: no description).
        rows: sorted by thread count, then env; first-seen order within those.
        highlight_warnings: whether noisy cells are marked in ``texts``.
    """

    label: str | None
    unit: str
    scale: float
    columns: tuple[str | None, ...]
    rows: tuple[Row, ...]
    highlight_warnings: bool

    @property
    def results(self) -> list[Measurement]:
        """Every Measurement in the table."""
        return [m for row in self.rows for m in row.cells if m is not None]

    @property
    def has_envs(self) -> bool:
        """Whether results differ in env (then rows are tagged with it)."""
        return len({row.env for row in self.rows}) > 1

    def groups(self) -> list[list[Row]]:
        """The rows split by thread count (the text table's "N threads:" sections)."""
        return [list(rows) for _, rows in itertools.groupby(self.rows, key=lambda r: r.num_threads)]


def _leading_digits(value: float) -> int:
    """Digits before the decimal point, computed in float32 as torch does."""
    return math.ceil(_numerics.log10_f32(value))


class _ColumnFormat:
    """The number format shared by one column across all row groups (torch's _Column)."""

    def __init__(self, cells: Sequence[Measurement], scale: float, trim: bool,
                 highlight_warnings: bool) -> None:
        self._trim = trim
        self.highlight = highlight_warnings and any(m.has_warnings for m in cells)
        leading = [_leading_digits(m.median / scale) for m in cells]
        decimal_digits = (
            min(max(m.significant_figures - d, 0) for d, m in zip(leading, cells)) if trim else 1
        )
        length = max(leading) + decimal_digits + (1 if decimal_digits else 0)
        warn_width = 7 if self.highlight else 0
        self._template = f"{{:>{length}.{decimal_digits}f}}{{:>{warn_width}}}"

    def text(self, value: float | None, sigfigs: int, spread: float | None) -> str:
        if value is None:
            return " " * len(self.text(1, sigfigs, None))
        if self._trim:
            value = trim_sigfig(value, sigfigs)
        warning = f" (! {spread * 100:.0f}%)" if self.highlight and spread is not None else ""
        return self._template.format(value, warning)


def _table(results: list[Measurement], trim: bool, highlight_warnings: bool) -> Table:
    unit, scale = select_unit(min(r.median for r in results))
    row_keys = list(dict.fromkeys((m.num_threads, m.env, m.as_row_name) for m in results))
    row_keys.sort(key=operator.itemgetter(slice(2)))  # stable: keeps stmt order
    columns = tuple(dict.fromkeys(m.description for m in results))
    grid: dict[tuple[int, str, str], list[Measurement | None]] = {
        key: [None] * len(columns) for key in row_keys}
    col_position = {key: i for i, key in enumerate(columns)}
    for m in results:
        grid[(m.num_threads, m.env, m.as_row_name)][col_position[m.description]] = m
    formats = [
        _ColumnFormat([c for row in grid.values() if (c := row[i]) is not None], scale, trim,
                      highlight_warnings)
        for i in range(len(columns))
    ]
    rows = []
    for key in row_keys:
        cells = grid[key]
        spreads = tuple(m.iqr / m.median if m is not None and m.has_warnings else None
                        for m in cells)
        texts = tuple(
            fmt.text(None, 1, None) if m is None
            else fmt.text(m.median / scale, m.significant_figures, spread)
            for m, fmt, spread in zip(cells, formats, spreads)
        )
        rows.append(Row(*key, cells=tuple(cells), texts=texts, spreads=spreads))
    return Table(
        label=results[0].label, unit=unit, scale=scale, columns=columns, rows=tuple(rows),
        highlight_warnings=any(f.highlight for f in formats),
    )


def build(measurements: Iterable[Measurement], *, trim_significant_figures: bool = False,
          highlight_warnings: bool = False) -> list[Table]:
    """The tables a Compare of ``measurements`` shows, one per label in first-seen order.

    ``trim_significant_figures`` shows each median only to the figures its
    spread supports; ``highlight_warnings`` marks noisy cells.
    """
    by_label: dict[str | None, list[Measurement]] = {}
    for m in Measurement.merge(measurements):
        by_label.setdefault(m.label, []).append(m)
    return [_table(group, trim_significant_figures, highlight_warnings)
            for group in by_label.values()]
