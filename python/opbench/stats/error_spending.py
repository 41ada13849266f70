"""Spending a decision's error budget ``alpha = 1 - confidence`` over many looks and tests.

Looking again and again at growing data, or deciding a whole suite at one
level, inflates the chance of a false verdict; these rules split ``alpha`` so
that the chance of any false verdict stays at most ``alpha``
(``opbench.stats.decide`` explains each where it is used):

* ``looks`` / ``look_confidence``: ``compare_ab``'s pairs, looked at on a
  geometric schedule; look ``i`` spends ``alpha / (i * (i + 1))`` (the spends sum
  to ``alpha``: a union bound, valid for any stopping rule over the schedule).
* ``run_look_confidence``: rounds of runs (``opbench ab``); earlier looks spend
  ``alpha / 2**(looks - look + 1)``, the last keeps the rest.
* ``holm``: a suite's benchmarks, Holm's step-down procedure (Holm 1979).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["holm", "look_confidence", "looks", "run_look_confidence"]

# Pair counts at which compare_ab looks: min_pairs, then 25% more each time
# (geometric: few looks over a long run, each cheap to spend error on).
_LOOK_GROWTH = 1.5


def looks(min_pairs: int) -> list[int]:
    """The schedule of pair counts (enough for any run: up to 10^7 pairs)."""
    schedule, n = [], min_pairs
    while n <= 10**7:
        schedule.append(n)
        n = max(n + 1, math.ceil(n * _LOOK_GROWTH))
    return schedule


def look_confidence(look: int, confidence: float) -> float:
    """The confidence of the interval at look ``look`` (1-based): its error is
    ``alpha / (look * (look + 1))``, and those sum to ``alpha = 1 - confidence``."""
    if look < 1:
        raise ValueError(f"look must be >= 1, got {look}")
    return 1 - (1 - confidence) / (look * (look + 1))


def holm(p_values: Sequence[float], alpha: float) -> list[float]:
    """Each test's level under Holm's step-down procedure: sorted by p-value, the j-th
    (from 0) of ``m`` gets ``alpha / (m - j)`` while every earlier one was rejected; from
    the first that is not, the rest keep that level. The chance of any false rejection
    among the ``m`` stays at most ``alpha``, with more power than Bonferroni.

    Example:
        >>> holm([0.001, 0.04, 0.013], 0.05)
        [0.016666666666666666, 0.05, 0.025]
    """
    m = len(p_values)
    levels = [0.0] * m
    stopped: float | None = None
    for j, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        level = alpha / (m - j) if stopped is None else stopped
        if stopped is None and p_values[i] > level:
            stopped = level
        levels[i] = level
    return levels


def run_look_confidence(look: int, looks: int, confidence: float) -> float:
    """The confidence at look ``look`` of ``looks`` (1-based) over rounds of runs: earlier
    looks spend ``alpha / 2**(looks - look + 1)``, the last keeps the rest (at least
    half), so the spends sum to ``alpha = 1 - confidence``.

    Example:
        >>> [round(1 - run_look_confidence(k, 3, 0.95), 5) for k in (1, 2, 3)]
        [0.00625, 0.0125, 0.03125]
    """
    if not 1 <= look <= looks:
        raise ValueError(f"look must be from 1 to {looks}, got {look}")
    alpha = 1 - confidence
    if look < looks:
        return 1 - alpha / 2 ** (looks - look + 1)
    return 1 - (alpha - sum(alpha / 2 ** (looks - k + 1) for k in range(1, looks)))
