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
