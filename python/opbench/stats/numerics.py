"""The arithmetic behind torch.utils.benchmark's printed numbers, without torch.

torch computes units, significant figures and trimmed values on float32
tensors (``torch.tensor(python_float)`` is float32) and quantiles on float64
with its own interpolation. For byte-identical text we reproduce that
arithmetic here: round to float32 where torch would, interpolate the way
``torch.quantile`` does. Nothing here imports torch.
"""
from __future__ import annotations

import math
import struct
from collections.abc import Sequence

_F32 = struct.Struct("f")


def f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (what ``torch.tensor(x)`` stores)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:  # beyond float32 range: torch stores inf
        return math.copysign(math.inf, x)


def log10_f32(x: float) -> float:
    """``torch.tensor(x).log10().item()``: float32 input, float32 result."""
    x = f32(x)
    if x < 0 or math.isnan(x):
        return math.nan
    if x == 0:
        return -math.inf
    return f32(math.log10(x))


def _lerp(start: float, end: float, weight: float) -> float:
    # torch.lerp's formula: which side it interpolates from changes the rounding.
    if abs(weight) < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1 - weight)


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """``torch.quantile`` (linear interpolation) of already sorted float64 values."""
    rank = q * (len(sorted_values) - 1)
    below = int(rank)
    above = math.ceil(rank)
    return _lerp(sorted_values[below], sorted_values[above], rank - below)


def std_f32(values: Sequence[float]) -> float:
    """``torch.tensor(values).std(unbiased=False).item()``: float32 data, double accumulation."""
    data = [f32(v) for v in values]
    n = len(data)
    mean = math.fsum(data) / n
    return f32(math.sqrt(math.fsum((v - mean) ** 2 for v in data) / n))


def round_half_even_f32(x: float) -> float:
    """``torch.tensor(x).round()``: float32, ties to even (Python's round does ties to even)."""
    x = f32(x)
    if math.isinf(x) or math.isnan(x):
        return x
    return float(round(x))
