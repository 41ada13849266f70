"""The pytest plugin: the `opbench` fixture, --opbench-save/-compare/-fail-above/-disable, xdist.

Every inner session runs in a subprocess (runpytest_subprocess): an in-process
run would drop and re-import opbench's modules, leaving two copies of its
classes in this process. Regressions are made deterministic by benchmarking
sleeps ten times apart, never by thresholds on absolute times.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import PYTEST_PLUGIN_ARGS as PLUGIN
from opbench.results import load

pytest_plugins = ["pytester"]



SLEEP_TESTS = """
import os, time

SLEEP = float(os.environ["OPBENCH_TEST_SLEEP"])

def test_sleep(opbench):
    opbench(lambda: time.sleep(SLEEP), min_run_time=0.15)
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", *args,
                                         timeout=120)


def test_fixture_times_labels_and_saves(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bench="""
        import sys

        def spin():
            return sum(range(200))

        def test_callable(opbench):
            m = opbench(spin, min_run_time=0.02)
            assert m.median > 0 and m.label == "test_bench.py::test_callable"
            assert m.stmt == "spin()"

        def test_statement(opbench):
            m = opbench("sorted(xs)", setup="xs = list(range(50))[::-1]", sub_label="sorted",
                        description="50", method="adaptive_autorange", min_run_time=0.02,
                        label="custom")
            assert m.task_spec.setup == "xs = list(range(50))[::-1]" and m.label == "custom"

        def test_bad_method(opbench):
            import pytest
            with pytest.raises(ValueError, match="method must be one of"):
                opbench(spin, method="timeit")

        def test_no_torch_imported():
            assert "torch" not in sys.modules
    """)
    result = run(pytester, "--opbench-save", "out.json")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*opbench: 2 benchmark(s)*",
                                 "*test_bench.py::test_callable*", "*spin()*",
                                 "*custom*", "*sorted*",
                                 "opbench: saved 2 measurement(s) to out.json"])
    saved = load(pytester.path / "out.json")
    assert [(m.label, m.sub_label, m.description, m.stmt) for m in saved] == [
        ("test_bench.py::test_callable", None, None, "spin()"),
        ("custom", "sorted", "50", "sorted(xs)"),
    ]
    assert all(len(m.raw_times) >= 1 for m in saved)
    assert saved.environment.get("python")  # the controller records the environment


def test_no_benchmarks_no_summary_no_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = run(pytester, "--opbench-save", "out.json")
    result.assert_outcomes(passed=1)
    # The header may list the installed plugin ("plugins: opbench-0.1.0"); no
    # opbench section or message may follow.
    lines = result.stdout.str().splitlines()
    assert [line for line in lines if "opbench" in line and not line.startswith("plugins:")] == []
    assert not (pytester.path / "out.json").exists()


def test_disable_runs_once_untimed_and_saves_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bench="""
        calls = []

        def test_callable(opbench):
            assert opbench(lambda: calls.append(1), setup=lambda: calls.append("setup")) is None
            assert calls == ["setup", 1]

        def test_statement(opbench):
            ns = {"log": []}
            assert opbench("log.append(x)", setup="x = 7", globals=ns) is None
            # The Timer copies globals, so the list object is shared but the dict is not.
            assert ns["log"] == [7]
    """)
    result = run(pytester, "--opbench-disable", "--opbench-save", "out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["opbench: --opbench-disable: nothing timed, saved or compared"])
    assert not (pytester.path / "out.json").exists()


def _baseline(pytester: pytest.Pytester, sleep: float) -> None:
    pytester.makepyfile(test_sleep=SLEEP_TESTS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPBENCH_TEST_SLEEP", str(sleep))
        run(pytester, "--opbench-save", "base.json").assert_outcomes(passed=1)


def _compare(pytester: pytest.Pytester, sleep: float, *args: str) -> pytest.RunResult:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPBENCH_TEST_SLEEP", str(sleep))
        return run(pytester, "--opbench-compare", "base.json", *args)


def test_compare_passes_when_faster(pytester: pytest.Pytester) -> None:
    _baseline(pytester, 0.01)
    result = _compare(pytester, 0.001, "--opbench-fail-above", "5%")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*compared with base.json*",
                                 "test_sleep.py::test_sleep * faster",
                                 "*No significant regression beyond the threshold.*"])
    assert "regressed" not in result.stdout.str() and "FAILED" not in result.stdout.str()


def test_compare_fails_on_regression(pytester: pytest.Pytester) -> None:
    _baseline(pytester, 0.001)
    result = _compare(pytester, 0.01, "--opbench-fail-above", "5%")
    result.assert_outcomes(passed=1)  # every test passed; the benchmark gate failed
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "opbench FAILED: significantly slower than the baseline by more than 5.0%:",
        "  test_sleep.py::test_sleep",
    ])


def test_compare_without_fail_above_only_warns(pytester: pytest.Pytester) -> None:
    _baseline(pytester, 0.001)
    result = _compare(pytester, 0.01)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["opbench warning: significantly slower*",
                                 "  test_sleep.py::test_sleep"])


@pytest.mark.parametrize("args, message", [
    (["--opbench-fail-above", "5%"], "--opbench-fail-above needs --opbench-compare"),
    (["--opbench-compare", "missing.json"], "--opbench-compare: cannot load missing.json"),
    (["--opbench-compare", "base.json", "--opbench-fail-above", "200%"],
     "--opbench-fail-above must be between 0% and 100%"),
    (["--opbench-save", "no/such/dir/out.json"], "--opbench-save: directory "),
])
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, args, message) -> None:
    from opbench import Measurement, TaskSpec, save

    save([Measurement(1, [1e-3], TaskSpec("f()", "pass"))], pytester.path / "base.json",
         environment={})
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_xdist_workers_results_are_merged(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist", reason="needs pytest-xdist (the test extra)")
    pytester.makepyfile(test_par="""
        import pytest

        @pytest.mark.parametrize("n", [10, 100, 1000, 10000])
        def test_sum(opbench, n):
            opbench(f"sum(range({n}))", min_run_time=0.01)
    """)
    result = run(pytester, "-n", "2", "--opbench-save", "out.json")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*opbench: 4 benchmark(s)*",
                                 "opbench: saved 4 measurement(s) to out.json"])
    saved = load(pytester.path / "out.json")
    assert sorted(m.label for m in saved) == sorted(
        f"test_par.py::test_sum[{n}]" for n in (10, 100, 1000, 10000))


def test_plugin_import_is_torch_free() -> None:
    code = ("import sys, opbench.pytest_plugin\n"
            "assert 'torch' not in sys.modules\n"
            "assert 'opbench.cli.compare' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
