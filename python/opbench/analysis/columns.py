"""Compare columns: time, GB/s, TFLOP/s or % of peak in the cells of a Compare table.

``Compare(results, columns=["time", "GB/s"])`` shows, for every description,
one column per metric; the default (``columns=None`` or ``["time"]``) is
torch's table, byte for byte. The rates come from each Measurement's work
(``opbench.core.throughput``: declared or counted) at its median time; "% of
peak" is ``Measurement.efficiency``, the share of the relevant measured peak
(bandwidth when memory-bound, FLOP rate when compute-bound): the roofline's
column, defined with it in ``opbench.core.roofline``. A cell whose
work or peak is unknown reads ``n/a``.

Example:
    >>> from opbench import Compare, Measurement, TaskSpec
    >>> ms = [Measurement(1, [t], TaskSpec("y.copy_(x)", "pass", label="copy", description=d,
    ...                                     bytes=8e6)) for t, d in ((1e-3, "a"), (2e-3, "b"))]
    >>> print(Compare(ms, columns=["time", "GB/s"]))  # doctest: +NORMALIZE_WHITESPACE
    [--------------------------------- copy ---------------------------------]
                      |  a: time (ms)  |  a: GB/s  |  b: time (ms)  |  b: GB/s
    1 threads: ---------------------------------------------------------------
          y.copy_(x)  |      1.0       |    8.00   |      2.0       |    4.00
    <BLANKLINE>
    Times are in milliseconds (ms).
    GB/s: bytes per run / median time (1 GB = 1e9 bytes).
    <BLANKLINE>
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from opbench.analysis.table import Table
from opbench.core import roofline
from opbench.errors import UsageError

__all__ = ["METRICS", "apply", "check"]

TIME = "time"

# Metric -> (the value of a Measurement in the metric's unit, the note line).
_RATES: dict[str, tuple[Callable[[Any], float | None], str]] = {
    "GB/s": (lambda m: None if m.byte_rate is None else m.byte_rate / 1e9,
             "GB/s: bytes per run / median time (1 GB = 1e9 bytes)."),
    "TFLOP/s": (lambda m: None if m.flop_rate is None else m.flop_rate / 1e12,
                "TFLOP/s: FLOPs per run / median time (1 TFLOP = 1e12 FLOPs)."),
    roofline.PEAK_COLUMN[0]: roofline.PEAK_COLUMN[1:],
}
METRICS = (TIME, *_RATES)
_NA = "n/a"


def check(columns: str | Sequence[str] | None) -> tuple[str, ...]:
    """``columns`` as a tuple of known metrics (None: time alone).

    Raises:
        UsageError: an unknown metric, or none at all.
    """
    if columns is None:
        return (TIME,)
    chosen = tuple(c.strip() for c in columns.split(",")) if isinstance(columns, str) \
        else tuple(columns)
    unknown = [c for c in chosen if c not in METRICS]
    if unknown or not chosen:
        raise UsageError(f"Compare columns must be among {', '.join(METRICS)}; got "
                         f"{', '.join(map(repr, unknown)) or 'none'}")
    return tuple(dict.fromkeys(chosen))


@dataclasses.dataclass(frozen=True)
class MetricTable(Table):
    """A Table whose columns are (description, metric) pairs."""

    metrics: tuple[str, ...] = (TIME,)

    @property
    def note(self) -> str:
        lines = [super().note] if TIME in self.metrics else []
        lines += [_RATES[m][1] for m in self.metrics if m in _RATES]
        if any(_NA in text for row in self.rows for text in row.texts):
            lines.append("n/a: work (flops=/bytes=) or peaks unknown for that result.")
        return "\n".join(lines)


def _number(v: float) -> str:
    """Three significant figures without an exponent (rates span orders of magnitude:
    a copy's GB/s and a tiny op's), at most 6 decimals; zero is ``0``."""
    if v == 0:
        return "0"
    decimals = min(max(2 - math.floor(math.log10(abs(v))), 0), 6)
    return f"{v:.{decimals}f}"


def _format(values: list[float | None]) -> Callable[[float | None], str]:
    """One column's cells, right-aligned to its widest."""
    texts = [_NA if v is None or not math.isfinite(v) else _number(v) for v in values]
    width = max(len(t) for t in [*texts, _NA])

    def text(v: float | None) -> str:
        return (_NA if v is None or not math.isfinite(v) else _number(v)).rjust(width)
    return text


def apply(table: Table, metrics: tuple[str, ...]) -> Table:
    """``table`` with each description's column replaced by one per metric."""
    if metrics == (TIME,) or table.unit in ("instructions", "memory"):
        return table
    columns, rows_texts = [], [[] for _ in table.rows]  # type: ignore[var-annotated]
    cells: list[list[Any]] = [[] for _ in table.rows]
    spreads: list[list[float | None]] = [[] for _ in table.rows]
    for i, description in enumerate(table.columns):
        for metric in metrics:
            label = f"time ({table.unit})" if metric == TIME else metric
            if len(metrics) == 1:
                columns.append(label if description is None else description)
            else:
                columns.append(label if description is None else f"{description}: {label}")
            if metric == TIME:
                texts = [row.texts[i] for row in table.rows]
            else:
                value = _RATES[metric][0]
                values = [None if row.cells[i] is None else value(row.cells[i])
                          for row in table.rows]
                fmt = _format(values)
                blank = " " * len(fmt(None))
                texts = [blank if row.cells[i] is None else fmt(v)
                         for row, v in zip(table.rows, values)]
            for r, row in enumerate(table.rows):
                rows_texts[r].append(texts[r])
                cells[r].append(row.cells[i])
                spreads[r].append(row.spreads[i] if metric == TIME else None)
    rows = tuple(dataclasses.replace(row, cells=tuple(cells[r]), texts=tuple(rows_texts[r]),
                                     spreads=tuple(spreads[r]))
                 for r, row in enumerate(table.rows))
    return MetricTable(label=table.label, unit=table.unit, scale=table.scale,
                       columns=tuple(columns), rows=rows,
                       highlight_warnings=table.highlight_warnings, metrics=metrics)

