"""opbench.integrations.pytest_plugin.fixture: the ``opbench`` fixture times, names and records."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from opbench.integrations.pytest_plugin.fixture import BenchmarkFixture
from opbench.integrations.pytest_plugin.session import _Session
from plugin_doubles import FakeConfig


def _node(nodeid: str = "tests/test_x.py::test_sum", group: str | None = None) -> Any:
    marker = None if group is None else SimpleNamespace(kwargs={"group": group})
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: marker)


def _fixture(group: str | None = None, **options: Any) -> tuple[BenchmarkFixture, _Session]:
    state = _Session(FakeConfig(opbench_min_time=0.001, opbench_min_samples=3, **options))  # type: ignore[arg-type]
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
    from opbench.integrations.pytest_plugin import fixture

    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs this process may use")
    allowed = os.sched_getaffinity(0)
    slow = max(allowed)
    # The speed probe reads the last CPU as slower (another tenant on its sibling).
    monkeypatch.setattr(_C, "cpu_speed_probe_ns", lambda tries, it: (
        2000 if os.sched_getaffinity(0) == {slow} else 1000))
    with fixture._on_fastest_cpu(1):
        inside = os.sched_getaffinity(0)
    assert len(inside) == 1 and inside != {slow}
    assert os.sched_getaffinity(0) == allowed  # given back
    with fixture._on_fastest_cpu(4):  # a parallel benchmark keeps every CPU
        assert os.sched_getaffinity(0) == allowed
