"""opbench.stats.run_figure: a run's figure (its 10th percentile) and the order-statistic
interval of a quantile, checked against the binomial it rests on."""
from __future__ import annotations

import math
import random

import pytest

from opbench import stats
from opbench.stats import numerics, run_figure


def _binomial_cdf(k: int, n: int, q: float) -> float:
    return sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1))


@pytest.mark.parametrize("n", [36, 50, 100, 400, 1000])
def test_the_interval_leaves_at_most_alpha_over_2_each_side_and_is_the_tightest(n: int) -> None:
    values = [float(i) for i in range(n)]
    lo, hi = run_figure.interval(values, 0.95)
    low, up = int(lo), int(hi)
    assert _binomial_cdf(low, n, 0.1) <= 0.025 < _binomial_cdf(low + 1, n, 0.1)  # below
    assert 1 - _binomial_cdf(up, n, 0.1) <= 0.025 < 1 - _binomial_cdf(up - 1, n, 0.1)  # above


def test_the_normal_approximation_takes_over_smoothly_beyond_1000() -> None:
    exact = run_figure.interval([float(i) for i in range(1000)], 0.95)
    approx = run_figure.interval([float(i) for i in range(1001)], 0.95)
    assert exact is not None and approx is not None
    assert abs(exact[0] - approx[0]) <= 1 and abs(exact[1] - approx[1]) <= 1


def test_the_median_interval_is_the_one_stats_gives() -> None:
    values = sorted(random.Random(3).lognormvariate(0, 0.2) for _ in range(77))
    assert run_figure.interval(values, 0.95, "median", ordered=True) == \
        stats.median_ci_sorted(values, 0.95)


def test_the_interval_covers_the_true_10th_percentile_95_percent_of_the_time() -> None:
    rng = random.Random(11)
    true = -math.log(0.9)  # the 10th percentile of an exponential(1)
    hits = sum(lo <= true <= hi for lo, hi in (
        run_figure.interval([rng.expovariate(1) for _ in range(120)], 0.95)
        for _ in range(400)))
    assert 0.93 <= hits / 400 <= 0.995


def test_the_figure_is_torchs_quantile_and_too_few_times_give_no_interval() -> None:
    times = [3.0, 1.0, 2.0, 5.0, 4.0]
    assert run_figure.value(times) == numerics.quantile(sorted(times), 0.1) == 1.4
    assert run_figure.value(times, "median") == 3.0
    assert run_figure.interval([1.0] * 35, 0.95) is None  # 0.9**35 > 0.025
    assert run_figure.interval([1.0] * 36, 0.95) == (1.0, 1.0)
    assert run_figure.describe() == "10th percentile" and run_figure.DEFAULT == "p10"


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="statistic must be one of p10, median"):
        run_figure.value([1.0], "p99")
    with pytest.raises(ValueError, match="at least one time"):
        run_figure.value([])
    with pytest.raises(ValueError, match="confidence must be in"):
        run_figure.interval([1.0] * 50, 1.5)
