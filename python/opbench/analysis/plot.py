"""Measurements as pictures: bar charts with intervals, and speed-up heatmaps.

Both plots take Measurements (a list, a Compare, or results loaded from a
file) and a path; the file type follows the suffix (``.png``, ``.svg``, or any
other format matplotlib writes). Replicates are merged first and the layout
follows Compare's: one panel per label, a group per row (sub_label or stmt,
with threads and env when they vary), one bar per description.

**Intervals.** Each bar spans the median; its whisker spans the interquartile
range (25th to 75th percentile of the per-run times) unless ``interval`` gives
a better one, e.g. a bootstrap confidence interval: a function from a
Measurement to ``(low, high)`` seconds. The IQR describes the spread of the
runs, not the uncertainty of the median, so with many runs it is wider than
a confidence interval would be: read it as "how noisy", not "how sure".

matplotlib is optional (``pip install matplotlib``, or the ``plot`` extra) and
imported only when plotting (``opbench._figures``). The roofline plot is
``opbench.core.roofline``'s.

Example (needs matplotlib)::

    results = [timer.blocked_autorange() for timer in timers]
    plot_bars(results, "times.svg")                       # or a Compare, or loaded results
    plot_speedup(results, "speedup.png", baseline="eager")  # description "eager" = 1.0x
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from opbench import _figures
from opbench._files import PathLike
from opbench.analysis import table as table_model
from opbench.core.measurement import Measurement
from opbench.stats import numerics as _numerics

__all__ = ["iqr_interval", "plot_bars", "plot_speedup"]

_BY_FIELDS = ("description", "env")


def iqr_interval(m: Measurement) -> tuple[float, float]:
    """The 25th and 75th percentiles of ``m``'s per-run times, in seconds."""
    times = sorted(m.times)
    return _numerics.quantile(times, 0.25), _numerics.quantile(times, 0.75)


def _varying(keys: list[tuple[Any, ...]]) -> list[int]:
    """Indices of the key fields that take more than one value (the rest go unsaid)."""
    return [i for i in range(len(keys[0])) if len({k[i] for k in keys}) > 1] if keys else []


def _key_text(key: tuple[Any, ...], fields: list[int], names: tuple[str, ...]) -> str:
    parts = []
    for i in fields:
        value = key[i]
        parts.append(f"{value} threads" if names[i] == "threads" else str(value))
    return "\n".join(parts)


def plot_bars(
    results: Iterable[Measurement] | Any,
    path: PathLike,
    *,
    title: str | None = None,
    interval: Callable[[Measurement], tuple[float, float]] | None = None,
    log: bool | None = None,
) -> Path:
    """Bars of median time per run with interval whiskers; one panel per label.

    Args:
        results: Measurements or a Compare.
        path: the image to write; its suffix picks the format.
        title: the figure's title (default none; panels are titled by label).
        interval: ``m -> (low, high)`` seconds; default ``iqr_interval``.
        log: a logarithmic time axis; None (default) picks one when a panel's
            medians span more than two orders of magnitude (size sweeps).

    Returns:
        ``path``, as a Path.
    """
    Figure, canvas_cls = _figures.matplotlib()
    interval = interval or iqr_interval
    tables = table_model.build(_figures.measurements(results))
    most_bars = max(len(t.results) for t in tables)
    fig = Figure(figsize=(min(max(6.0, 2.0 + 0.35 * most_bars), 16.0), 3.6 * len(tables)),
                 layout="constrained")
    axes = fig.subplots(len(tables), 1, squeeze=False)[:, 0]
    for ax, table in zip(axes, tables):
        row_keys = [(row.num_threads, row.env, row.name) for row in table.rows]
        columns = table.columns
        width = 0.8 / len(columns)
        for j, column in enumerate(columns):
            xs, heights, lows, highs = [], [], [], []
            for i, row in enumerate(table.rows):
                m = row.cells[j]
                if not isinstance(m, Measurement):  # a missing cell (plots show times only)
                    continue
                low, high = interval(m)
                xs.append(i + (j - (len(columns) - 1) / 2) * width)
                heights.append(m.median / table.scale)
                lows.append(max(m.median - low, 0.0) / table.scale)
                highs.append(max(high - m.median, 0.0) / table.scale)
            ax.bar(xs, heights, width, yerr=[lows, highs], capsize=3,
                   label="" if column is None else str(column))
        shown = _varying(row_keys) or [2]
        ax.set_xticks(range(len(row_keys)))
        ax.set_xticklabels([_key_text(k, shown, ("threads", "env", "row")) for k in row_keys])
        ax.set_ylabel(f"time per run ({table.unit})")
        medians = [m.median for m in table.results]
        if log or (log is None and min(medians) > 0 and max(medians) / min(medians) > 100):
            ax.set_yscale("log")
        ax.set_title("" if table.label is None else str(table.label))
        if len(columns) > 1 or columns[0] is not None:
            ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return _figures.save(fig, canvas_cls, path)


