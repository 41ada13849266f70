"""opbench.integrations.pytest_plugin.options: the ``--opbench-*`` options and test selection."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from opbench.integrations.pytest_plugin import options
from plugin_doubles import FakeConfig, RecordingParser, defaults


def test_every_option_is_documented_and_namespaced() -> None:
    parser = RecordingParser()
    options.add_options(parser)  # type: ignore[arg-type]
    assert all(name.startswith("--opbench-") for name in parser.options)
    assert all(kwargs.get("help") for kwargs in parser.options.values())
    assert parser.options["--opbench-mode"]["choices"] == ("time", "instructions", "memory")
    assert parser.options["--opbench-compare"]["const"] == options.LATEST


def test_defaults_measure_for_a_decision() -> None:
    d = defaults()
    assert (d["opbench_min_time"], d["opbench_min_samples"], d["opbench_max_time"]) == (0.2, 40, None)
    assert d["opbench_inconclusive"] == "fail" and d["opbench_sort"] == "name"


class _Hook:
    def __init__(self) -> None:
        self.deselected: list[Any] = []

    def pytest_deselected(self, items: list[Any]) -> None:
        self.deselected.extend(items)


def _select(**flags: bool) -> tuple[list[str], list[str]]:
    config = FakeConfig(**flags)
    config.hook = _Hook()  # type: ignore[attr-defined]
    items: list[Any] = [SimpleNamespace(name="bench", fixturenames=("opbench", "tmp_path")),
                        SimpleNamespace(name="plain", fixturenames=("tmp_path",))]
    options.select_tests(config, items)  # type: ignore[arg-type]
    return [i.name for i in items], [i.name for i in config.hook.deselected]  # type: ignore[attr-defined]


def test_only_and_skip_pick_the_benchmarks_by_their_fixture() -> None:
    assert _select() == (["bench", "plain"], [])
    assert _select(opbench_only=True) == (["bench"], ["plain"])
    assert _select(opbench_skip=True) == (["plain"], ["bench"])


def test_pytest_benchmarks_fixture_is_a_benchmark_too() -> None:
    config = FakeConfig(opbench_only=True)
    config.hook = _Hook()  # type: ignore[attr-defined]
    items: list[Any] = [SimpleNamespace(name="compat", nodeid="t.py::compat",
                                        fixturenames=("benchmark",)),
                        SimpleNamespace(name="plain", nodeid="t.py::plain", fixturenames=())]
    options.select_tests(config, items)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["compat"]


def test_opbench_select_keeps_the_tests_that_hold_the_keys(monkeypatch) -> None:
    import pytest

    monkeypatch.setenv(options._SELECT_ENV, '["t.py::a#1", "t.py::b[x]::named"]')
    config = FakeConfig()
    config.hook = _Hook()  # type: ignore[attr-defined]
    items: list[Any] = [SimpleNamespace(name=n, nodeid=f"t.py::{n}", fixturenames=("opbench",))
                        for n in ("a", "ab", "b[x]", "b[y]")]
    options.select_tests(config, items)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["a", "b[x]"]
    assert [i.name for i in config.hook.deselected] == ["ab", "b[y]"]  # type: ignore[attr-defined]
    monkeypatch.setenv(options._SELECT_ENV, "{not json")
    with pytest.raises(pytest.UsageError, match="must be a JSON list of benchmark keys"):
        options.select_tests(config, items)  # type: ignore[arg-type]
