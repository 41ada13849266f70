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
    [---------- L ----------]
               |   a   |   b
    1 threads: --------------
          f()  |  1.0  |  2.0
    <BLANKLINE>
    Times are in microseconds (us).
    <BLANKLINE>
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

from opbench.analysis import columns as _columns
from opbench.analysis import export, plot
from opbench.analysis.table import Table, build, grades
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import Measurement
from opbench.core.memory import MemoryCounts

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


# The terminal's colour for each grade (opbench.analysis.table.grade), torch's codes.
_ANSI = {"best": BEST + BOLD, "good": GOOD + BOLD, "very bad": VERY_BAD + BOLD, "bad": BAD}


def _render(table: Table, colorize: Colorize) -> str:
    """torch's text for one table, byte for byte."""
    env_width = max(len(row.env) for row in table.rows) if table.has_envs else 0
    header = ["", *("" if c is None else c for c in table.columns)]
    string_rows = [header]
    for group in table.groups():
        prior_env = ""
        for row in group:
            env = f"({row.env})" if table.has_envs and row.env != prior_env else ""
            prior_env = row.env
            string_rows.append(["  " + env.ljust(env_width + 4) + row.name, *row.texts])
    col_widths = [max(len(cell) for cell in col) for col in zip(*string_rows)]
    lines = ["  |  ".join(cell.center(w) for cell, w in zip(string_rows[0], col_widths))]
    overall_width = len(lines[0])
    body = iter(string_rows[1:])
    graded = iter(grades(table, colorize == Colorize.ROWWISE)) if colorize != Colorize.NONE \
        else None
    for group in table.groups():
        lines.append(f"{group[0].num_threads} threads: ".ljust(overall_width, "-"))
        for _row in group:
            cells = next(body)
            out = [cells[0].ljust(col_widths[0])]
            row_grades = next(graded) if graded is not None else [None] * (len(cells) - 1)
            for text, width, g in zip(cells[1:], col_widths[1:], row_grades):
                text = text.center(width)
                out.append(text if g is None else _ANSI[g] + text + TERMINATE * 2)
            lines.append("  |  ".join(out))
    title = (" " + (table.label or "") + " ").center(overall_width - 2, "-")
    warning_note = (
        "(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n"
        if table.highlight_warnings else ""
    )
    placement = "".join(f"(~) {note}\n" for note in table.placement_notes())
    busy = table.disturbance_note()
    return (
        f"[{title}]\n" + "\n".join(lines) + "\n\n"
        f"{table.note}\n" + warning_note + placement + (f"{busy}\n" if busy else "")
    )


class Compare:
    """Prints many Measurements as tables: one per label, a row per sub_label (or stmt)
    and thread count, a column per description, env-tagged rows for A/B runs.

    Args:
        results: Measurements to display (replicates of a task are merged); or
            instruction counts (``InstructionCounts``, ``CallgrindStats``), laid
            out the same way with instructions per run in each cell; or memory
            counts (``MemoryCounts``, ``Timer.memory``): allocations / bytes per call.
        columns: what each cell shows, one column per metric and description:
            ``"time"`` (the default, torch's table), ``"GB/s"``, ``"TFLOP/s"``,
            ``"% of peak"`` (a list, or a comma-separated string; see
            ``opbench.analysis.columns``).

    Example (instruction counts; needs valgrind)::

        stats = opbench.collect_callgrind_all(timers, number=100)
        print(opbench.Compare(stats))   # one table per label, instructions per run
    """

    def __init__(self, results: Iterable[Any], *,
                 columns: str | Sequence[str] | None = None) -> None:
        self._metrics = _columns.check(columns)
        self._results: list[Any] = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A Compare that torch pickled (loaded through torch's paths) has no columns:
        # it shows torch's one, the time.
        state.setdefault("_metrics", _columns.check(None))
        self.__dict__.update(state)

    def __str__(self) -> str:
        return "\n".join(self._render())

    def extend_results(self, results: Iterable[Any]) -> None:
        """Appends Measurements, or instruction counts (InstructionCounts, or the
        CallgrindStats of ``collect_callgrind``, counted per run with noise symbols
        removed), or MemoryCounts; raises ValueError for anything else."""
        converted = []
        for r in results:
            if hasattr(r, "stmt_exclusive_stats"):
                r = InstructionCounts.from_callgrind(r)
            if not isinstance(r, (Measurement, InstructionCounts, MemoryCounts)):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
            converted.append(r)
        self._results.extend(converted)

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

    def _repr_html_(self) -> str:
        """A notebook's view: the tables as HTML, coloured as ``colorize`` colours the
        terminal, disturbed cells and every footnote shown."""
        colors = None if self._colorize == Colorize.NONE else self._colorize.value
        return export.to_html(self, colors=colors)

    # -- exports and plots (opbench.analysis.export, opbench.analysis.plot) -----------------------

    def to_markdown(self, path: str | None = None) -> str:
        """The tables as Markdown (written atomically to ``path`` if given)."""
        return export.to_markdown(self, path)

    def to_csv(self, path: str | None = None) -> str:
        """One CSV line per cell, medians in seconds (see ``opbench.analysis.export.to_csv``)."""
        return export.to_csv(self, path)

    def to_html(self, path: str | None = None) -> str:
        """The tables as escaped HTML."""
        return export.to_html(self, path)

    def plot_bars(self, path: str, **kwargs: Any) -> Any:
        """Bars with intervals per row, to PNG/SVG by suffix (needs matplotlib)."""
        return plot.plot_bars(self, path, **kwargs)

    def plot_speedup(self, path: str, *, baseline: str, by: str = "description",
                     **kwargs: Any) -> Any:
        """A speed-up heatmap against ``baseline`` over a size sweep (needs matplotlib)."""
        return plot.plot_speedup(self, path, baseline=baseline, by=by, **kwargs)

    def plot_roofline(self, path: str, **kwargs: Any) -> Any:
        """Each result on the measured roofline (needs matplotlib; ``opbench.core.roofline``)."""
        from opbench.core.roofline import plot_roofline

        return plot_roofline(self, path, **kwargs)

    @property
    def results(self) -> list[Any]:
        """The results given (Measurements or InstructionCounts), in order, replicates
        not yet merged."""
        return list(self._results)

    def tables(self) -> list[Table]:
        """What this Compare shows, as data (``opbench.analysis.table``): one Table per label,
        with the rows, columns and formatted numbers of the text."""
        tables = build(self._results, trim_significant_figures=self._trim_significant_figures,
                       highlight_warnings=self._highlight_warnings)
        return [_columns.apply(t, self._metrics) for t in tables]

    def _render(self) -> list[str]:
        return [_render(table, self._colorize) for table in self.tables()]
