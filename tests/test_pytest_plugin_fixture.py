"""opbench.integrations.pytest_plugin.fixture: the ``opbench`` fixture times, names and records;
a result the gate would fail is measured again and every measurement is pooled with equal
weight (keeping the fastest would bias the gate toward passing); per-benchmark thresholds."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from opbench import Measurement, TaskSpec
from opbench.integrations.pytest_plugin.fixture import (
    _CONFIRMATIONS,
    BenchmarkFixture,
    confirmed,
    on_fastest_cpu,
    pooled,
    threshold_of,
)
from opbench.integrations.pytest_plugin.state import State
from plugin_doubles import FakeConfig


def _node(nodeid: str = "tests/test_x.py::test_sum", group: str | None = None) -> Any:
    marker = None if group is None else SimpleNamespace(kwargs={"group": group})
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: marker)


def _fixture(group: str | None = None, **options: Any) -> tuple[BenchmarkFixture, State]:
    state = State(FakeConfig(opbench_min_time=0.001, opbench_min_samples=3, **options))  # type: ignore[arg-type]
    return BenchmarkFixture(_node(group=group), state), state


def test_each_call_is_a_benchmark_keyed_by_the_node_id() -> None:
    bench, state = _fixture()
    first = bench("sum(xs)", setup="xs = list(range(100))")
    bench(lambda: None)
    bench("pass", name="empty")
    assert [r.task_spec.key for r in state.results] == [
        "tests/test_x.py::test_sum", "tests/test_x.py::test_sum#1", "tests/test_x.py::test_sum::empty"]
    assert first.task_spec.label == "tests/test_x.py::test_sum"
    assert len(first.times) >= 3 and first.median > 0  # --opbench-min-samples honoured


def test_the_marker_group_is_recorded() -> None:
    bench, _ = _fixture(group="io")
    assert bench("pass").info["group"] == "io"


def test_disabled_runs_the_statement_once() -> None:
    calls: list[int] = []
    bench, state = _fixture(opbench_disable=True)
    m = bench(lambda: calls.append(1))
    assert calls == [1] and m.number_per_run == 1 and len(m.times) == 1
    assert state.results == []  # nothing recorded, nothing saved


def test_other_methods_get_their_arguments() -> None:
    bench, _ = _fixture()
    m = bench("pass", method="adaptive_autorange", min_run_time=0.001, method_kwargs={"threshold": 0.5})
    assert m.median > 0
    with pytest.raises(ValueError, match="method must be one of blocked_autorange"):
        bench("pass", method="timeit")


def test_a_disturbed_figure_is_measured_again_unless_told_not_to(monkeypatch) -> None:
    from opbench.core import recovery

    calls: list[str] = []

    def recovered(measure: Any, **kwargs: Any) -> Any:
        calls.append("recovered")
        return measure()

    monkeypatch.setattr(recovery, "recovered", recovered)
    bench, state = _fixture()
    assert state.recover
    bench("pass")
    assert calls == ["recovered"]
    bench, state = _fixture(opbench_no_recover=True)
    assert not state.recover
    bench("pass")
    assert calls == ["recovered"]  # measured once, as measured


def test_memory_counts_the_statement_with_the_sessions_or_its_own_numbers(monkeypatch) -> None:
    import opbench.timer

    seen: list[tuple[str, int, int]] = []

    def memory(self: Any, number: int, repeats: int) -> Any:
        seen.append((self.task_spec.stmt, number, repeats))
        return SimpleNamespace(info={})
    monkeypatch.setattr(opbench.timer.Timer, "memory", memory)
    bench, state = _fixture(opbench_mode="memory", opbench_memory_number=7)
    bench("a", memory_repeats=2)
    timed, _ = _fixture()  # a time-mode session: mode="memory" counts this benchmark alone
    timed("b", mode="memory", memory_number=5)
    assert seen == [("a", 7, 2), ("b", 5, 3)] and len(state.results) == 1
    with pytest.raises(ValueError, match="mode must be None"):
        timed("c", mode="instructions")
    with pytest.raises(ValueError, match="memory_number"):
        timed("c", mode="memory", memory_number=0)


def test_a_single_threaded_benchmark_is_timed_on_the_fastest_cpu(monkeypatch) -> None:
    import os

    from opbench import _C

    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs this process may use")
    allowed = os.sched_getaffinity(0)
    slow = max(allowed)
    # The speed probe reads the last CPU as slower (another tenant on its sibling).
    monkeypatch.setattr(_C, "cpu_speed_probe_ns", lambda tries, it: (
        2000 if os.sched_getaffinity(0) == {slow} else 1000))
    with on_fastest_cpu(1):
        inside = os.sched_getaffinity(0)
    assert len(inside) == 1 and inside != {slow}
    assert os.sched_getaffinity(0) == allowed  # given back
    with on_fastest_cpu(4):  # a parallel benchmark keeps every CPU
        assert os.sched_getaffinity(0) == allowed


def _measured(centre: float, n: int = 12) -> Measurement:
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
    calls, measure = _measures(_measured(1e-6))
    first = _measured(2e-6)
    assert confirmed(_state(None), first, measure, 0.05) is first and calls == []


def test_a_result_in_line_with_the_baseline_is_not_measured_again() -> None:
    calls, measure = _measures(_measured(1e-6))
    result = confirmed(_state([_measured(1e-6)]), _measured(1e-6), measure, 0.05)
    assert calls == [] and "remeasured" not in result.info


def test_a_real_regression_is_measured_again_at_most_twice_and_every_measurement_pooled() -> None:
    calls, measure = _measures(_measured(2.1e-6), _measured(1.9e-6), _measured(0.1e-6))
    result = confirmed(_state([_measured(1e-6)]), _measured(2e-6), measure, 0.05)
    assert len(calls) == _CONFIRMATIONS == 2  # the third result is never asked for
    assert result.info["remeasured"] == {"measurements": 3, "how": "pooled",
                                         "why": "looked slower than the baseline"}
    assert len(result.times) == 36 and 1.9e-6 <= result.median <= 2.1e-6


def test_a_burst_of_load_is_pooled_not_dropped() -> None:
    # The fastest measurement alone (1 us) would pass; pooled, the slow one still counts.
    calls, measure = _measures(_measured(1e-6), _measured(1e-6))
    result = confirmed(_state([_measured(1e-6)]), _measured(3e-6), measure, 0.05)
    assert calls and max(result.times) >= 3e-6 and min(result.times) < 1.1e-6


def test_pooling_gives_each_measurement_equal_weight() -> None:
    many_blocks, few_blocks = _measured(1e-6, n=100), _measured(2e-6, n=4)
    both = pooled([many_blocks, few_blocks])
    assert len(both.times) == 8  # four order statistics of each, not 100 + 4
    assert sum(t < 1.5e-6 for t in both.times) == sum(t > 1.5e-6 for t in both.times) == 4
    assert pooled([few_blocks]) is few_blocks


@pytest.mark.parametrize(("given", "expected"), [(None, None), ("10%", 0.10), (0.25, 0.25)])
def test_threshold_of(given: object, expected: float | None) -> None:
    assert threshold_of(given) == (expected if expected is None else pytest.approx(expected))