def plot_speedup(
    results: Iterable[Measurement] | Any,
    path: PathLike,
    *,
    baseline: str,
    by: str = "description",
    title: str | None = None,
) -> Path:
    """A heatmap of speed-ups over a sweep: ``baseline median / median`` per cell.

    ``by`` names the field that tells implementations apart (``"description"``,
    the default, or ``"env"`` for A/B runs); ``baseline`` is the value of that
    field to compare against. Rows are the sweep (label, threads and
    sub_label or stmt, e.g. sizes); columns are the other implementations
    (with their env or description when those vary). Above 1 (green) is
    faster than the baseline; a cell without a baseline twin is blank.

    Raises:
        ValueError: ``by`` is not a field above, or no result has ``baseline``.
    """
    if by not in _BY_FIELDS:
        raise ValueError(f"by must be one of {_BY_FIELDS}, got {by!r}")
    Figure, canvas_cls = _figures.matplotlib()
    from matplotlib.colors import TwoSlopeNorm

    measurements = _figures.measurements(results)
    values = list(dict.fromkeys(getattr(m, by) for m in measurements))
    if baseline not in values:
        raise ValueError(f"no result has {by}={baseline!r}; the {by}s are {values}")

    def full_key(m: Measurement, value: Any) -> tuple[Any, ...]:
        env = value if by == "env" else m.env
        description = value if by == "description" else m.description
        return (m.label, m.num_threads, m.as_row_name, env, description)

    medians = {full_key(m, getattr(m, by)): m.median for m in measurements}
    rows: list[tuple[Any, ...]] = []
    cols: list[tuple[Any, ...]] = []
    speedups: dict[tuple[Any, ...], float] = {}
    for m in measurements:
        if getattr(m, by) == baseline:
            continue
        base = medians.get(full_key(m, baseline))
        key = full_key(m, getattr(m, by))
        row, col = key[:3], key[3:]
        rows.append(row)
        cols.append(col)
        if base is not None and m.median > 0:
            speedups[row + col] = base / m.median
    rows, cols = list(dict.fromkeys(rows)), list(dict.fromkeys(cols))
    if not speedups:
        raise ValueError(f"no result has a twin with {by}={baseline!r} to compare against")

    grid = [[speedups.get(r + c, math.nan) for c in cols] for r in rows]
    low, high = min(speedups.values()), max(speedups.values())
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(low, 0.99), vmax=max(high, 1.01))
    fig = Figure(figsize=(max(4.0, 1.4 * len(cols) + 2.5), max(2.5, 0.45 * len(rows) + 1.5)))
    ax = fig.subplots()
    image = ax.imshow(grid, cmap="RdYlGn", norm=norm, aspect="auto")
    for i, values in enumerate(grid):
        for j, v in enumerate(values):
            if not math.isnan(v):
                ax.text(j, i, f"{v:.2f}x", ha="center", va="center", fontsize="small")
    row_fields = _varying(rows) or [2]
    col_fields = _varying(cols) or [1 if by == "description" else 0]
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_key_text(r, row_fields, ("label", "threads", "row")).replace("\n", " | ")
                        for r in rows])
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([_key_text(c, col_fields, ("env", "description")) for c in cols])
    fig.colorbar(image, ax=ax, label=f"speed-up vs {baseline} (higher is faster)")
    ax.set_title(title if title is not None else f"speed-up vs {by} {baseline!r}")
    return _figures.save(fig, canvas_cls, path)
