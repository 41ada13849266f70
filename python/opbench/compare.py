"""Compare: many Measurements as one table per label, torch.utils.benchmark's layout.

Rows are (num_threads, env, sub_label or stmt), columns are descriptions;
replicates of a task are merged first. The text, colours included, is
byte-identical to torch's for the same Measurements. torch 2.13 crashes on a
result whose ``description`` is None and on a label mixing ``env=None`` with a
string env; opbench renders both (an empty column header, "Unspecified env").

Example:
    >>> from opbench import Compare, Measurement, TaskSpec
    >>> ms = [Measurement(1, [t], TaskSpec("f()", "pass", label="L", description=d))
    ...       for t, d in ((1e-6, "a"), (2e-6, "b"))]
    >>> print(Compare(ms))  # doctest: +NORMALIZE_WHITESPACE
    [------- L -------]
               |   a  |   b
    1 threads: --------
          f()  |  1.0 |  2.0
    <BLANKLINE>
    Times are in microseconds (us).
    <BLANKLINE>
"""
from __future__ import annotations

import collections
import enum
import itertools
import math
import operator
from collections.abc import Iterable
from typing import Any

from opbench import _numerics
from opbench.measurement import Measurement, select_unit, trim_sigfig, unit_to_english

__all__ = ["Colorize", "Compare"]

BEST = "\033[92m"
GOOD = "\033[34m"
BAD = "\033[2m\033[91m"
VERY_BAD = "\033[31m"
BOLD = "\033[1m"
TERMINATE = "\033[0m"


class Colorize(enum.Enum):
    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _leading_digits(value: float) -> int:
    """Digits before the decimal point, computed in float32 as torch does."""
    return math.ceil(_numerics.log10_f32(value))


class _Column:
    """Number format shared by one column across all row groups."""

    def __init__(
        self,
        grouped_results: list[tuple[Measurement | None, ...]],
        time_scale: float,
        trim_significant_figures: bool,
        highlight_warnings: bool,
    ) -> None:
        self._grouped_results = grouped_results
        flat = [m for m in itertools.chain.from_iterable(grouped_results) if m is not None]
        self._trim_significant_figures = trim_significant_figures
        self._highlight_warnings = highlight_warnings and any(m.has_warnings for m in flat)
        leading = [_leading_digits(m.median / time_scale) for m in flat]
        unit_digits = max(leading)
        decimal_digits = (
            min(max(m.significant_figures - d, 0) for d, m in zip(leading, flat))
            if trim_significant_figures
            else 1
        )
        length = unit_digits + decimal_digits + (1 if decimal_digits else 0)
        warn_width = 7 if self._highlight_warnings else 0
        self._template = f"{{:>{length}.{decimal_digits}f}}{{:>{warn_width}}}"

    def results_for(self, group: int) -> tuple[Measurement | None, ...]:
        return self._grouped_results[group]

    def num_to_str(self, value: float | None, estimated_sigfigs: int, spread: float | None) -> str:
        if value is None:
            return " " * len(self.num_to_str(1, estimated_sigfigs, None))
        if self._trim_significant_figures:
            value = trim_sigfig(value, estimated_sigfigs)
        warning = (
            f" (! {spread * 100:.0f}%)" if self._highlight_warnings and spread is not None else ""
        )
        return self._template.format(value, warning)


