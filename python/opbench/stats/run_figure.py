"""The figure of a run: the one number a run of a benchmark contributes wherever runs are
compared (history, ``compare``, the pytest plugin's gate, ``opbench ab``, ``find``).

A run's per-run times (one per block) on a shared machine are a mix of the code
running alone and the code sharing a core or waiting for one; the mix changes
from run to run and from minute to minute, and the median lands wherever the
mix of the moment puts it. The fast tail does not move with the load: it is the
code's own cost. So a run's figure is a low quantile of its per-run times, the
**10th percentile** by default (``_choices.RUN_STATISTIC``), torch's linear
interpolation (``numerics.quantile``). ``benchmarks/real_history.py`` measures the
choice under load; its figures are on the documentation's methodology page.

The interval of a quantile is the distribution-free order-statistic one: the
number of times below the true ``q``-quantile of ``n`` is Binomial(n, q), so
``[x[l], x[u]]`` covers it with probability ``P(l < B <= u)`` (0-based ``l``,
``u``); ``l`` and ``u`` leave at most ``(1 - confidence) / 2`` on each side. With
too few times no such interval exists (None): the 10th percentile's lower end
needs ``(1 - q) ** n <= alpha / 2``, 36 times at 95%.

Example:
    >>> times = [float(t) for t in range(1, 101)]
    >>> value(times), value(times, "median")
    (10.9, 50.5)
    >>> interval(times, 0.95)
    (5.0, 17.0)
    >>> interval(times[:20], 0.95) is None
    True
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

from opbench import _choices
from opbench.stats import numerics

__all__ = ["DEFAULT", "QUANTILES", "describe", "interval", "value"]

#: What each statistic's name means: the quantile of a run's per-run times.
QUANTILES = _choices.RUN_STATISTICS
#: The figure every comparison of runs uses unless told otherwise.
DEFAULT = _choices.RUN_STATISTIC

# Up to here the binomial tail is summed exactly (fractions of integers); beyond, the
# normal approximation with continuity correction (np(1 - p) >= 90 there for q = 0.1).
_EXACT_LIMIT = 1000


def _quantile_of(statistic: str) -> float:
    if statistic not in QUANTILES:
        raise ValueError(f"statistic must be one of {', '.join(QUANTILES)}, got {statistic!r}")
    return QUANTILES[statistic]


def describe(statistic: str = DEFAULT) -> str:
    """``"10th percentile"`` / ``"median"``: the statistic in words, for reports.

    >>> describe(), describe("median")
    ('10th percentile', 'median')
    """
    q = _quantile_of(statistic)
    return "median" if q == 0.5 else f"{round(q * 100)}th percentile"


def value(times: Sequence[float], statistic: str = DEFAULT) -> float:
    """The run's figure: the ``statistic`` quantile of its per-run ``times``.

    Raises:
        ValueError: no times, or an unknown statistic.
    """
    if not times:
        raise ValueError("a run's figure needs at least one time")
    return numerics.quantile(sorted(times), _quantile_of(statistic))


@functools.lru_cache(maxsize=4096)
def _ranks(n: int, q: float, confidence: float) -> tuple[int, int] | None:
    """0-based ranks (l, u) of the order-statistic interval of the q-quantile of n values,
    or None when even the smallest value leaves more than alpha/2 below."""
    half_alpha = (1 - confidence) / 2
    if n <= _EXACT_LIMIT:
        # Integers throughout: term k is C(n, k) a^k b^(n-k) of the total (a + b)^n.
        qf = Fraction(q).limit_denominator(10**6)
        a, b = qf.numerator, qf.denominator - qf.numerator
        half = Fraction(half_alpha)
        limit = half * qf.denominator**n  # a tail's mass may be at most this
        terms = [math.comb(n, k) * a**k * b ** (n - k) for k in range(n + 1)]
        below, lo = 0, None
        for k in range(n + 1):  # P(B <= k): the interval starts after the k-th value
            if below + terms[k] > limit:
                break
            below += terms[k]
            lo = k
        above, hi = 0, None
        for k in range(n, -1, -1):  # P(B >= k)
            if above + terms[k] > limit:
                break
            above += terms[k]
            hi = k - 1
    else:
        mean, sd = n * q, math.sqrt(n * q * (1 - q))
        z = _normal_quantile(1 - half_alpha)
        lo_f = math.floor(mean - z * sd - 0.5)
        hi_f = math.ceil(mean + z * sd + 0.5)
        lo = lo_f if lo_f >= 0 else None
        hi = min(hi_f - 1, n - 1)
    if lo is None or hi is None or hi < lo:
        return None
    return lo, min(hi, n - 1)


def _normal_quantile(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def interval(times: Sequence[float], confidence: float, statistic: str = DEFAULT,
             *, ordered: bool = False) -> tuple[float, float] | None:
    """The ``confidence`` interval of the run's figure (module doc), or None with too few
    times. ``ordered=True``: ``times`` are sorted already."""
    values = list(times) if ordered else sorted(times)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    ranks = _ranks(len(values), _quantile_of(statistic), round(confidence, 12))
    if ranks is None:
        return None
    return values[ranks[0]], values[ranks[1]]
