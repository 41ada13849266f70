"""opbench.stats.decide: verdicts on independent samples, paired looks and instruction counts."""
from __future__ import annotations

import math
import random

import pytest

from opbench.stats import decide


def times(seed, scale=1.0, n=40, noise=0.01):
    rng = random.Random(seed)
    return [1e-5 * scale * (1 + rng.gauss(0, noise)) for _ in range(n)]


def test_verdicts_against_a_symmetric_threshold():
    assert decide.verdict(1.05, 1.12, 0.02) == "slower"
    assert decide.verdict(1 / 1.12, 1 / 1.05, 0.02) == "faster"
    assert decide.verdict(0.99, 1.01, 0.02) == "same"
    assert decide.verdict(0.99, 1.05, 0.02) == "inconclusive"
    assert decide.verdict(0.0, math.inf, 0.02) == "inconclusive"


def test_hodges_lehmann_of_an_exact_factor():
    base = times(1)
    d = decide.two_samples(base, [t * 1.1 for t in base], 0.05)
    assert d.ratio == pytest.approx(1.1) and d.ci[0] <= 1.1 <= d.ci[1]
    assert d.ci[1] / d.ci[0] < 1.02 and d.verdict == "slower"
    big = decide.two_samples(times(1, n=2000), times(2, n=2000), 0.05)  # thinned, still sane
    assert big.ci[0] <= 1 <= big.ci[1] and math.isclose(big.ratio, 1, rel_tol=0.01)


def test_too_few_samples_form_no_interval_but_keep_the_median_ratio():
    d = decide.two_samples([1.0, 1.1, 0.9], [2.0, 2.2, 1.8], 0.05)
    assert d.verdict == "inconclusive" and d.ci is None
    assert d.median_ratio == pytest.approx(2.0)
    assert d.possible_regression and not d.possible_improvement
    assert "3 and 3 samples" in d.reason
    assert decide.two_samples([2.0] * 3, [1.0] * 3, 0.05).possible_improvement


def test_counts_are_exact():
    d = decide.counts([10_000], [10_100], 0.005)
    assert (d.verdict, d.ratio, d.ci) == ("slower", 1.01, (1.01, 1.01))
    assert decide.counts([10_000], [10_030], 0.005).verdict == "same"


def test_counts_allow_for_the_spread_of_their_repeats():
    # Repeats 0.8% apart cannot settle a 0.5% threshold either way ...
    d = decide.counts([10_000, 10_080, 10_040], [10_000, 10_080, 10_040], 0.005)
    assert d.verdict == "inconclusive" and d.ratio == 1.0
    assert d.ci == (10_000 / 10_080, 10_080 / 10_000) and "spread" in d.reason
    # ... nor a change inside that range; one beyond it is a verdict.
    assert decide.counts([10_000, 10_080], [10_090], 0.005).verdict == "inconclusive"
    assert decide.counts([10_000, 10_080], [10_200], 0.005).verdict == "slower"
    assert decide.counts([10_000, 10_080], [9_900], 0.005).verdict == "faster"
    # The ratio is of the fewest counts, the figure InstructionCounts.per_run shows.
    assert decide.counts([10_080, 10_000, 10_040], [10_300, 10_200], 0.005).ratio == 1.02


@pytest.mark.parametrize("bad", [[], [0.0], [-1.0], [float("nan")], [float("inf")]])
def test_impossible_samples_are_refused(bad):
    with pytest.raises(ValueError, match="old"):
        decide.two_samples(bad, [1.0] * 5, 0.05)


@pytest.mark.parametrize("threshold", [0, 1, -0.1, 2])
def test_bad_thresholds_are_refused(threshold):
    with pytest.raises(ValueError, match="threshold"):
        decide.two_samples([1.0] * 5, [1.0] * 5, threshold)


def test_the_looks_spend_at_most_the_error_budget():
    schedule = decide.looks(10)
    assert schedule[0] == 10 and all(b > a for a, b in zip(schedule, schedule[1:]))
    spent = sum(1 - decide.look_confidence(i, 0.95) for i in range(1, len(schedule) + 1))
    assert spent <= 0.05 + 1e-12
    assert decide.look_confidence(1, 0.95) > 0.95  # the first look is already stricter


def test_paired_decision_on_log_ratios():
    rng = random.Random(0)
    logs = sorted(math.log(1.1) + rng.gauss(0, 0.01) for _ in range(60))
    d = decide.paired(logs, 0.02, 0.95, look=3)
    assert d.verdict == "slower" and d.ratio == pytest.approx(1.1, rel=0.01)
    assert decide.paired(logs[:3], 0.02, 0.95, look=1).ci is None


