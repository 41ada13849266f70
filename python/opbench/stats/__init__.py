"""Statistics of timings: spread, a confidence interval of the median, outlier counts.

Pure functions over a sequence of numbers (a Measurement's per-run times, a
list of log ratios, ...); each also takes anything with a ``times`` attribute,
so ``stats.median_ci(m)`` works on a Measurement without this module knowing
what one is.

The confidence interval of the median is the distribution-free order-statistic
interval: with ``n`` sorted times ``x[0] <= ... <= x[n-1]``, the number of
times below the true median is Binomial(n, 1/2), so ``[x[k], x[n-1-k]]``
covers the median with probability ``1 - 2 * P(B <= k)``. ``k`` is the largest
index keeping that at or above the requested confidence. It assumes only that
the times are independent draws from one distribution: no normality (timings
are skewed), no random resampling (the same times give the same interval).
With too few times (fewer than 6 at 95%) no such interval exists: the
functions return None (``relative_ci`` returns inf) and warn once.

Outliers are counted with Tukey's fences: beyond 1.5 IQR outside the
quartiles is an outlier, beyond 3 IQR a severe one.

The package also holds ``decide`` (is B faster than A? ratios and their intervals), with
``error_spending`` (its confidence over many looks and tests) and ``student_t`` (the t
distribution its run intervals use), and ``numerics`` (torch's float32 arithmetic, so
printed figures match torch's).

Floor: stats; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).

Example:
    >>> from opbench import stats
    >>> times = [float(t) for t in range(1, 21)]
    >>> stats.median_ci(times)
    (6.0, 15.0)
    >>> stats.outliers(times).total
    0
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from opbench import environment
from opbench.stats import numerics as _numerics

__all__ = ["DEFAULT_CONFIDENCE", "Outliers", "Summary", "check_confidence", "median_ci",
           "median_ci_sorted", "outliers", "relative_ci", "relative_half_width", "std", "summary",
           "values_of"]

DEFAULT_CONFIDENCE = 0.95

# Up to here the binomial tail is summed in exact integers; beyond, in floats
# through lgamma (exact sums of n-bit integers get slow, and the float error,
# ~1e-12, cannot matter at such n).
_EXACT_LIMIT = 1000


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence!r}")


@functools.lru_cache(maxsize=4096)
def _median_ci_rank(n: int, confidence: float) -> int | None:
    """The index k of the order-statistic interval [x[k], x[n-1-k]], or None when even
    [min, max] covers the median with less than ``confidence``."""
    half_alpha = (1 - Fraction(confidence)) / 2
    if n <= _EXACT_LIMIT:
        total = 2**n
        term, cum, k = 1, 0, -1  # term = C(n, k + 1)
        while cum + term <= half_alpha * total:
            cum += term
            k += 1
            term = term * (n - k) // (k + 1)
    else:
        # Terms more than 10 sigma below the mean add nothing a double can see.
        start = max(0, int(n / 2 - 5 * math.sqrt(n)))
        log_norm = math.lgamma(n + 1) - n * math.log(2)
        limit = float(half_alpha)
        mass, k = 0.0, start - 1
        while True:
            j = k + 1
            weight = math.exp(log_norm - math.lgamma(j + 1) - math.lgamma(n - j + 1))
            if mass + weight > limit:
                break
            mass += weight
            k = j
    return k if k >= 0 else None


def median_ci_sorted(
    values: Sequence[float], confidence: float
) -> tuple[float, float] | None:
    """The order-statistic interval of already sorted values (no warning)."""
    k = _median_ci_rank(len(values), confidence)
    if k is None:
        return None
    return values[k], values[len(values) - 1 - k]


def relative_half_width(
    values: Sequence[float], confidence: float
) -> float:
    """Half the interval's width over the median, of sorted values; inf when none exists."""
    ci = median_ci_sorted(values, confidence)
    median = _numerics.quantile(values, 0.5) if values else 0.0
    if ci is None or median <= 0:
        return math.inf
    return (ci[1] - ci[0]) / 2 / median


