"""The table model: what a Compare shows, as data.

``Compare`` (compare.py) lays Measurements out as torch does: one table per
label, a row per (num_threads, env, sub_label or stmt), a column per
description, replicates merged first, each median formatted to its column's
precision. This module builds that layout and nothing else, so the text table
(compare.py), the Markdown, CSV and HTML exports (export.py) and the plots
(plot.py) all show the same rows, columns and numbers.

Instruction counts (``InstructionCounts``) lay out the same way, each cell
the instructions per run, shown whole: counts are exact, so there are no
significant figures to trim. So do memory counts (``MemoryCounts``), each cell
the allocations and bytes allocated per call (``MemoryCounts.cell_text``).

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
from typing import Any, Union

from opbench.core import disturbance as _disturbance
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import Measurement, select_unit, trim_sigfig, unit_to_english
from opbench.core.memory import MemoryCounts
from opbench.stats import numerics as _numerics

__all__ = ["BUSY_MARK", "Row", "Table", "build", "grade", "grades"]

Cell = Union[Measurement, InstructionCounts, MemoryCounts]

#: What a cell the busy machine pushed up carries after its figure (opbench.core.disturbance).
BUSY_MARK = _disturbance.MARK


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of a table.

    Attributes:
        num_threads, env, name: the row's key (``name`` is the sub_label, else the
            statement).
        cells: one Measurement (or InstructionCounts) per column, None where that
            cell was not measured.
        texts: each cell's median as the text table prints it, in the table's
            unit, padded to the column's width ("(! 12%)" appended to a noisy
            cell when warnings are highlighted); blanks for a missing cell.
        spreads: IQR / median of each cell that carries a variance warning, else None.
    """

    num_threads: int
    env: str
    name: str
    cells: tuple[Cell | None, ...]
    texts: tuple[str, ...]
    spreads: tuple[float | None, ...]


