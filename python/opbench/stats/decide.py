"""Decisions: is the new code slower than the old, faster, the same, or can't we tell?

One engine for every place opbench answers that question (``compare_ab``,
``python -m opbench compare``, the pytest plugin's gate); none of them holds
statistics of its own.

**Verdicts** compare an interval of the ratio new / old with a relative
threshold ``t``, symmetric in log space: "slower" when the whole interval lies
above ``1 + t``, "faster" when it lies below ``1 / (1 + t)``, "same" when it
lies within both, "inconclusive" when it straddles a bound or no interval
could be formed. An inconclusive decision whose interval shows a slowdown
(lies above 1) that may reach the threshold, or that has no interval and a
ratio beyond it, is a *possible* regression (or improvement): the policy of
what to do with those is the gate's (``opbench.gate``), but it is never
silent. An interval that holds 1 shows no change either way, whatever the
ratio: failing on that is failing on noise.

**One run a side** (two results files of one run each): the ratio of the
runs' figures (``figures``: each run's 10th percentile of per-run times by
default, ``opbench.stats.run_figure``), with an interval from each figure's
order-statistic interval, combined in log space (the two are independent).
The ratio is the one the two figures give: a report's columns divide to it.

**"Same" is an equivalence test.** An interval that lies within the threshold
at the level of a verdict's test says "same"; one that does not, yet whose
``1 - 2 alpha`` interval does, says "same" too: that is the two one-sided tests
of equivalence (TOST, Schuirmann 1987), whose error is at most ``alpha``, and the
Decision then carries that interval and its level. Without it, the wide
intervals a suite's multiplicity correction gives (Holm, below) made "same"
nearly unreachable with few runs.

**Two independent samples** (``two_samples``): the
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

**Runs** (``opbench ab``, and results files holding several runs a side; Student's t
from ``opbench.stats.student_t``): the
unit of replication is the run, because blocks of one process share its code
placement, heap layout and clock, and an interval from them covers within-run
noise only. ``runs`` takes one median per run and side, paired by round (the
two runs of a round ran at the same time), and forms Student's t interval of
the mean log ratio, ``log(new_r / old_r)``, with ``n - 1`` degrees of freedom:
the between-run variance is in it, and few runs give the wide interval they
should. Runs that ran in groups (``blocks``: a wave of ``opbench ab`` process
pairs taking turns) are decided in the additive model ``log value = block +
side + noise``: what a group shares cancels, and each run is a replicate, so
one group of ``n`` pairs gives ``2n - 2`` degrees of freedom where pairing
would give ``n - 1``. Unpaired runs (different counts) get Welch's interval. Across a suite,
``holm`` gives each benchmark its level (Holm's step-down on the p-values of
"no change"), so the chance of any false verdict in the suite stays under
``alpha``; ``run_look_confidence`` spends ``alpha`` over the rounds looked at
(the last look keeps half, so stopping early costs the full run little). The
spending rules (``looks``, ``look_confidence``, ``run_look_confidence``, ``holm``)
live in ``opbench.stats.error_spending``.

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
from collections.abc import Callable, Sequence

from opbench import stats
from opbench.stats import run_figure, student_t
from opbench.stats.error_spending import holm, look_confidence, looks, run_look_confidence

__all__ = ["VERDICTS", "Decision", "check_threshold", "count_figure", "counts", "figures", "holm",
           "look_confidence", "looks", "paired", "run_look_confidence", "runs", "runs_p_value",
           "two_samples", "verdict"]

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
        ratio: the estimate of new / old (the ratio of the runs' figures; the
            geometric mean of run ratios; ratio of medians for counts; median of
            paired ratios; Hodges-Lehmann): the one ratio every report prints.
        ci: the interval of the ratio the verdict was judged on (for counts, the range
            the repeats allow), or None when too few samples formed none.
        median_ratio: median(new) / median(old): always there, whatever the samples.
        threshold: what the verdict was judged against.
        confidence: the level of ``ci`` (a "same" of an equivalence test: its
            ``1 - 2 alpha``; see the module doc).
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
        """Inconclusive, yet shown slower (the interval lies above 1) by an amount that may
        reach the threshold; or, with no interval at all, slower beyond the threshold by
        the ratio. An interval that holds 1 shows no slowdown: noise that moves the ratio
        past the threshold must not fail a gate (that is how false alarms are made)."""
        if self.verdict != "inconclusive":
            return False
        if self.ci is None:
            return self.ratio > 1 + self.threshold
        return self.ci[0] > 1 and self.ci[1] > 1 + self.threshold

    @property
    def possible_improvement(self) -> bool:
        if self.verdict != "inconclusive":
            return False
        if self.ci is None:
            return self.ratio < 1 / (1 + self.threshold)
        return self.ci[1] < 1 and self.ci[0] < 1 / (1 + self.threshold)


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


def _judged(ratio: float, median_ratio: float,
            interval_at: Callable[[float], tuple[float, float] | None], threshold: float,
            confidence: float, equivalence_alpha: float | None, too_few: str) -> Decision:
    """The verdict on ``ratio`` whose interval at any level ``interval_at`` gives: slower
    or faster by the ``confidence`` interval; "same" by it, or else by the equivalence
    test at ``equivalence_alpha`` (its ``1 - 2 alpha`` interval within the threshold;
    default ``1 - confidence``); else inconclusive, with the ``confidence`` interval."""
    ci = interval_at(confidence)
    if ci is None:
        return Decision("inconclusive", ratio, None, median_ratio, threshold, confidence,
                        reason=too_few)
    result = verdict(*ci, threshold)
    if result != "inconclusive":
        return Decision(result, ratio, ci, median_ratio, threshold, confidence)
    alpha = 1 - confidence if equivalence_alpha is None else equivalence_alpha
    if 0 < alpha < 0.5:
        level = round(1 - 2 * alpha, 12)  # 0.9, not 0.8999999999999999
        equivalent = interval_at(level)
        if equivalent is not None and verdict(*equivalent, threshold) == "same":
            return Decision("same", ratio, equivalent, median_ratio, threshold, level)
    return Decision("inconclusive", ratio, ci, median_ratio, threshold, confidence,
                    reason="the interval straddles the threshold")


def figures(old: Sequence[float], new: Sequence[float], threshold: float,
            confidence: float = stats.DEFAULT_CONFIDENCE,
            statistic: str = run_figure.DEFAULT) -> Decision:
    """The verdict on one run a side (``old``, ``new``: their per-run times): the ratio of
    the runs' figures (``opbench.stats.run_figure``), its interval from each figure's
    order-statistic interval at the same level, combined in log space as independent
    errors (module doc). It covers the noise within each run only: what differs
    between processes (code placement, heap) needs runs (``runs``).

    Example:
        >>> old = [1.0 + i / 1000 for i in range(200)]
        >>> d = figures(old, [2 * t for t in old], 0.05)
        >>> d.verdict, round(d.ratio, 3)
        ('slower', 2.0)
        >>> figures(old, old, 0.05).verdict
        'same'

    Raises:
        ValueError: an empty sample, a non-positive or non-finite value, a bad
            threshold, confidence or statistic.
    """
    check_threshold(threshold)
    stats.check_confidence(confidence)
    x, y = sorted(_check_sample("old", old)), sorted(_check_sample("new", new))
    fx, fy = run_figure.value(x, statistic), run_figure.value(y, statistic)
    ratio = fy / fx

    def interval_at(level: float) -> tuple[float, float] | None:
        cx = run_figure.interval(x, level, statistic, ordered=True)
        cy = run_figure.interval(y, level, statistic, ordered=True)
        if cx is None or cy is None:
            return None
        down = math.hypot(math.log(fy / cy[0]), math.log(cx[1] / fx))
        up = math.hypot(math.log(cy[1] / fy), math.log(fx / cx[0]))
        return ratio * math.exp(-down), ratio * math.exp(up)

    return _judged(ratio, statistics.median(y) / statistics.median(x), interval_at, threshold,
                   confidence, None,
                   f"{len(x)} and {len(y)} samples: too few for a {confidence:.0%} interval of "
                   f"the {run_figure.describe(statistic)}")


def count_figure(values: Sequence[float]) -> float:
    """One side's figure of counts, one per repeat: the fewest, as
    ``InstructionCounts.per_run`` (which says why); what ``counts`` divides and a
    table shows beside its ratio."""
    return min(values)


def counts(old: Sequence[float], new: Sequence[float], threshold: float) -> Decision:
    """The verdict on instruction counts per run, one per repeat: no sampling noise, so a
    1% change is caught on the noisiest machine.

    Repeats agree exactly for most code, but code that allocates can differ by a
    fraction of a percent from repeat to repeat (where its blocks fall in the
    allocator's pools). The interval is therefore the whole range the repeats allow,
    ``min(new) / max(old)`` to ``max(new) / min(old)``: a change inside that range
    is "inconclusive", never a verdict the repeats contradict. The ratio is of the
    sides' ``count_figure``.

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
    ratio = count_figure(new) / count_figure(old)
    ci = (min(new) / max(old), max(new) / min(old))
    result = verdict(*ci, threshold)
    reason = ("the repeats' spread straddles the threshold" if result == "inconclusive"
              else "")
    return Decision(result, ratio, ci, ratio, threshold, None, reason)


# -- paired samples, looked at sequentially ------------------------------------

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


# -- runs: one median per run and side ------------------------------------------

def _run_logs(old: Sequence[float], new: Sequence[float], paired: bool,
              blocks: Sequence[object] | None = None) -> tuple[float, float, float]:
    """(mean log ratio, its standard error, degrees of freedom) of per-run values:
    blocked (``blocks``), paired (round r's runs ran together: each pair a block) or
    Welch's."""
    x = [math.log(v) for v in _check_sample("old", old)]
    y = [math.log(v) for v in _check_sample("new", new)]
    if paired or blocks is not None:
        if len(x) != len(y):
            raise ValueError(f"paired runs need as many on each side, got {len(x)} and "
                             f"{len(y)}")
        labels: list[object] = list(range(len(x))) if blocks is None else list(blocks)
        if len(labels) != len(x):
            raise ValueError(f"blocks must label each pair of runs: {len(labels)} labels "
                             f"for {len(x)} pairs")
        return _blocked(x, y, labels)
    mean = statistics.fmean(y) - statistics.fmean(x)
    if len(x) < 2 or len(y) < 2:
        return mean, math.inf, 0
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    se = math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1)) if se > 0 else 1
    return mean, se, df


