"""opbench.core.stopping.converge: stop when the median's confidence interval is narrow enough."""
from __future__ import annotations

import random

import pytest

from conftest import MockTimer
from opbench import errors, stats
from opbench.core.stopping import converge
from opbench.timer import Timer

COST = 2e-6
OVERHEAD = 60e-9


def noisy_mock(sigma, seed=0, bimodal=0.0):
    """Blocks with Gaussian noise of relative size `sigma` (and, optionally, a second mode
    `bimodal` slower, hit half the time); counts timer calls."""

    class Mock:
        calls = 0

        def __init__(self, stmt, setup, timer, globals, **kwargs):
            self._rng = random.Random(f"{seed}|{stmt}")

        def timeit(self, number):
            type(self).calls += 1
            mode = bimodal if self._rng.random() < 0.5 else 0.0
            return (OVERHEAD + COST * number) * (1 + self._rng.gauss(0, sigma) + mode)

    return Mock


class CountingMockTimer(MockTimer):
    """The shared mock (uniform 5% noise, 3% of blocks 3x slower), counting calls."""

    calls = 0

    def timeit(self, number):
        type(self).calls += 1
        return super().timeit(number)


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setattr(errors, "_shown", {"governor", "debug-build"})


def run_converge(monkeypatch, mock, **kwargs):
    monkeypatch.setattr(Timer, "_timer_cls", mock)
    return converge(Timer("f()"), **kwargs)


def test_reaches_target_and_records_it(monkeypatch):
    m = run_converge(monkeypatch, noisy_mock(0.03), target=0.01, min_run_time=0.01)
    assert m.info["converged"] is True and m.info["stop_reason"] == "target"
    assert m.info["target"] == 0.01 and m.info["confidence"] == 0.95
    assert m.info["relative_ci"] == pytest.approx(stats.relative_ci(m))
    assert stats.relative_ci(m) <= 0.01
    assert len(m.raw_times) >= 10 and sum(m.raw_times) >= 0.01


def test_interval_covers_the_true_median_in_most_seeds(monkeypatch):
    hits = 0
    for seed in range(40):
        m = run_converge(monkeypatch, noisy_mock(0.05, seed), target=0.01, min_run_time=0.01)
        lo, hi = stats.median_ci(m)
        hits += lo <= (OVERHEAD + COST * m.number_per_run) / m.number_per_run <= hi
    assert hits >= 34  # 95% nominal; stopping on the interval costs a little coverage


def test_fewer_timer_calls_than_adaptive_autorange_for_a_1pct_interval(monkeypatch):
    """The bar: at the same noise, converge(target=0.01) reaches a 1% relative CI with fewer
    timer calls than adaptive_autorange(threshold=0.01) spends. adaptive_autorange tests
    IQR / median, which more samples never shrink: at 2-5% noise it either runs to its time
    limit or stops early by luck with no 1% interval at all."""
    totals = {"converge": 0, "adaptive": 0}
    mocks = [noisy_mock(sigma, seed) for sigma in (0.02, 0.05) for seed in range(6)]
    for mock in [*mocks, CountingMockTimer]:
        mock.calls = 0
        m = run_converge(monkeypatch, mock, target=0.01, min_run_time=0.01)
        converge_calls, mock.calls = mock.calls, 0
        assert stats.relative_ci(m) <= 0.01
        # 1 s instead of the default 10 keeps the test fast: running out of it means
        # adaptive_autorange needed at least this many calls.
        a = Timer("f()").adaptive_autorange(threshold=0.01, min_run_time=0.01, max_run_time=1.0)
        reached = stats.summary(a).relative_ci <= 0.01
        assert converge_calls < mock.calls or not reached
        if reached:  # only by running out of time, never by its own rule
            assert sum(a.raw_times) >= 1.0
        totals["converge"] += converge_calls
        totals["adaptive"] += mock.calls
    assert totals["converge"] * 3 < totals["adaptive"]  # a lower bound for adaptive


def test_plateau_exit_on_two_modes(monkeypatch):
    m = run_converge(monkeypatch, noisy_mock(0.001, seed=1, bimodal=0.2),
                     target=0.01, min_run_time=0.01)
    assert m.info["converged"] is False and m.info["stop_reason"] == "plateau"
    assert m.info["relative_ci"] > 0.01
    assert len(m.raw_times) >= 200  # plateau is judged from 50 -> 200 samples on


def test_max_run_time_exit_without_plateau(monkeypatch):
    m = run_converge(monkeypatch, noisy_mock(0.001, seed=1, bimodal=0.2), target=0.01,
                     min_run_time=0.01, max_run_time=0.5, plateau=False)
    assert m.info["converged"] is False and m.info["stop_reason"] == "max_run_time"
    assert 0.5 <= sum(m.raw_times) < 0.5 + 0.01


def test_min_samples_and_callback(monkeypatch):
    seen = []
    m = run_converge(monkeypatch, noisy_mock(0.0001), target=0.5, min_samples=25,
                     min_run_time=0.001, callback=lambda n, t: seen.append((n, t)))
    assert len(m.raw_times) == 25
    assert seen == [(m.number_per_run, t) for t in m.raw_times]


def test_tiny_runs_warn_too_few_samples(monkeypatch):
    monkeypatch.setattr(Timer, "_timer_cls", noisy_mock(0.01))
    with pytest.warns(errors.BenchmarkWarning, match="too few samples"):
        m = converge(Timer("f()"), min_samples=2, min_run_time=1e-3, max_run_time=1e-3)
    assert m.info["relative_ci"] is None and not m.info["converged"]


@pytest.mark.parametrize("kwargs, match", [
    ({"target": 0}, "target"), ({"target": 1.5}, "target"), ({"confidence": 1}, "confidence"),
    ({"min_samples": 0}, "min_samples"), ({"min_run_time": -1}, "min_run_time"),
    ({"min_run_time": 2, "max_run_time": 1}, "max_run_time"),
])
def test_bad_arguments(monkeypatch, kwargs, match):
    monkeypatch.setattr(Timer, "_timer_cls", noisy_mock(0.01))
    with pytest.raises(ValueError, match=match):
        converge(Timer("f()"), **kwargs)


def test_real_timer_converges():
    m = converge(Timer("sum(range(20))"), target=0.05, min_run_time=0.02, max_run_time=1.0)
    assert m.info["stop_reason"] in ("target", "plateau", "max_run_time")
    assert m.task_spec.stmt == "sum(range(20))" and m.median > 0


def test_sample_with_a_block_length_sizes_blocks_by_time() -> None:
    import opbench
    from opbench.core.stopping import sample

    class Spy(opbench.Timer):
        asked: list[tuple[str, float]] = []

        def block_size(self, min_run_time: float) -> int:
            self.asked.append(("torch", min_run_time))
            return super().block_size(min_run_time)

        def block_size_for(self, seconds: float) -> int:
            self.asked.append(("for", seconds))
            return super().block_size_for(seconds)

    m = sample(Spy("sum(range(100))"), min_run_time=0.01, min_samples=12, block=0.001)
    assert Spy.asked == [("for", 0.001)] and len(m.times) >= 12
    sample(Spy("sum(range(100))"), min_run_time=0.01, min_samples=3)
    assert Spy.asked[-1] == ("torch", 0.01)
