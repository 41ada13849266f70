"""Throughput: a Measurement's work per second, and where it sits under the roofline.

``Measurement`` inherits these properties; those of the roofline (intensity,
bound, efficiency) are computed by ``opbench.core.roofline``. The work of one run comes from
the TaskSpec when declared (``Timer(..., flops=N, bytes=N)``), else from
``info["work"]`` when counted (``flops="count"``); the ceilings from
``info["peaks"]``, which a Timer attaches from this machine's measured peaks
(``opbench.core.peaks``) for the statement's device, thread count and dtype, so a
result read on another machine keeps the ceilings it was measured under.

Units are SI: ``flop_rate`` in FLOP/s, ``byte_rate`` in bytes/s (GB/s =
1e9 bytes/s, TFLOP/s = 1e12 FLOP/s), all per run at the median time.

Example:
    >>> from opbench import Measurement, TaskSpec
    >>> m = Measurement(1, [2e-3], TaskSpec("y.copy_(x)", "pass", bytes=8e6, flops=0),
    ...                 info={"peaks": {"bandwidth": 1e10, "flop_rate": 1e11}})
    >>> m.byte_rate / 1e9, m.bound, m.efficiency
    (4.0, 'memory', 0.4)
"""
from __future__ import annotations

from typing import Any

from opbench.core import roofline

__all__ = ["Throughput", "declared_or_counted", "describe"]


def declared_or_counted(m: Any, what: str) -> float | None:
    """``what`` ("flops" or "bytes") of one run of ``m``: declared, else counted, else None."""
    value = getattr(m.task_spec, what, None)
    if value is None:
        value = (m.info or {}).get("work", {}).get(what)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rate(work: float | None, seconds: float) -> float | None:
    return None if work is None or not seconds > 0 else work / seconds


class Throughput:
    """The throughput properties of a Measurement (a mixin: needs ``task_spec``,
    ``info`` and ``median``)."""

    task_spec: Any
    info: dict[str, Any]

    @property
    def median(self) -> float:  # defined by the Measurement
        raise NotImplementedError

    @property
    def flops(self) -> float | None:
        """FLOPs of one run, declared or counted; None when unknown."""
        return declared_or_counted(self, "flops")

    @property
    def bytes(self) -> float | None:
        """Bytes moved by one run (read + written), declared or counted; None when unknown."""
        return declared_or_counted(self, "bytes")

    @property
    def flop_rate(self) -> float | None:
        """FLOP/s at the median time."""
        return _rate(self.flops, self.median)

    @property
    def byte_rate(self) -> float | None:
        """Bytes/s at the median time."""
        return _rate(self.bytes, self.median)

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte (inf for FLOPs without memory traffic; None: unknown)."""
        return roofline.arithmetic_intensity(self.flops, self.bytes)

    @property
    def peaks(self) -> dict[str, Any] | None:
        """The ceilings this result is judged against (``info["peaks"]``), or None."""
        return roofline.peaks_of(self.info)

    @property
    def bound(self) -> str | None:
        """``"memory"`` or ``"compute"``: which side of the measured ridge point (peak FLOP
        rate / peak bandwidth) the arithmetic intensity falls; None without both."""
        return roofline.bound(self.arithmetic_intensity, self.peaks)

    @property
    def efficiency(self) -> float | None:
        """The share of the relevant peak reached: the byte rate over the peak bandwidth
        when memory-bound, the FLOP rate over the peak FLOP rate when compute-bound.
        Without a FLOP count (or its peak), the byte rate over the bandwidth. The
        bandwidth peak is main memory's (STREAM beyond the caches): a statement whose
        data fits in cache can exceed 1."""
        return roofline.efficiency(self.bound, self.flop_rate, self.byte_rate, self.peaks)


def _source(m: Any, what: str) -> str:
    return "declared" if getattr(m.task_spec, what, None) is not None else "counted"


def describe(m: Any) -> str | None:
    """One line of throughput for ``Measurement.describe()``; None without known work.

    Example:
        >>> from opbench import Measurement, TaskSpec
        >>> m = Measurement(1, [2e-3], TaskSpec("y.copy_(x)", "pass", bytes=8e6, flops=0),
        ...                 info={"peaks": {"bandwidth": 1e10, "flop_rate": 1e11}})
        >>> line = describe(m)
        >>> line.startswith("  Work: 0 FLOPs (declared), 8e+06 bytes (declared): 4.00 GB/s")
        True
        >>> line.endswith("; memory-bound, 40.0% of peak")
        True
    """
    flops, moved = m.flops, m.bytes
    if flops is None and moved is None:
        reason = (m.info or {}).get("work", {}).get("reason")
        return f"  Work: not counted ({reason})" if reason else None
    parts = []
    if flops is not None:
        parts.append(f"{flops:.4g} FLOPs ({_source(m, 'flops')})")
    if moved is not None:
        parts.append(f"{moved:.4g} bytes ({_source(m, 'bytes')})")
    rates = []
    if m.byte_rate is not None:
        rates.append(f"{m.byte_rate / 1e9:.2f} GB/s")
    if m.flop_rate is not None:
        rates.append(f"{m.flop_rate / 1e12:.4f} TFLOP/s")
    return f"  Work: {', '.join(parts)}: {', '.join(rates)}" + roofline.describe(m)