def test_runs_hold_the_between_run_variance_and_few_runs_stay_wide():
    from opbench.stats.decide import holm, run_look_confidence, runs, runs_p_value

    # Tight runs of a 30% change: slower; the ratio is the geometric mean of run ratios.
    d = runs([1.00, 1.02, 0.97], [1.31, 1.32, 1.28], 0.05)
    assert d.verdict == "slower" and d.ratio == pytest.approx(1.3079, abs=1e-4)
    # Runs that disagree by +-10% cannot show a 3% change: the interval holds 1.
    d = runs([1.0, 1.1, 0.9], [1.13, 0.93, 1.03], 0.05)
    assert d.verdict == "inconclusive" and d.ci[0] < 1 < d.ci[1]
    assert not d.possible_regression  # noise, not a possible regression
    # Two runs at a tiny level: a finite, useless interval, never an overflow.
    d = runs([1.0, 1.1], [1.2, 1.1], 0.05, 1 - 1e-9)
    assert d.verdict == "inconclusive" and math.isfinite(d.ci[1])
    assert runs([1.0], [2.0], 0.05).ci is None
    with pytest.raises(ValueError, match="paired runs need as many"):
        runs([1.0, 1.1], [1.0], 0.05)
    assert runs([1.0, 1.1], [1.05], 0.05, paired=False).verdict == "inconclusive"
    # Identical runs: p = 1; a constant shift with no spread: p = 0.
    assert runs_p_value([1.0, 1.1], [1.0, 1.1]) == 1.0
    assert runs_p_value([1.0, 1.1], [2.0, 2.2]) < 1e-9
    # Holm and the looks spend no more than alpha.
    assert holm([0.001, 0.04, 0.013], 0.05) == pytest.approx([0.05 / 3, 0.05, 0.025])
    assert holm([0.2, 0.001], 0.05) == pytest.approx([0.05, 0.025])
    assert holm([0.3, 0.2, 0.001], 0.05) == pytest.approx([0.025, 0.025, 0.05 / 3])
    spent = sum(1 - run_look_confidence(k, 4, 0.95) for k in range(1, 5))
    assert spent == pytest.approx(0.05) and 1 - run_look_confidence(4, 4, 0.95) >= 0.025


def test_runs_in_blocks_pool_a_wave_and_pair_single_rounds() -> None:
    import math
    import statistics

    _run_logs = decide._run_logs

    old, new = [1.0, 1.02, 0.97, 1.01], [1.1, 1.12, 1.08, 1.13]
    lx, ly = [math.log(v) for v in old], [math.log(v) for v in new]
    d = [b - a for a, b in zip(lx, ly)]
    # Each pair its own block: the paired t test.
    assert _run_logs(old, new, True, [0, 1, 2, 3]) == pytest.approx(
        (statistics.fmean(d), statistics.stdev(d) / 2, 3))
    assert _run_logs(old, new, True) == _run_logs(old, new, True, [0, 1, 2, 3])
    # One block of four pairs: the pooled two-sample t test, 2 x 4 - 2 degrees of freedom.
    pooled = math.sqrt((statistics.variance(lx) + statistics.variance(ly)) / 2)
    assert _run_logs(old, new, True, [0] * 4) == pytest.approx(
        (statistics.fmean(ly) - statistics.fmean(lx), pooled * math.sqrt(2 / 4), 6))
    # What a block shares cancels: a whole wave 10% slower moves nothing.
    shifted = [v * 1.1 for v in old[2:]], [v * 1.1 for v in new[2:]]
    a = _run_logs(old, new, True, [0, 0, 1, 1])
    b = _run_logs(old[:2] + shifted[0], new[:2] + shifted[1], True, [0, 0, 1, 1])
    assert a == pytest.approx(b)
    with pytest.raises(ValueError, match="label each pair"):
        decide.runs(old, new, 0.05, blocks=[0, 0])


def test_figures_divide_to_the_ratio_and_form_an_interval_from_both_runs() -> None:
    rng = random.Random(5)
    old = [1e-6 * (1 + abs(rng.gauss(0, 0.05))) for _ in range(200)]
    new = [1.3 * t for t in old]
    d = decide.figures(old, new, 0.05)
    from opbench.stats import run_figure

    assert d.ratio == pytest.approx(run_figure.value(new) / run_figure.value(old))
    assert d.verdict == "slower" and d.ci is not None and d.ci[0] < 1.3 < d.ci[1]
    assert decide.figures(old, old, 0.05).verdict == "same"
    few = decide.figures(old[:20], new[:20], 0.05)
    assert few.ci is None and few.verdict == "inconclusive" and "10th percentile" in few.reason


def test_same_comes_from_the_equivalence_test_when_the_verdicts_interval_is_wider() -> None:
    old, new = [1.0, 1.02, 0.98], [1.01, 0.99, 1.0]
    strict = decide.runs(old, new, 0.05, 0.995, blocks=[0, 0, 0])
    assert strict.verdict == "inconclusive" and strict.confidence == 0.995
    tost = decide.runs(old, new, 0.05, 0.995, blocks=[0, 0, 0], equivalence_alpha=0.05)
    assert tost.verdict == "same" and tost.confidence == 0.9
    assert 1 / 1.05 < tost.ci[0] < tost.ci[1] < 1.05  # the interval shown is the one judged
    # A clear slowdown stays slower at the verdict's own level.
    slow = decide.runs(old, [1.31, 1.32, 1.28], 0.05, 0.995, blocks=[0, 0, 0],
                       equivalence_alpha=0.05)
    assert slow.verdict == "slower" and slow.confidence == 0.995
