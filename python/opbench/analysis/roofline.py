"""The roofline plot: each benchmark as a point under this machine's measured ceilings.

The x axis is arithmetic intensity (FLOPs per byte), the y axis the FLOP
rate reached; the roof is ``min(peak FLOP rate, intensity x peak
bandwidth)`` from the peaks each Measurement carries (``info["peaks"]``,
measured on the machine that ran it: ``opbench.peaks``), drawn once per
distinct set of peaks, with its ridge point marked. Benchmarks without known
FLOPs and bytes (``Timer(flops=..., bytes=...)`` or ``"count"``) cannot be
placed and are listed in the figure's footnote instead. A benchmark with
zero FLOPs (a copy) has no point on a log-log plot and is listed the same way.

matplotlib is optional (``pip install matplotlib``, the ``plot`` extra),
imported only here; ``import opbench`` never loads it.

Example (needs matplotlib)::

    ms = [opbench.Timer(stmt, globals=g, flops="count", bytes="count").blocked_autorange()
          for stmt in ("y.copy_(x)", "a @ b")]
    opbench.plot_roofline(ms, "roofline.svg")     # or Compare(ms).plot_roofline(...)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from opbench.analysis.plot import _matplotlib, _measurements, _save

__all__ = ["plot_roofline"]


def _name(m: Any) -> str:
    parts = [m.task_spec.label, m.task_spec.sub_label or m.task_spec.stmt, m.task_spec.description]
    return " / ".join(str(p) for p in dict.fromkeys(parts) if p)


def plot_roofline(results: Any, path: str, *, title: str | None = None) -> Path:
    """Draws ``results`` (Measurements, a Compare, or loaded results) on the roofline
    of their measured peaks and writes the figure to ``path`` (PNG, SVG, ... by suffix).

    Returns the path written. Raises ImportError without matplotlib, ValueError
    when no result has both FLOPs and bytes and peaks to draw.
    """
    figure_cls, canvas_cls = _matplotlib()
    ms = _measurements(results)
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
    lo = min([*intensities, *(f / b for b, f, _, _ in roofs)]) / 4
    hi = max([*intensities, *(f / b for b, f, _, _ in roofs)]) * 4
    for bandwidth, flop_rate, dtype, threads in sorted(roofs, key=str):
        ridge = flop_rate / bandwidth
        xs = [lo, ridge, hi]
        ax.plot(xs, [min(flop_rate, x * bandwidth) for x in xs], linewidth=2,
                label=f"peak: {bandwidth / 1e9:.1f} GB/s, {flop_rate / 1e12:.3g} TFLOP/s "
                      f"({dtype}, {threads or 'device'} thr.); ridge {ridge:.2f} FLOP/B")
        ax.axvline(ridge, linestyle=":", linewidth=1, color="grey")
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
    return _save(fig, canvas_cls, path)
