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
