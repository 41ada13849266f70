"""opbench.integrations.pytest_plugin.policy: a result the gate would fail is measured again."""
from __future__ import annotations

from types import SimpleNamespace

from opbench import Measurement, TaskSpec
from opbench.integrations.pytest_plugin.policy import _CONFIRMATIONS, confirmed


def _m(centre: float) -> Measurement:
    return Measurement(1, [centre * (1 + i / 200) for i in range(12)], TaskSpec("f()", "pass"))


def _state(baseline: list | None) -> SimpleNamespace:
    return SimpleNamespace(threshold=0.05,
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
    assert confirmed(_state(None), first, measure) is first and calls == []


def test_a_burst_of_load_is_measured_again_and_the_fastest_stands() -> None:
    calls, measure = _measures(_m(1.0e-6))
    result = confirmed(_state([_m(1e-6)]), _m(2e-6), measure)
    assert len(calls) == 1 and result.median == _m(1.0e-6).median
    assert result.info["confirmations"] == 1


def test_a_real_regression_is_confirmed_at_most_twice_and_kept() -> None:
    calls, measure = _measures(_m(2.1e-6), _m(1.9e-6), _m(0.1e-6))
    result = confirmed(_state([_m(1e-6)]), _m(2e-6), measure)
    assert len(calls) == _CONFIRMATIONS == 2
    assert result.median == _m(1.9e-6).median and result.info["confirmations"] == 2


def test_a_result_in_line_with_the_baseline_is_not_measured_again() -> None:
    calls, measure = _measures(_m(1e-6))
    result = confirmed(_state([_m(1e-6)]), _m(1e-6), measure)
    assert calls == [] and "confirmations" not in result.info