class _Row:
    def __init__(
        self,
        results: list[Measurement | None],
        row_group: int,
        render_env: bool,
        env_str_len: int,
        time_scale: float,
        colorize: Colorize,
        num_threads: int | None,
    ) -> None:
        self._results = results
        self._row_group = row_group
        self._render_env = render_env
        self._env_str_len = env_str_len
        self._time_scale = time_scale
        self._colorize = colorize
        self._columns: tuple[_Column, ...] = ()
        self._num_threads = num_threads

    def register_columns(self, columns: tuple[_Column, ...]) -> None:
        self._columns = columns

    def as_column_strings(self) -> list[str]:
        first = next(r for r in self._results if r is not None)
        env = f"({first.env})" if self._render_env else ""
        output = ["  " + env.ljust(self._env_str_len + 4) + first.as_row_name]
        for m, col in zip(self._results, self._columns):
            if m is None:
                output.append(col.num_to_str(None, 1, None))
            else:
                spread = m.iqr / m.median if m.has_warnings else None
                output.append(
                    col.num_to_str(m.median / self._time_scale, m.significant_figures, spread)
                )
        return output

    @staticmethod
    def color_segment(segment: str, value: float, best_value: float) -> str:
        if value <= best_value * 1.01 or value <= best_value + 100e-9:
            return BEST + BOLD + segment + TERMINATE * 2
        if value <= best_value * 1.1:
            return GOOD + BOLD + segment + TERMINATE * 2
        if value >= best_value * 5:
            return VERY_BAD + BOLD + segment + TERMINATE * 2
        if value >= best_value * 2:
            return BAD + segment + TERMINATE * 2
        return segment

    def row_separator(self, overall_width: int) -> list[str]:
        if self._num_threads is None:
            return []
        return [f"{self._num_threads} threads: ".ljust(overall_width, "-")]

    def _best_values(self, n: int) -> list[float | None]:
        if self._colorize == Colorize.ROWWISE:
            return [min(r.median for r in self._results if r is not None)] * n
        if self._colorize == Colorize.COLUMNWISE:
            return [
                min((r.median for r in col.results_for(self._row_group) if r is not None),
                    default=None)
                for col in self._columns
            ]
        return [-1.0] * n

    def finalize_column_strings(self, column_strings: list[str], col_widths: list[int]) -> list[str]:
        best_values = self._best_values(len(column_strings))
        row = [column_strings[0].ljust(col_widths[0])]
        for col_str, width, result, best in zip(
            column_strings[1:], col_widths[1:], self._results, best_values
        ):
            col_str = col_str.center(width)
            if self._colorize != Colorize.NONE and result is not None and best is not None:
                col_str = self.color_segment(col_str, result.median, best)
            row.append(col_str)
        return row


class _Table:
    """One label's results as rows and columns."""

    def __init__(
        self,
        results: list[Measurement],
        colorize: Colorize,
        trim_significant_figures: bool,
        highlight_warnings: bool,
    ) -> None:
        if len({r.label for r in results}) != 1:
            raise AssertionError("All results must share the same label")
        self.results = results
        self._colorize = colorize
        self._trim_significant_figures = trim_significant_figures
        self._highlight_warnings = highlight_warnings
        self.label = results[0].label
        self.time_unit, self.time_scale = select_unit(min(r.median for r in results))
        self.row_keys = list(dict.fromkeys(self.row_fn(r) for r in results))
        self.row_keys.sort(key=operator.itemgetter(slice(2)))  # stable: keeps stmt order
        self.column_keys = list(dict.fromkeys(self.col_fn(r) for r in results))
        self.rows, self.columns = self._populate_rows_and_columns()

    @staticmethod
    def row_fn(m: Measurement) -> tuple[int, str, str]:
        return m.num_threads, m.env, m.as_row_name

    @staticmethod
    def col_fn(m: Measurement) -> str | None:
        return m.description

    def _populate_rows_and_columns(self) -> tuple[tuple[_Row, ...], tuple[_Column, ...]]:
        ordered: list[list[Measurement | None]] = [[None] * len(self.column_keys) for _ in self.row_keys]
        row_position = {key: i for i, key in enumerate(self.row_keys)}
        col_position = {key: i for i, key in enumerate(self.column_keys)}
        for r in self.results:
            ordered[row_position[self.row_fn(r)]][col_position[self.col_fn(r)]] = r

        unique_envs = {r.env for r in self.results}
        render_env = len(unique_envs) > 1
        env_str_len = max(len(e) for e in unique_envs) if render_env else 0

        rows: list[_Row] = []
        rows_by_group: list[list[list[Measurement | None]]] = []
        prior_num_threads, prior_env = -1, ""
        for (num_threads, env, _), row in zip(self.row_keys, ordered):
            thread_transition = num_threads != prior_num_threads
            if thread_transition:
                prior_num_threads, prior_env = num_threads, ""
                rows_by_group.append([])
            rows.append(
                _Row(
                    results=row,
                    row_group=len(rows_by_group) - 1,
                    render_env=render_env and env != prior_env,
                    env_str_len=env_str_len,
                    time_scale=self.time_scale,
                    colorize=self._colorize,
                    num_threads=num_threads if thread_transition else None,
                )
            )
            rows_by_group[-1].append(row)
            prior_env = env

        columns = tuple(
            _Column(
                grouped_results=[tuple(row[i] for row in g) for g in rows_by_group],
                time_scale=self.time_scale,
                trim_significant_figures=self._trim_significant_figures,
                highlight_warnings=self._highlight_warnings,
            )
            for i in range(len(self.column_keys))
        )
        for row in rows:
            row.register_columns(columns)
        return tuple(rows), columns

    def render(self) -> str:
        header = [""] + ["" if k is None else k for k in self.column_keys]
        string_rows = [header] + [r.as_column_strings() for r in self.rows]
        num_cols = max(len(sr) for sr in string_rows)
        for sr in string_rows:
            sr.extend([""] * (num_cols - len(sr)))

        col_widths = [max(len(cell) for cell in col) for col in zip(*string_rows)]
        lines = ["  |  ".join(cell.center(w) for cell, w in zip(string_rows[0], col_widths))]
        overall_width = len(lines[0])
        for string_row, row in zip(string_rows[1:], self.rows):
            lines.extend(row.row_separator(overall_width))
            lines.append("  |  ".join(row.finalize_column_strings(string_row, col_widths)))

        has_warnings = self._highlight_warnings and any(r.has_warnings for r in self.results)
        title = (" " + (self.label or "") + " ").center(overall_width - 2, "-")
        warning_note = (
            "(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n"
            if has_warnings
            else ""
        )
        return (
            f"[{title}]\n" + "\n".join(lines) + "\n\n"
            f"Times are in {unit_to_english(self.time_unit)}s ({self.time_unit}).\n"
            + warning_note
        )


