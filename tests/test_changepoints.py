"""Change points: steps and drifts found at their points, noise left alone."""
from __future__ import annotations

import math
import random

import pytest

from opbench.stats.changepoints import detect, noise_sigma


def noisy(levels: list[float], sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [v * (1 + rng.gauss(0, sigma)) for v in levels]


def found(values: list[float], **options) -> list[tuple[str, int, int]]:
    return [(c.kind, c.start, c.end) for c in detect(values, **options).changes
            if c.exceeds_noise]


@pytest.mark.parametrize("seed", range(5))
def test_a_15_percent_step_is_found_at_its_point(seed: int) -> None:
    values = noisy([1.0] * 12 + [1.15] * 18, 0.01, seed)
    changes = [c for c in detect(values).changes if c.exceeds_noise]
    assert [(c.kind, c.start, c.end) for c in changes] == [("step", 11, 12)]
    assert changes[0].size == pytest.approx(0.15, abs=0.02)
    assert changes[0].before == pytest.approx(1.0, rel=0.02)


@pytest.mark.parametrize("seed", range(5))
def test_a_1_percent_per_point_drift_is_one_drift(seed: int) -> None:
    values = noisy([1.0] * 15 + [1.01 ** i for i in range(1, 16)], 0.003, seed)
    (change,) = [c for c in detect(values).changes if c.exceeds_noise]
    assert change.kind == "drift" and change.start in (14, 15, 16) and change.end == 29
    assert change.per_point == pytest.approx(0.01, abs=0.002)


@pytest.mark.parametrize("seed", range(20))
def test_noise_alone_has_no_change(seed: int) -> None:
    assert found(noisy([1.0] * 40, 0.01, seed)) == []


def test_a_one_run_spike_is_not_a_change() -> None:
    values = noisy([1.0] * 30, 0.003, 1)
    values[10] *= 1.4  # a burst of load during one run
    assert found(values) == []


def test_a_step_down_is_negative() -> None:
    (change,) = [c for c in detect([2.0] * 8 + [1.0] * 8).changes if c.exceeds_noise]
    assert change.kind == "step" and change.size == pytest.approx(-0.5)


def test_identical_counts_use_the_noise_floor() -> None:
    values = [1_000_000.0] * 10 + [1_000_010.0] * 10  # +10 instructions: 0.001%
    assert found(values) == []
    assert found(values, noise_floor=1e-7) == [("step", 9, 10)]


def test_fit_follows_the_levels() -> None:
    d = detect([1.0] * 5 + [2.0] * 5)
    assert d.segments == [(0, 5), (5, 10)]
    assert d.fit == pytest.approx([1.0] * 5 + [2.0] * 5)


def test_short_and_bad_input() -> None:
    assert detect([]).changes == [] and detect([1.0]).changes == []
    assert detect([1.0, 2.0, 3.0]).segments == [(0, 3)]  # fewer than two levels of two
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="finite positive"):
            detect([1.0, bad])


def test_noise_sigma_ignores_levels_and_slopes() -> None:
    rng = random.Random(3)
    base = [rng.gauss(0, 0.01) for _ in range(400)]
    ramp = [v + 0.05 * i for i, v in enumerate(base)]
    assert noise_sigma(base) == pytest.approx(0.01, rel=0.15)
    assert noise_sigma(ramp) == pytest.approx(noise_sigma(base), rel=1e-6)


# -- replicates: a commit's runs ---------------------------------------------------

def replicated(levels: list[float], sigma: float, seed: int, runs: int = 3) -> list[list[float]]:
    rng = random.Random(seed)
    return [[v * math.exp(rng.gauss(0, sigma)) for _ in range(runs)] for v in levels]


def found_runs(runs: list[list[float]], **options) -> list[tuple[str, int, int]]:
    from opbench.stats.changepoints import detect_runs

    return [(c.kind, c.start, c.end) for c in detect_runs(runs, **options).changes
            if c.exceeds_noise]


@pytest.mark.parametrize("seed", range(5))
def test_a_spike_of_one_replicated_commit_is_two_steps(seed: int) -> None:
    runs = replicated([1.0] * 6 + [1.8] + [1.0] * 5, 0.02, seed)
    assert found_runs(runs) == [("step", 5, 6), ("step", 6, 7)]


@pytest.mark.parametrize("seed", range(5))
def test_a_step_after_the_first_commit_stays_a_step(seed: int) -> None:
    # Issue 38: one slow first release came out as "drift -84% over 11 commits".
    runs = replicated([6.0] + [1.0] * 11, 0.02, seed)
    assert found_runs(runs) == [("step", 0, 1)]


@pytest.mark.parametrize("seed", range(5))
def test_separate_steps_stay_steps_not_a_drift(seed: int) -> None:
    runs = replicated([1.0] * 4 + [0.6] * 3 + [0.45] * 3 + [0.3] * 3, 0.02, seed)
    assert found_runs(runs) == [("step", 3, 4), ("step", 6, 7), ("step", 9, 10)]


@pytest.mark.parametrize("seed", range(20))
def test_replicated_noise_alone_has_no_change(seed: int) -> None:
    assert found_runs(replicated([1.0] * 13, 0.05, seed)) == []


def test_a_commit_whose_runs_scatter_weighs_less_than_one_whose_runs_agree() -> None:
    from opbench.stats.changepoints import _weight, replicate_noise

    assert replicate_noise([[1.0]]) is None
    noise = replicate_noise([[1.0, 1.01], [2.0, 2.02], [3.0, 2.97]])
    assert noise == pytest.approx(math.log(1.01) / (0.6745 * math.sqrt(2)), rel=1e-3)
    assert _weight([1.0, 1.01, 0.99], noise) == 3.0
    # One of three far off: the median stands where the other two are, full weight.
    assert _weight([1.0, 1.01, 1.9], noise) == 3.0
    assert _weight([1.0, 1.5, 2.2], noise) < 1.0  # scattered: no level at all
    with pytest.raises(ValueError, match="at least one run"):
        found_runs([[1.0], []])


def test_a_commit_measured_only_on_a_slowed_machine_is_no_level() -> None:
    # Every run of commit 0 ran on a core another tenant slowed 1.7x (the history knows it
    # from the runs' speed probes): trusted, it reads as a 41% step after the first commit.
    runs = replicated([1.7] + [1.0] * 8, 0.01, 2)
    assert found_runs(runs) == [("step", 0, 1)]
    assert found_runs(runs, trusted=[False] + [True] * 8) == []
