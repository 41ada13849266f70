"""Per-call device times from an event timer that counts in steps.

CUDA event timestamps come from a timer that ticks in steps of the *event
quantum* (about 0.5 us), each tick a little off its nominal time. A per-call
window around a kernel of ``d = (k + p) * q`` seconds (``k`` whole steps and a
fraction ``p``) starts at a random point between two ticks, so it reads ``k``
steps with probability ``1 - p`` and ``k + 1`` steps with probability ``p``. The
mean of such readings is ``d``; their median is ``k * q`` or ``(k + 1) * q``,
up to half a step off: 5-15% of a 2-5 us kernel.

The estimator: readings that fall on the same step are spread evenly over the
two steps around it (``±q``), their sum kept (``dequantise``). For the readings
of one kernel the share of spread values under ``d`` is then
``(1 - p)(1 + p) / 2 + p * p / 2 = 1 / 2`` whatever ``p`` is: their median is
``d``, unbiased under quantisation, and their mean is the readings' own. A
kernel whose time varies by more than a step is barely moved (each value by
less than one step, symmetrically).

Per-call windows also read the event record that opens them, which serialises
the kernels: ``per_call_figures`` subtracts that offset (per-call windows less
the same calls timed as one block, measured on the device) after spreading.

Example:
    >>> readings = [2.0e-6] * 6 + [2.5e-6] * 4  # a 2.2 us kernel on a 0.5 us timer
    >>> import statistics
    >>> statistics.median(readings)  # 9% low
    2e-06
    >>> round(statistics.median(dequantise(readings, 5e-7)) * 1e6, 2)
    2.19
"""
from __future__ import annotations

from collections import defaultdict

__all__ = ["MIN_QUANTA", "dequantise", "per_call_figures"]

#: Windows shorter than this many quanta measure the timer's step as much as the
#: statement (a ResolutionWarning says so).
MIN_QUANTA = 20


def dequantise(times: list[float], quantum: float | None) -> list[float]:
    """``times`` with the readings that share a step of ``quantum`` spread evenly over
    ``±quantum`` around it (in the readings' own order within the step), their sum
    kept; ``times`` as they are when the quantum is unknown.

    >>> [round(t * 1e6, 3) for t in dequantise([1e-6, 1e-6], 5e-7)]
    [0.75, 1.25]
    """
    if not quantum or quantum <= 0 or not times:
        return list(times)
    steps: dict[int, list[int]] = defaultdict(list)
    for i, t in enumerate(times):
        steps[round(t / quantum)].append(i)
    out = list(times)
    for members in steps.values():
        m = len(members)
        for j, i in enumerate(sorted(members, key=times.__getitem__)):
            out[i] = times[i] + quantum * (2 * (j + 0.5) / m - 1)
    return out


def per_call_figures(windows: list[float], quantum: float | None, offset: float | None) -> list[float]:
    """Per-call device times from per-call event windows: dequantised, less ``offset``
    (the per-call windows' excess over block timing), never below zero.

    >>> [round(t * 1e6, 2) for t in per_call_figures([3e-6, 3e-6], 5e-7, 4e-8)]
    [2.71, 3.21]
    """
    spread = dequantise(windows, quantum)
    return [max(0.0, t - (offset or 0.0)) for t in spread]