def values_of(data: Sequence[float] | Any) -> list[float]:
    """The numbers a statistic is computed on: ``data`` itself, or its ``times`` (seconds
    per run) when it has them (a Measurement), so ``stats.median_ci(m)`` works."""
    times = getattr(data, "times", None)
    return list(data if times is None else times)


def std(data: Sequence[float] | Any) -> float:
    """Sample standard deviation (n - 1); nan with fewer than 2 values."""
    values = values_of(data)
    if len(values) < 2:
        return math.nan
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def median_ci(
    data: Sequence[float] | Any, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float] | None:
    """(low, high) bounding the median with ``confidence``; None (and a warning, shown
    once per process) when there are too few values to say."""
    check_confidence(confidence)
    values = sorted(values_of(data))
    ci = median_ci_sorted(values, confidence)
    if ci is None:
        environment.warn_too_few_samples(len(values), confidence)
    return ci


def relative_ci(data: Sequence[float] | Any, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """Half-width of the median's confidence interval over the median: 0.01 means
    the median is known to about +-1%. inf when no interval exists."""
    check_confidence(confidence)
    values = sorted(values_of(data))
    if _median_ci_rank(len(values), confidence) is None:
        environment.warn_too_few_samples(len(values), confidence)
    return relative_half_width(values, confidence)


@dataclasses.dataclass(frozen=True)
class Outliers:
    """Counts of values beyond Tukey's fences (severe ones are counted in low/high too)."""

    low: int
    high: int
    low_severe: int
    high_severe: int

    @property
    def total(self) -> int:
        return self.low + self.high


def outliers(data: Sequence[float] | Any) -> Outliers:
    """Values below Q1 - 1.5 IQR (low) or above Q3 + 1.5 IQR (high); severe: 3 IQR.

    Quartiles are the ones ``Measurement.iqr`` uses. Needs 4 values; fewer count none.
    """
    values = sorted(values_of(data))
    if len(values) < 4:
        return Outliers(0, 0, 0, 0)
    q1 = _numerics.quantile(values, 0.25)
    q3 = _numerics.quantile(values, 0.75)
    iqr = q3 - q1

    def count(test: Any) -> int:
        return sum(1 for v in values if test(v))

    return Outliers(
        low=count(lambda v: v < q1 - 1.5 * iqr),
        high=count(lambda v: v > q3 + 1.5 * iqr),
        low_severe=count(lambda v: v < q1 - 3 * iqr),
        high_severe=count(lambda v: v > q3 + 3 * iqr),
    )


@dataclasses.dataclass(frozen=True)
class Summary:
    """Every statistic of one set of values (a Measurement's: per run, in seconds)."""

    n: int
    median: float
    mean: float
    std: float
    iqr: float
    confidence: float
    ci_low: float | None
    ci_high: float | None
    relative_ci: float
    outliers: Outliers

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: non-finite numbers become None."""
        out = dataclasses.asdict(self)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in out.items()}


def summary(data: Sequence[float] | Any, confidence: float = DEFAULT_CONFIDENCE) -> Summary:
    """All statistics at once. Does not warn: a summary of few values says so in its
    fields. The median and quartiles are torch's (``Measurement.median``, ``.iqr``)."""
    check_confidence(confidence)
    values = sorted(values_of(data))
    ci = median_ci_sorted(values, confidence) if values else None
    return Summary(
        n=len(values),
        median=_numerics.quantile(values, 0.5) if values else math.nan,
        mean=math.fsum(values) / len(values) if values else math.nan,
        std=std(values),
        iqr=(_numerics.quantile(values, 0.75) - _numerics.quantile(values, 0.25)
             if values else math.nan),
        confidence=confidence,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        relative_ci=relative_half_width(values, confidence),
        outliers=outliers(values),
    )