def _blocked(x: list[float], y: list[float], labels: list[object]) -> tuple[float, float, float]:
    """The side effect in the additive model ``log value = block + side + noise``: pairs of
    one block ran at one time (a round run one after the other; a wave of processes
    taking turns), so what the block shares cancels; every run is its own replicate.
    Each pair its own block is the paired t test (``n - 1`` degrees of freedom); one
    block of ``n`` pairs is the pooled two-sample t test (``2n - 2``)."""
    groups: dict[object, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, []).append(i)
    n = len(x)
    mean = sum(len(g) * (statistics.fmean(y[i] for i in g) - statistics.fmean(x[i] for i in g))
               for g in groups.values()) / n
    ss = 0.0
    for g in groups.values():
        centre = statistics.fmean([*(x[i] for i in g), *(y[i] for i in g)])
        ss += sum((x[i] - centre + mean / 2) ** 2 + (y[i] - centre - mean / 2) ** 2 for i in g)
    df = 2 * n - len(groups) - 1
    if df < 1:
        return mean, math.inf, 0
    return mean, math.sqrt(ss / df * 2 / n), df


def runs_p_value(old: Sequence[float], new: Sequence[float], *, paired: bool = True,
                 blocks: Sequence[object] | None = None) -> float:
    """The two-sided p-value of "no change" from per-run values (the t test ``runs``
    inverts): what ``holm`` orders a suite's benchmarks by."""
    mean, se, df = _run_logs(old, new, paired, blocks)
    if not math.isfinite(se) or df < 1:
        return 1.0
    if se == 0:
        return 0.0 if mean != 0 else 1.0
    return student_t.two_sided_p(mean / se, df)


