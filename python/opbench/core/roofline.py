"""The roofline: where a result sits under this machine's measured ceilings.

A statement moving ``bytes`` and doing ``flops`` per run has an arithmetic
intensity of ``flops / bytes`` FLOPs per byte. Its roof is ``min(peak FLOP
rate, intensity x peak bandwidth)``; the two ceilings meet at the ridge point
(peak FLOP rate / peak bandwidth). Below the ridge a statement is
memory-bound, above it compute-bound, and its efficiency is the share of the
relevant ceiling it reached. The ceilings are a Measurement's
``info["peaks"]``, measured on the machine that ran it (``opbench.core.peaks``);
the work and the rates are its throughput (``opbench.core.throughput``).

This module is the roofline's one home: the computation behind
``Measurement.arithmetic_intensity``, ``bound`` and ``efficiency``, the
"% of peak" column of a Compare table (``opbench.analysis.columns``), the
clause ``Measurement.describe()`` prints, and the plot (``plot_roofline``).

The plot: the x axis is arithmetic intensity (FLOPs per byte), the y axis the
FLOP rate reached; the roof is drawn once per distinct set of peaks, with its
ridge point marked. Benchmarks without known FLOPs and bytes
(``Timer(flops=..., bytes=...)`` or ``"count"``) cannot be placed and are
listed in the figure's footnote instead. A benchmark with zero FLOPs (a copy)
has no point on a log-log plot and is listed the same way. matplotlib is
optional (``pip install matplotlib``, the ``plot`` extra), imported only when
plotting; ``import opbench`` never loads it.

Example:
    >>> ridge(bandwidth=1e10, flop_rate=1e11)  # FLOPs per byte where memory stops limiting
    10.0
    >>> peaks = {"bandwidth": 1e10, "flop_rate": 1e11}
    >>> bound(intensity=0.0, peaks=peaks), efficiency("memory", None, 4e9, peaks)
    ('memory', 0.4)

Plotting (needs matplotlib)::

    ms = [opbench.Timer(stmt, globals=g, flops="count", bytes="count").blocked_autorange()
          for stmt in ("y.copy_(x)", "a @ b")]
    opbench.plot_roofline(ms, "roofline.svg")     # or Compare(ms).plot_roofline(...)
"""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opbench import _figures
from opbench._files import PathLike

__all__ = ["PEAK_COLUMN", "arithmetic_intensity", "bound", "describe", "efficiency",
           "peaks_of", "plot_roofline", "ridge"]


def ridge(bandwidth: float, flop_rate: float) -> float:
    """FLOPs per byte at which the compute ceiling (FLOP/s) meets the memory one (bytes/s)."""
    return flop_rate / bandwidth


def arithmetic_intensity(flops: float | None, moved: float | None) -> float | None:
    """FLOPs per byte (inf for FLOPs without memory traffic; None: unknown or no work)."""
    if flops is None or moved is None or (flops == 0 and moved == 0):
        return None
    return math.inf if moved == 0 else flops / moved


