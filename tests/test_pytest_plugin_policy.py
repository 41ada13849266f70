"""opbench.integrations.pytest_plugin.policy: a result the gate would fail is measured again
and every measurement is pooled with equal weight (keeping the fastest would bias the gate
toward passing); per-benchmark thresholds."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from opbench import Measurement, TaskSpec
from opbench.integrations.pytest_plugin.policy import _CONFIRMATIONS, confirmed, pooled, threshold_of


def _m(centre: float, n: int = 12) -> Measurement:
    return Measurement(1, [centre * (1 + i / 200) for i in range(n)], TaskSpec("f()", "pass"))


def _state(baseline: list | None) -> SimpleNamespace:
    return SimpleNamespace(gate_on="time",
                           baseline=None if baseline is None else SimpleNamespace(all=lambda: baseline))


def _measures(*results: Measurement) -> tuple[list[int], object]:
    calls: list[int] = []

    def measure() -> Measurement:
        calls.append(1)
        return results[len(calls) - 1]
    return calls, measure


def test_without_a_baseline_the_first_result_stands() -> None:
    calls, measure = _measures(_m(1e-6))
    first = _m(2e-6)
    assert confirmed(_state(None), first, measure, 0.05) is first and calls == []


def test_a_result_in_line_with_the_baseline_is_not_measured_again() -> None:
    calls, measure = _measures(_m(1e-6))
    result = confirmed(_state([_m(1e-6)]), _m(1e-6), measure, 0.05)
    assert calls == [] and "remeasured" not in result.info


def test_a_real_regression_is_measured_again_at_most_twice_and_every_measurement_pooled() -> None:
    calls, measure = _measures(_m(2.1e-6), _m(1.9e-6), _m(0.1e-6))
    result = confirmed(_state([_m(1e-6)]), _m(2e-6), measure, 0.05)
    assert len(calls) == _CONFIRMATIONS == 2  # the third result is never asked for
    assert result.info["remeasured"] == {"measurements": 3, "how": "pooled",
                                         "why": "looked slower than the baseline"}
    assert len(result.times) == 36 and 1.9e-6 <= result.median <= 2.1e-6


def test_a_burst_of_load_is_pooled_not_dropped() -> None:
    # The fastest measurement alone (1 us) would pass; pooled, the slow one still counts.
    calls, measure = _measures(_m(1e-6), _m(1e-6))
    result = confirmed(_state([_m(1e-6)]), _m(3e-6), measure, 0.05)
    assert calls and max(result.times) >= 3e-6 and min(result.times) < 1.1e-6


def test_pooling_gives_each_measurement_equal_weight() -> None:
    many_blocks, few_blocks = _m(1e-6, n=100), _m(2e-6, n=4)
    both = pooled([many_blocks, few_blocks])
    assert len(both.times) == 8  # four order statistics of each, not 100 + 4
    assert sum(t < 1.5e-6 for t in both.times) == sum(t > 1.5e-6 for t in both.times) == 4
    assert pooled([few_blocks]) is few_blocks


@pytest.mark.parametrize(("given", "expected"), [(None, None), ("10%", 0.10), (0.25, 0.25)])
def test_threshold_of(given: object, expected: float | None) -> None:
    assert threshold_of(given) == (expected if expected is None else pytest.approx(expected))