def runs(old: Sequence[float], new: Sequence[float], threshold: float,
         confidence: float = stats.DEFAULT_CONFIDENCE, *, paired: bool = True,
         blocks: Sequence[object] | None = None,
         equivalence_alpha: float | None = None) -> Decision:
    """The verdict on per-run values, one per run and side (see the module doc): ``paired``
    when run ``i`` of each side ran together (a round of ``opbench ab``), else Welch's;
    ``blocks`` labels each pair with the group of runs it ran with (a wave of ``opbench
    ab`` processes taking turns), which cancels what a block shares and pools the rest.
    "Same" may also come from the equivalence test at ``equivalence_alpha`` (default
    ``1 - confidence``; a suite's caller passes its level before the multiplicity
    correction that widened ``confidence``).

    Example:
        >>> d = runs([1.00, 1.02, 0.97], [1.31, 1.32, 1.28], 0.05)
        >>> d.verdict, round(d.ratio, 2)
        ('slower', 1.31)
        >>> runs([1.00, 1.02, 0.97], [1.31, 1.32, 1.28], 0.05, blocks=[0, 0, 0]).ci[0] > 1.2
        True
        >>> runs([1.0], [1.3], 0.05).reason
        '1 and 1 runs: too few for an interval with the between-run variance (at least 2 a side)'
        >>> old, new = [1.0, 1.02, 0.98], [1.01, 0.99, 1.0]
        >>> runs(old, new, 0.05, 0.995, blocks=[0, 0, 0]).verdict
        'inconclusive'
        >>> d = runs(old, new, 0.05, 0.995, blocks=[0, 0, 0], equivalence_alpha=0.05)
        >>> d.verdict, d.confidence
        ('same', 0.9)

    Raises:
        ValueError: an empty sample, a non-positive value, a bad threshold or confidence.
    """
    check_threshold(threshold)
    stats.check_confidence(confidence)
    mean, se, df = _run_logs(old, new, paired, blocks)
    ratio = math.exp(mean)
    median_ratio = statistics.median(new) / statistics.median(old)

    def interval_at(level: float) -> tuple[float, float] | None:
        if not math.isfinite(se) or df < 1:
            return None
        half = student_t.two_sided_quantile(level, df) * se
        # Few runs at a very high level can give a half-width past what exp() can hold:
        # the clamp keeps a finite, uselessly wide interval (inconclusive), as it should be.
        return math.exp(max(mean - half, -700.0)), math.exp(min(mean + half, 700.0))

    return _judged(ratio, median_ratio, interval_at, threshold, confidence, equivalence_alpha,
                   f"{len(old)} and {len(new)} runs: too few for an interval with the "
                   "between-run variance (at least 2 a side)")