class Compare:
    """Prints many Measurements as tables: one per label, a row per sub_label (or stmt)
    and thread count, a column per description, env-tagged rows for A/B runs.

    Args:
        results: Measurements to display (replicates of a task are merged).
    """

    def __init__(self, results: Iterable[Measurement]) -> None:
        self._results: list[Measurement] = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self) -> str:
        return "\n".join(self._render())

    def extend_results(self, results: Iterable[Measurement]) -> None:
        """Appends Measurements; raises ValueError for anything else."""
        results = list(results)
        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
        self._results.extend(results)

    def trim_significant_figures(self) -> None:
        """Shows each value only to the significant figures its spread supports."""
        self._trim_significant_figures = True

    def colorize(self, rowwise: bool = False) -> None:
        """Colours each value against the best of its column (or row, if ``rowwise``)."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self) -> None:
        """Marks high-variance values with their IQR / median."""
        self._highlight_warnings = True

    def print(self) -> None:
        print(str(self))

    # -- exports and plots (opbench.export, opbench.plot) -----------------------

    def to_markdown(self, path: str | None = None) -> str:
        """The tables as Markdown (written atomically to ``path`` if given)."""
        from opbench import export

        return export.to_markdown(self, path)

    def to_csv(self, path: str | None = None) -> str:
        """One CSV line per cell, medians in seconds (see ``opbench.export.to_csv``)."""
        from opbench import export

        return export.to_csv(self, path)

    def to_html(self, path: str | None = None) -> str:
        """The tables as escaped HTML."""
        from opbench import export

        return export.to_html(self, path)

    def plot_bars(self, path: str, **kwargs: Any) -> Any:
        """Bars with intervals per row, to PNG/SVG by suffix (needs matplotlib)."""
        from opbench import plot

        return plot.plot_bars(self, path, **kwargs)

    def plot_speedup(self, path: str, *, baseline: str, by: str = "description",
                     **kwargs: Any) -> Any:
        """A speed-up heatmap against ``baseline`` over a size sweep (needs matplotlib)."""
        from opbench import plot

        return plot.plot_speedup(self, path, baseline=baseline, by=by, **kwargs)

    def _tables(self) -> list[_Table]:
        merged = Measurement.merge(self._results)
        by_label: dict[str | None, list[Measurement]] = collections.defaultdict(list)
        for r in merged:
            by_label[r.label].append(r)
        return [
            _Table(group, self._colorize, self._trim_significant_figures, self._highlight_warnings)
            for group in by_label.values()
        ]

    def _render(self) -> list[str]:
        return [table.render() for table in self._tables()]
