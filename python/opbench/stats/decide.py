"""Decisions: is the new code slower than the old, faster, the same, or can't we tell?

One engine for every place opbench answers that question (``compare_ab``,
``python -m opbench compare``, the pytest plugin's gate); none of them holds
statistics of its own.

**Verdicts** compare an interval of the ratio new / old with a relative
threshold ``t``, symmetric in log space: "slower" when the whole interval lies
above ``1 + t``, "faster" when it lies below ``1 / (1 + t)``, "same" when it
lies within both, "inconclusive" when it straddles a bound or no interval
could be formed. An inconclusive decision whose ratio of medians is beyond
the threshold is a *possible* regression (or improvement): the policy of what
to do with those is the gate's (``opbench.gate``), but it is never silent.

**Two independent samples** (two results files, two runs): the
Hodges-Lehmann estimate of the ratio, exp of the median of all pairwise
differences ``log(new_j) - log(old_i)``, with the distribution-free interval
from the Mann-Whitney distribution (normal approximation). It assumes only
that the change is a common factor on all times; no resampling, so the same
data give the same answer. Samples above 500 times are thinned to 500 evenly
spaced order statistics, which only widens the interval.

**Paired samples** (``compare_ab``'s interleaved blocks): the order-statistic
interval of the median log ratio of pairs, checked at a fixed schedule of
pair counts (``looks``). Looking again and again at growing data inflates the
error rate of a fixed-confidence interval (a 95% interval checked at ten
sample sizes says "different" about identical code far more than 5% of the
time), so look ``i`` spends only ``alpha / (i * (i + 1))`` of the error
budget ``alpha = 1 - confidence``: the spends sum to ``alpha``, so the
chance that any look ever excludes the true ratio, and hence of a false
"faster", "slower" or "same", is at most ``alpha`` however many looks are
taken (a union bound: valid for any stopping rule over the schedule).

**Instruction counts** are deterministic: the ratio is exact and the interval
is the point itself.

Example:
    >>> d = two_samples([1.00, 1.01, 0.99, 1.02, 1.00, 0.98], [2.0, 2.02, 1.98, 2.01, 2.0, 1.99], 0.05)
    >>> d.verdict, round(d.ratio, 2)
    ('slower', 2.0)
    >>> counts([1000], [1010], 0.005).verdict
    'slower'
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from opbench import stats

__all__ = ["VERDICTS", "Decision", "check_threshold", "counts", "look_confidence", "looks",
           "paired", "two_samples", "verdict"]

VERDICTS = ("faster", "slower", "same", "inconclusive")

# Samples above this size are thinned (all pairwise differences are formed).
_MAX_SAMPLE = 500


def verdict(ci_low: float, ci_high: float, threshold: float) -> str:
    """"faster", "slower", "same" or "inconclusive" for an interval of the ratio new / old
    and a relative threshold (0.02 for 2%).

    Example:
        >>> verdict(1.05, 1.12, 0.02), verdict(0.99, 1.01, 0.02), verdict(0.99, 1.05, 0.02)
        ('slower', 'same', 'inconclusive')
    """
    if not (0 < ci_low <= ci_high < math.inf):  # no interval: nothing to conclude
        return "inconclusive"
    bound = math.log1p(threshold)
    lo, hi = math.log(ci_low), math.log(ci_high)
    if lo > bound:
        return "slower"
    if hi < -bound:
        return "faster"
    if -bound <= lo and hi <= bound:
        return "same"
    return "inconclusive"


def check_threshold(threshold: float) -> None:
    """Raises ValueError unless ``threshold`` is a relative difference in (0, 1)."""
    if not (isinstance(threshold, (int, float)) and 0 < threshold < 1):
        raise ValueError(f"threshold must be a relative difference in (0, 1), e.g. 0.05 for 5%; "
                         f"got {threshold!r}")


@dataclasses.dataclass(frozen=True)
class Decision:
    """The answer for one benchmark.

    Attributes:
        verdict: one of ``VERDICTS``.
        ratio: the estimate of new / old (Hodges-Lehmann; median of paired
            ratios; ratio of medians for counts).
        ci: the interval of the ratio (for counts, the range the repeats allow), or
            None when too few samples formed none.
        median_ratio: median(new) / median(old): always there, whatever the samples.
        threshold, confidence: what the verdict was judged against.
        reason: why the verdict is inconclusive ("" otherwise).
    """

    verdict: str
    ratio: float
    ci: tuple[float, float] | None
    median_ratio: float
    threshold: float
    confidence: float | None
    reason: str = ""

    @property
    def possible_regression(self) -> bool:
        """Inconclusive, yet the medians moved beyond the threshold the slow way."""
        return self.verdict == "inconclusive" and self.median_ratio > 1 + self.threshold

    @property
    def possible_improvement(self) -> bool:
        return self.verdict == "inconclusive" and self.median_ratio < 1 / (1 + self.threshold)


def _thin(values: list[float]) -> list[float]:
    if len(values) <= _MAX_SAMPLE:
        return values
    step = (len(values) - 1) / (_MAX_SAMPLE - 1)
    return [values[round(i * step)] for i in range(_MAX_SAMPLE)]


def _check_sample(name: str, values: Sequence[float]) -> list[float]:
    values = list(values)
    if not values:
        raise ValueError(f"{name} has no values")
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"{name} must hold finite positive values (times or counts per run)")
    return values


def two_samples(old: Sequence[float], new: Sequence[float], threshold: float,
                confidence: float = stats.DEFAULT_CONFIDENCE) -> Decision:
    """The verdict on two independent samples of per-run times (see the module doc).

    Raises:
        ValueError: an empty sample, a non-positive or non-finite value, a bad
            threshold or confidence.
    """
    check_threshold(threshold)
    stats.check_confidence(confidence)
    old, new = _check_sample("old", old), _check_sample("new", new)
    median_ratio = statistics.median(new) / statistics.median(old)
    x = _thin(sorted(math.log(v) for v in old))
    y = _thin(sorted(math.log(v) for v in new))
    n, m = len(x), len(y)
    diffs = sorted(b - a for a in x for b in y)
    ratio = math.exp(statistics.median(diffs))
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    # Mann-Whitney: the k-th smallest and k-th largest pairwise differences.
    k = math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))
    if k < 1:
        return Decision("inconclusive", ratio, None, median_ratio, threshold, confidence,
                        reason=f"{len(old)} and {len(new)} samples: too few for a "
                               f"{confidence:.0%} interval (at least 4 each)")
    ci = (math.exp(diffs[k - 1]), math.exp(diffs[n * m - k]))
    result = verdict(*ci, threshold)
    reason = "the interval straddles the threshold" if result == "inconclusive" else ""
    return Decision(result, ratio, ci, median_ratio, threshold, confidence, reason)


def counts(old: Sequence[float], new: Sequence[float], threshold: float) -> Decision:
    """The verdict on instruction counts per run, one per repeat: no sampling noise, so a
    1% change is caught on the noisiest machine.

    Repeats agree exactly for most code, but code that allocates can differ by a
    fraction of a percent from repeat to repeat (where its blocks fall in the
    allocator's pools). The interval is therefore the whole range the repeats allow,
    ``min(new) / max(old)`` to ``max(new) / min(old)``: a change inside that range
    is "inconclusive", never a verdict the repeats contradict.

    Example:
        >>> counts([10_000], [10_100], 0.005).verdict
        'slower'
        >>> counts([10_000, 10_080], [10_100], 0.005).verdict
        'inconclusive'

    Raises:
        ValueError: an empty sample, a non-positive or non-finite count, a bad threshold.
    """
    check_threshold(threshold)
    old, new = _check_sample("old", old), _check_sample("new", new)
    ratio = statistics.median(new) / statistics.median(old)
    ci = (min(new) / max(old), max(new) / min(old))
    result = verdict(*ci, threshold)
    reason = ("the repeats' spread straddles the threshold" if result == "inconclusive"
              else "")
    return Decision(result, ratio, ci, ratio, threshold, None, reason)


# -- paired samples, looked at sequentially ------------------------------------

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


def paired(sorted_log_ratios: Sequence[float], threshold: float, confidence: float,
           look: int) -> Decision:
    """The verdict at look ``look`` on the sorted log ratios ``log(new / old)`` of pairs.

    The interval is the order-statistic interval of their median (sign-test
    based; see opbench.stats) at ``look_confidence(look, confidence)``.
    """
    n = len(sorted_log_ratios)
    if n == 0:
        raise ValueError("no pairs to decide on")
    median = math.exp(statistics.median(sorted_log_ratios))
    level = look_confidence(look, confidence)
    ci = stats.median_ci_sorted(sorted_log_ratios, level)
    if ci is None:
        return Decision("inconclusive", median, None, median, threshold, confidence,
                        reason=f"{n} pairs: too few for a {level:.4%} interval")
    interval = (math.exp(ci[0]), math.exp(ci[1]))
    result = verdict(*interval, threshold)
    reason = "the interval straddles the threshold" if result == "inconclusive" else ""
    return Decision(result, median, interval, median, threshold, confidence, reason)
