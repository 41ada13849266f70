"""opbench.integrations.pytest_plugin.benchmark_compat: pytest-benchmark's ``benchmark``
fixture served by opbench where pytest-benchmark is not active (``-p no:benchmark`` here:
pytest-benchmark is installed), and kept out of its way where it is. Inner sessions run in
subprocesses, as in test_pytest_plugin.py."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from opbench.integrations.pytest_plugin import benchmark_compat
from opbench.integrations.pytest_plugin.options import load_args
from opbench.store.results import load

pytest_plugins = ["pytester"]

PLUGIN = load_args()

SUITE = """
import pytest

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def test_call_form(benchmark):
    assert benchmark(fib, 10) == 55
    benchmark.extra_info["n"] = 10
    assert benchmark.stats.stats.rounds >= 3 and benchmark.stats["min"] > 0
    assert benchmark.name == "test_call_form" and benchmark.fullname.endswith("::test_call_form")

@pytest.mark.benchmark(group="sorting", max_time=0.5, min_rounds=45)
def test_pedantic(benchmark):
    calls = []
    def setup():
        return (list(range(100, 0, -1)),), {}
    out = benchmark.pedantic(lambda xs: calls.append(1) or sorted(xs), setup=setup, rounds=7,
                             warmup_rounds=2)
    assert out[0] == 1 and len(calls) == 9  # two warm-up rounds, seven timed, one call each
    assert benchmark.stats.stats.rounds == 7 and benchmark.group == "sorting"

def test_iterations(benchmark):
    benchmark.pedantic(sorted, args=([3, 1, 2],), rounds=5, iterations=4)
    assert benchmark.stats.iterations == 4

def test_once_only(benchmark):
    benchmark(len, "abc")
    with pytest.raises(Exception, match="used once per test"):
        benchmark(len, "abc")

def test_plain():
    pass
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider",
                                         "--opbench-min-time", "0.005", *args, timeout=300)


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_pytest_benchmark_suite_runs_unchanged_under_opbench(suite: pytest.Pytester) -> None:
    result = _run(suite, "-p", "no:benchmark", "--opbench-save", "out.json",
                  "--benchmark-json", "pb.json")
    result.assert_outcomes(passed=5)
    results = {m.task_spec.key: m for m in load(suite.path / "out.json")}
    assert set(results) == {f"test_suite.py::test_{n}" for n in
                            ("call_form", "pedantic", "iterations", "once_only")}
    call = results["test_suite.py::test_call_form"]
    assert call.info["extra_info"] == {"n": 10} and len(call.times) >= 40
    pedantic = results["test_suite.py::test_pedantic"]
    assert len(pedantic.times) == 7 and pedantic.info["group"] == "sorting"
    assert results["test_suite.py::test_iterations"].number_per_run == 4
    text = result.stdout.str()
    assert "opbench: 1 benchmark(s), group 'sorting'" in text
    # --benchmark-json: pytest-benchmark's format, which opbench reads back as a baseline.
    doc = json.loads((suite.path / "pb.json").read_text())
    assert {b["fullname"] for b in doc["benchmarks"]} == set(results)
    assert len(load(suite.path / "pb.json")) == 4


def test_its_options_mean_what_they_mean(suite: pytest.Pytester) -> None:
    # Disabled: each function runs once, untimed, and has no stats, as under pytest-benchmark
    # (the three tests that assert on rounds fail, as they would there).
    disabled = _run(suite, "-p", "no:benchmark", "--benchmark-disable", "--opbench-save", "o.json")
    disabled.assert_outcomes(passed=2, failed=3)
    disabled.stdout.fnmatch_lines(["*test_pedantic*assert (1 == 1 and 1 == 9)*"])
    assert not (suite.path / "o.json").exists()  # nothing timed, nothing saved
    skipped = _run(suite, "-p", "no:benchmark", "--benchmark-skip")
    skipped.assert_outcomes(passed=1, skipped=4)
    only = _run(suite, "-p", "no:benchmark", "--benchmark-only", "-k", "plain or call_form",
                "--benchmark-warmup", "on")
    only.assert_outcomes(passed=1, skipped=1)
    header = _run(suite, "-p", "no:benchmark", "-k", "iterations", "--benchmark-timer",
                  "time.process_time")
    header.stdout.fnmatch_lines(["opbench: serving pytest-benchmark's `benchmark` fixture*",
                                 "opbench: no effect under opbench: --benchmark-timer"])


def test_pytest_benchmark_keeps_its_own_fixture_where_it_is_active(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_theirs="""
        def test_whose(benchmark):
            assert type(benchmark).__module__ == "pytest_benchmark.fixture"
    """)
    result = _run(suite, "test_theirs.py", "--benchmark-disable")
    result.assert_outcomes(passed=1)
    assert "serving pytest-benchmark" not in result.stdout.str()


def test_is_needed_reads_blocked_registered_and_installed() -> None:
    class Manager:
        def __init__(self, blocked: set[str], plugins: set[str]) -> None:
            self.blocked, self.plugins = blocked, plugins

        def is_blocked(self, name: str) -> bool:
            return name in self.blocked

        def has_plugin(self, name: str) -> bool:
            return name in self.plugins

    assert benchmark_compat.is_needed(Manager({"benchmark"}, set()))  # type: ignore[arg-type]
    assert not benchmark_compat.is_needed(Manager(set(), {"benchmark"}))  # type: ignore[arg-type]
    # Installed here (the test extra): its entry point would load it.
    assert not benchmark_compat.is_needed(Manager(set(), set()))  # type: ignore[arg-type]


def test_the_marker_takes_only_what_it_knows() -> None:
    node = SimpleNamespace(get_closest_marker=lambda name: SimpleNamespace(
        args=(), kwargs={"groupp": "x"}), name="t", nodeid="t.py::t")
    request = SimpleNamespace(node=node, config=SimpleNamespace(stash={}))
    with pytest.raises(ValueError, match="takes only keyword arguments among group"):
        benchmark_compat.PytestBenchmarkFixture(request)  # type: ignore[arg-type]
