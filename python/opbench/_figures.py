"""matplotlib on demand, and figures written atomically in the format their path names.

Every opbench figure (``opbench.analysis.plot``'s bars and heatmaps, the roofline of
``opbench.core.roofline``) is drawn on a ``Figure`` with the Agg canvas directly, so
the process's pyplot backend is never changed, and matplotlib (optional: the ``plot``
extra) is imported only when a figure is drawn.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from opbench._files import PathLike, atomic_write

__all__ = ["matplotlib", "measurements", "save"]


def matplotlib() -> tuple[Any, Any]:
    """The Figure class and the Agg canvas, or an ImportError saying what to install."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(
            "opbench's plots need matplotlib, which is not installed: "
            "pip install matplotlib (or pip install 'opbench[plot]')"
        ) from e
    return Figure, FigureCanvasAgg


def measurements(results: Any) -> list[Any]:
    """What a figure draws: ``results`` (Measurements, a Compare, or loaded results) with
    replicates merged (``Measurement.merge``).

    Raises:
        TypeError: an item is not an opbench Measurement.
        ValueError: there is none.
    """
    # A Compare has `.results`; anything else is an iterable of Measurements. Known by
    # what they have (a merge and the throughput properties): Measurement's own module
    # is above this one, and torch's Measurement, which has a merge, has no throughput.
    items = list(getattr(results, "results", results))
    for i, m in enumerate(items):
        if not (hasattr(m, "merge") and hasattr(m, "arithmetic_intensity")):
            raise TypeError(f"results[{i}] is a {type(m).__name__}, not a Measurement")
    if not items:
        raise ValueError("nothing to plot: no Measurements given")
    return list(items[0].merge(items))


def save(fig: Any, canvas_cls: Any, path: PathLike) -> Path:
    """Writes ``fig`` to ``path`` atomically, in the format its suffix names (``.png``,
    ``.svg``, ...); a ValueError names the formats when the suffix is none of them."""
    canvas = canvas_cls(fig)
    fmt = Path(path).suffix.lstrip(".").lower()
    supported = canvas.get_supported_filetypes()
    if fmt not in supported:
        raise ValueError(f"cannot tell the image format from {str(path)!r}: end the name in .png "
                         f"or .svg (or one of {sorted(supported)})")
    return atomic_write(path, lambda f: fig.savefig(f, format=fmt, bbox_inches="tight"))
