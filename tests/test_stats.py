"""opbench.stats: order-statistic median interval, spread, Tukey outliers, verbose text."""
from __future__ import annotations

import json
import math
import random
import statistics
import warnings
from fractions import Fraction
from math import comb

import pytest

from opbench import errors, stats
from opbench.core.measurement import Measurement, TaskSpec


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(errors, "_shown", set())


def measurement(times, number=1):
    return Measurement(number, [t * number for t in times], TaskSpec("f()", "pass"))


def coverage(n, k):
    """Exact probability that [x[k], x[n-1-k]] covers the median."""
    return 1 - 2 * Fraction(sum(comb(n, j) for j in range(k + 1)), 2**n)


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_rank_is_the_narrowest_interval_with_the_coverage(confidence):
    for n in range(1, 80):
        k = stats._median_ci_rank(n, confidence)
        if k is None:
            assert 1 - 2 * Fraction(1, 2**n) < Fraction(confidence)
            continue
        assert coverage(n, k) >= Fraction(confidence)
        assert k + 1 > (n - 1) / 2 or coverage(n, k + 1) < Fraction(confidence)


def test_float_tail_agrees_with_exact_integers(monkeypatch):
    exact = {n: stats._median_ci_rank(n, 0.95) for n in (101, 500, 999)}
    stats._median_ci_rank.cache_clear()
    monkeypatch.setattr(stats, "_EXACT_LIMIT", 0)
    try:
        assert {n: stats._median_ci_rank(n, 0.95) for n in exact} == exact
    finally:
        stats._median_ci_rank.cache_clear()


def test_interval_covers_true_median_at_the_stated_rate():
    rng = random.Random(7)
    hits = 0
    for _ in range(1000):
        m = measurement([rng.lognormvariate(0, 0.3) for _ in range(25)])
        lo, hi = stats.median_ci(m)
        hits += lo <= 1.0 <= hi  # the lognormal's median is exp(0) = 1
    assert 930 <= hits <= 990  # exact coverage at n=25 is 95.7%


def test_interval_is_per_run_and_deterministic():
    m = measurement([float(i) for i in range(1, 21)], number=1000)
    assert stats.median_ci(m) == pytest.approx((6.0, 15.0))
    assert stats.median_ci(m) == stats.median_ci(m)
    assert stats.relative_ci(m) == pytest.approx((15 - 6) / 2 / 10.5)


def test_too_few_samples_returns_none_and_warns_once():
    m = measurement([1.0, 2.0, 3.0, 4.0, 5.0])
    with pytest.warns(errors.BenchmarkWarning, match="too few samples .* at least 6"):
        assert stats.median_ci(m) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stats.relative_ci(m) == math.inf  # already warned this process
    assert stats.median_ci(measurement([1.0] * 6), confidence=0.95) is not None


def test_std_is_the_sample_standard_deviation():
    values = [1.0, 2.0, 4.0, 8.0]
    assert stats.std(measurement(values)) == pytest.approx(statistics.stdev(values))
    assert math.isnan(stats.std(measurement([1.0])))


def test_tukey_outlier_counts():
    values = [10.0] * 5 + [11.0] * 10 + [12.0] * 5 + [5.0, 20.0, 40.0]
    o = stats.outliers(measurement(values))
    # quartiles 10.5 and 12 (after 5.0 shifts them): fences 8.25/14.25, severe 6/16.5
    assert (o.low, o.high, o.low_severe, o.high_severe, o.total) == (1, 2, 1, 2, 3)
    assert stats.outliers(measurement([1.0, 100.0])).total == 0  # too few to tell


def test_bad_confidence_is_rejected():
    with pytest.raises(ValueError, match="confidence must be in"):
        stats.median_ci(measurement([1.0] * 10), confidence=95)


def test_summary_is_json_able():
    s = stats.summary(measurement([1.0, 2.0, 3.0]))
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    assert d["ci_low"] is None and d["relative_ci"] is None and d["n"] == 3
    assert d["outliers"] == {"low": 0, "high": 0, "low_severe": 0, "high_severe": 0}