def peaks_of(info: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ceilings a result is judged against (``info["peaks"]``), or None."""
    p = (info or {}).get("peaks")
    return p if isinstance(p, dict) and p.get("bandwidth") else None


def bound(intensity: float | None, peaks: dict[str, Any] | None) -> str | None:
    """``"memory"`` or ``"compute"``: which side of the ridge point ``intensity`` falls;
    None without both an intensity and a FLOP-rate peak."""
    if intensity is None or peaks is None or not peaks.get("flop_rate"):
        return None
    return "memory" if intensity < ridge(peaks["bandwidth"], peaks["flop_rate"]) else "compute"


def efficiency(side: str | None, flop_rate: float | None, byte_rate: float | None,
               peaks: dict[str, Any] | None) -> float | None:
    """The share of the relevant peak reached: the FLOP rate over the peak FLOP rate when
    compute-bound (``side``), else the byte rate (bytes/s) over the peak bandwidth."""
    if peaks is None:
        return None
    if side == "compute":
        return None if flop_rate is None else flop_rate / peaks["flop_rate"]
    return None if byte_rate is None else byte_rate / peaks["bandwidth"]


def describe(m: Any) -> str:
    """The roofline's part of ``Measurement.describe()``'s work line ("" without peaks)."""
    text = ""
    if m.bound is not None and m.efficiency is not None:
        text += f"; {m.bound}-bound, {m.efficiency:.1%} of peak"
    elif m.efficiency is not None:
        text += f"; {m.efficiency:.1%} of peak bandwidth"
    if m.efficiency is not None and m.efficiency > 1 and m.bound != "compute":
        text += " (above memory's peak: the data came from cache)"
    return text


# The "% of peak" column of a Compare table (opbench.analysis.columns):
# (name, the value of a Measurement in percent, the table's note line).
PEAK_COLUMN: tuple[str, Callable[[Any], float | None], str] = (
    "% of peak",
    lambda m: None if m.efficiency is None else m.efficiency * 100,
    "% of peak: of the peak bandwidth (memory-bound) or FLOP rate "
    "(compute-bound) measured where the result was taken (opbench peaks).",
)


def _name(m: Any) -> str:
    parts = [m.task_spec.label, m.task_spec.sub_label or m.task_spec.stmt, m.task_spec.description]
    return " / ".join(str(p) for p in dict.fromkeys(parts) if p)


def plot_roofline(results: Any, path: PathLike, *, title: str | None = None) -> Path:
    """Draws ``results`` (Measurements, a Compare, or loaded results) on the roofline
    of their measured peaks and writes the figure to ``path`` (PNG, SVG, ... by suffix).

    Returns the path written. Raises ImportError without matplotlib, ValueError
    when no result has both FLOPs and bytes and peaks to draw.
    """
    figure_cls, canvas_cls = _figures.matplotlib()
    ms = _figures.measurements(results)
    placed = [m for m in ms if m.arithmetic_intensity and m.flop_rate]
    left_out = [_name(m) for m in ms if m not in placed]
    roofs = {(p["bandwidth"], p["flop_rate"], p.get("dtype"), p.get("threads"))
             for m in placed if (p := m.peaks) and p.get("flop_rate")}
    if not placed:
        raise ValueError("nothing to draw on a roofline: no result has non-zero FLOPs and "
                         "bytes (declare flops=/bytes= or count them with \"count\")")
    fig = figure_cls(figsize=(8, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    intensities = [m.arithmetic_intensity for m in placed]
    lo = min([*intensities, *(ridge(b, f) for b, f, _, _ in roofs)]) / 4
    hi = max([*intensities, *(ridge(b, f) for b, f, _, _ in roofs)]) * 4
    for bandwidth, flop_rate, dtype, threads in sorted(roofs, key=str):
        at = ridge(bandwidth, flop_rate)
        xs = [lo, at, hi]
        ax.plot(xs, [min(flop_rate, x * bandwidth) for x in xs], linewidth=2,
                label=f"peak: {bandwidth / 1e9:.1f} GB/s, {flop_rate / 1e12:.3g} TFLOP/s "
                      f"({dtype}, {threads or 'device'} thr.); ridge {at:.2f} FLOP/B")
        ax.axvline(at, linestyle=":", linewidth=1, color="grey")
    for m in placed:
        ax.scatter([m.arithmetic_intensity], [m.flop_rate], zorder=3,
                   label=f"{_name(m)} ({m.bound or 'no peak'}"
                         + (f", {m.efficiency:.0%} of peak)" if m.efficiency else ")"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs / byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title or "Roofline (measured peaks)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    if left_out:
        fig.text(0.01, 0.01, "not placed (no FLOPs, bytes or peaks): " + ", ".join(left_out),
                 fontsize="small")
    return _figures.save(fig, canvas_cls, path)