@dataclasses.dataclass(frozen=True)
class Table:
    """One label's results.

    Attributes:
        label: the label (None when the results had none).
        unit, scale: the time unit every cell is shown in (``"us"``, 1e-6), or
            ``"instructions"`` and 1 for instruction counts.
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
    def results(self) -> list[Cell]:
        """Every result in the table."""
        return [m for row in self.rows for m in row.cells if m is not None]

    @property
    def note(self) -> str:
        """The line under the table that says what the numbers are."""
        if self.unit == "instructions":
            return "Counts are instructions per run."
        if self.unit == "memory":
            return ("Cells are allocations / bytes allocated per call (Python objects and the "
                    "native heap); a leak is named after them.")
        return f"Times are in {unit_to_english(self.unit)}s ({self.unit})."

    @property
    def has_envs(self) -> bool:
        """Whether results differ in env (then rows are tagged with it)."""
        return len({row.env for row in self.rows}) > 1

    def placement_notes(self) -> list[str]:
        """Cells whose difference from the fastest of their row is smaller than the spread
        that code placement alone gave them (C++ timers built with ``layouts=N``): such a
        difference may be an address accident, not a speed difference."""
        notes = []
        for row in self.rows:
            spread = {i: c.info["layout_spread"] for i, c in enumerate(row.cells)
                      if c is not None and isinstance(c.info.get("layout_spread"), float)}
            if len(spread) < 2:
                continue
            best = min(spread, key=lambda i: row.cells[i].median)  # type: ignore[union-attr]
            for i in spread:
                if i == best:
                    continue
                ratio = row.cells[i].median / row.cells[best].median  # type: ignore[union-attr]
                limit = max(spread[i], spread[best])
                if ratio - 1 < limit:
                    notes.append(f"{row.name}: {self.columns[i]} vs {self.columns[best]} differ "
                                 f"by {ratio - 1:.1%}, within the code-placement spread "
                                 f"({limit:.1%})")
        return notes

    def disturbance_note(self) -> str | None:
        """The footnote for cells the busy machine pushed up (marked ``(busy)``): how many,
        and why; None when there are none (``opbench.core.disturbance.footnote``)."""
        return _disturbance.footnote(self.results)

    def groups(self) -> list[list[Row]]:
        """The rows split by thread count (the text table's "N threads:" sections)."""
        return [list(rows) for _, rows in itertools.groupby(self.rows, key=lambda r: r.num_threads)]


def grade(value: float, best: float) -> str | None:
    """How a value compares with the best of its column (or row), as Compare colours it:
    ``"best"`` (within 1% or 100 ns), ``"good"`` (within 10%), ``"very bad"`` (5x or
    more), ``"bad"`` (2x or more), else None."""
    if value <= best * 1.01 or value <= best + 100e-9:
        return "best"
    if value <= best * 1.1:
        return "good"
    if value >= best * 5:
        return "very bad"
    if value >= best * 2:
        return "bad"
    return None


def grades(table: Table, rowwise: bool = False) -> list[list[str | None]]:
    """Each cell's ``grade`` against the best of its column within its thread group (or
    of its row), row by row; None for a missing cell."""
    out = []
    for group in table.groups():
        for row in group:
            if rowwise:
                best = [min(m.median for m in row.cells if m is not None)] * len(row.cells)
            else:
                best = [min((c.median for r in group if (c := r.cells[i]) is not None),
                            default=math.inf) for i in range(len(row.cells))]
            out.append([None if m is None else grade(m.median, b) for m, b in zip(row.cells, best)])
    return out


def _leading_digits(value: float) -> int:
    """Digits before the decimal point, computed in float32 as torch does."""
    return math.ceil(_numerics.log10_f32(value))


class _ColumnFormat:
    """The number format shared by one column across all row groups (torch's _Column)."""

    def __init__(self, cells: Sequence[Measurement], scale: float, trim: bool,
                 highlight_warnings: bool) -> None:
        self._trim = trim
        self.highlight = highlight_warnings and any(m.high_variance for m in cells)
        # A disturbed cell is always marked (a warning you cannot miss); a column
        # without one keeps torch's width, so an undisturbed table is torch's text.
        self.busy = any(m.disturbed for m in cells)
        leading = [_leading_digits(m.median / scale) for m in cells]
        decimal_digits = (
            min(max(m.significant_figures - d, 0) for d, m in zip(leading, cells)) if trim else 1
        )
        length = max(leading) + decimal_digits + (1 if decimal_digits else 0)
        warn_width = 7 if self.highlight else 0
        busy_width = len(BUSY_MARK) if self.busy else 0
        self._template = f"{{:>{length}.{decimal_digits}f}}{{:>{warn_width}}}{{:<{busy_width}}}"

    def text(self, value: float | None, sigfigs: int, spread: float | None,
             disturbed: bool = False) -> str:
        if value is None:
            return " " * len(self.text(1, sigfigs, None))
        if self._trim:
            value = trim_sigfig(value, sigfigs)
        warning = f" (! {spread * 100:.0f}%)" if self.highlight and spread is not None else ""
        return self._template.format(value, warning, BUSY_MARK if disturbed else "")


def _instructions_text(c: InstructionCounts) -> str:
    return f"{c.per_run:,.0f}"


class _CountFormat:
    """Counts (instructions per run, whole; memory per call), right-aligned to the
    column's widest."""

    def __init__(self, cells: Sequence[Any], text: Any = _instructions_text) -> None:
        self._text = text
        self._width = max(len(text(c)) for c in cells)

    def text(self, c: Any | None) -> str:
        return " " * self._width if c is None else self._text(c).rjust(self._width)


def _row_key(r: Cell) -> tuple[int, str, str]:
    spec = r.task_spec
    env = "Unspecified env" if spec.env is None else spec.env
    return spec.num_threads, env, spec.sub_label or spec.stmt or "[Unknown]"


def _table(results: list[Any], trim: bool, highlight_warnings: bool) -> Table:
    counts = isinstance(results[0], (InstructionCounts, MemoryCounts))
    row_keys = list(dict.fromkeys(_row_key(r) for r in results))
    row_keys.sort(key=operator.itemgetter(slice(2)))  # stable: keeps stmt order
    columns = tuple(dict.fromkeys(r.task_spec.description for r in results))
    grid: dict[tuple[int, str, str], list[Any]] = {key: [None] * len(columns) for key in row_keys}
    col_position = {key: i for i, key in enumerate(columns)}
    for r in results:
        grid[_row_key(r)][col_position[r.task_spec.description]] = r
    by_column = [[c for row in grid.values() if (c := row[i]) is not None]
                 for i in range(len(columns))]
    if counts:
        memory = isinstance(results[0], MemoryCounts)
        unit, scale, highlight = "memory" if memory else "instructions", 1.0, False
        count_formats = [_CountFormat(cells, MemoryCounts.cell_text) if memory
                         else _CountFormat(cells) for cells in by_column]
        rows = [Row(*key, cells=tuple(grid[key]), spreads=(None,) * len(columns),
                    texts=tuple(f.text(c) for f, c in zip(count_formats, grid[key])))
                for key in row_keys]
    else:
        unit, scale = select_unit(min(r.median for r in results))
        formats = [_ColumnFormat(cells, scale, trim, highlight_warnings) for cells in by_column]
        highlight = any(f.highlight for f in formats)
        rows = []
        for key in row_keys:
            cells = grid[key]
            spreads = tuple(m.iqr / m.median if m is not None and m.high_variance else None
                            for m in cells)
            texts = tuple(
                fmt.text(None, 1, None) if m is None
                else fmt.text(m.median / scale, m.significant_figures, spread, m.disturbed)
                for m, fmt, spread in zip(cells, formats, spreads)
            )
            rows.append(Row(*key, cells=tuple(cells), texts=texts, spreads=spreads))
    return Table(label=results[0].task_spec.label, unit=unit, scale=scale, columns=columns,
                 rows=tuple(rows), highlight_warnings=highlight)


def _merge_counts(results: Iterable[InstructionCounts]) -> list[InstructionCounts]:
    """Replicates of one task pooled into one InstructionCounts (their counts joined)."""
    groups: dict[Any, list[InstructionCounts]] = {}
    for c in results:
        groups.setdefault(c.task_spec, []).append(c)
    merged = []
    for group in groups.values():
        first = group[0]
        if isinstance(first, MemoryCounts):
            merged.append(MemoryCounts.joined(group))  # type: ignore[arg-type]
            continue
        if any((c.number_per_run, c.baseline) != (first.number_per_run, first.baseline)
               for c in group):
            raise ValueError(f"replicates of {first.task_spec.key!r} were counted over different "
                             "numbers of runs or baselines: collect them alike to compare them")
        merged.append(dataclasses.replace(first, counts=tuple(n for c in group for n in c.counts)))
    return merged


def build(results: Iterable[Cell], *, trim_significant_figures: bool = False,
          highlight_warnings: bool = False) -> list[Table]:
    """The tables a Compare of ``results`` shows, one per label in first-seen order.

    ``results`` are Measurements, InstructionCounts or MemoryCounts (one kind: a
    time and a count do not share a column). ``trim_significant_figures`` shows each
    median only to the figures its spread supports; ``highlight_warnings``
    marks noisy cells.

    Raises:
        ValueError: times, instruction counts and memory counts mixed.
    """
    results = list(results)
    kinds = {type(r) for r in results}
    if len(kinds) > 1:
        raise ValueError("a Compare shows times, instruction counts or memory counts, one kind: "
                         "make one Compare of each")
    merged: list[Any] = (_merge_counts(results)  # type: ignore[arg-type]
                         if kinds <= {InstructionCounts, MemoryCounts}
                         else Measurement.merge(results))  # type: ignore[arg-type]
    by_label: dict[str | None, list[Any]] = {}
    for r in merged:
        by_label.setdefault(r.task_spec.label, []).append(r)
    return [_table(group, trim_significant_figures, highlight_warnings)
            for group in by_label.values()]
