"""The pytest plugin: the `opbench` fixture and the regression gate (--opbench-*), xdist.

Every inner session runs in a subprocess (runpytest_subprocess): an in-process
run would drop and re-import opbench's modules, leaving two copies of its
classes in this process. Timings are made deterministic by an inner conftest
that swaps Timer's engine for one with fixed costs per statement (the
`_timer_cls` hook torch's own tests use), never by thresholds on real times.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import PYTEST_PLUGIN_ARGS as PLUGIN
from opbench.store.results import load

pytest_plugins = ["pytester"]

# Inner sessions' conftest: every statement costs COSTS[its name] seconds per call
# (1 us unless listed), with a tiny deterministic spread so intervals form, and each
# timed block logs its real start and end (after a short real sleep) to LOG.
CONFTEST = """
import functools, json, os, time
import opbench

COSTS = json.loads(os.environ.get("OPBENCH_TEST_COSTS", "{}"))
LOG = os.environ.get("OPBENCH_TEST_LOG")
# The first BURST measurements of the process run twice as slow: another process's
# load. (A measurement starts with Timer's probes: timeit(0), or timeit(1) to size blocks.)
BURST = int(os.environ.get("OPBENCH_TEST_BURST", "0"))


def _name(stmt):
    while isinstance(stmt, functools.partial):
        stmt = stmt.func
    return getattr(stmt, "__name__", str(stmt))


class FixedCost:
    def __init__(self, stmt, setup, timer, globals, **kwargs):
        self._stmt = stmt
        self._cost = COSTS.get(_name(stmt), 1e-6)
        self._calls = 0

    measurements = 0
    last = None

    def timeit(self, number):
        self._calls += 1
        if number <= 1 and (FixedCost.last is None or FixedCost.last > 1):
            FixedCost.measurements += 1
        FixedCost.last = number
        burst = 2.0 if FixedCost.measurements <= BURST else 1.0
        if LOG:
            start = time.monotonic()
            time.sleep(0.002)
            with open(LOG, "a") as f:
                f.write(f"{os.getpid()} {start} {time.monotonic()}\\n")
        return 1e-8 + self._cost * burst * number * (1 + 0.002 * (self._calls % 5))

    def as_callable(self):
        return self._stmt


opbench.Timer._timer_cls = FixedCost
"""

BENCH = """
def work():
    pass


def test_work(opbench):
    opbench(work)
"""


def run(pytester: pytest.Pytester, *args: str, costs: dict[str, float] | None = None,
        log: str | None = None, burst: int = 0) -> pytest.RunResult:
    env = {"OPBENCH_TEST_COSTS": json.dumps(costs or {}), "OPBENCH_TEST_BURST": str(burst)}
    if log:
        env["OPBENCH_TEST_LOG"] = log
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        return pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", *args,
                                             timeout=300)


@pytest.fixture
def bench(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_bench=BENCH)
    return pytester


# -- the fixture -------------------------------------------------------------------

def test_fixture_times_labels_and_saves(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bench="""
        import sys

        def spin():
            return sum(range(200))

        def test_callable(opbench):
            m = opbench(spin, min_run_time=0.02)
            assert m.median > 0 and m.label == "test_bench.py::test_callable"
            assert m.stmt == "spin()" and m.task_spec.key == "test_bench.py::test_callable"
            assert len(m.times) >= 40  # --opbench-min-samples' default

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
                                 "Benchmark*Median*IQR*Samples*ops/s",
                                 "test_bench.py::test_callable *",
                                 "test_bench.py::test_statement *",
                                 "opbench: saved 2 result(s) to out.json"])
    saved = load(pytester.path / "out.json")
    assert [(m.label, m.sub_label, m.description, m.stmt) for m in saved] == [
        ("test_bench.py::test_callable", None, None, "spin()"),
        ("custom", "sorted", "50", "sorted(xs)"),
    ]
    assert saved.environment.get("python")  # the controller records the environment
    assert stat.S_IMODE(os.stat(pytester.path / "out.json").st_mode) == 0o644
    # Where the callable is defined, relative to the project (issue 34: it was absolute).
    assert saved[0].info["source"] == "test_bench.py:3"
    assert str(pytester.path) not in (pytester.path / "out.json").read_text()


def test_no_benchmarks_no_summary_no_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = run(pytester, "--opbench-save", "out.json")
    result.assert_outcomes(passed=1)
    # The header may list the installed plugin ("plugins: opbench-0.1.0"); no
    # opbench section or message may follow.
    lines = result.stdout.str().splitlines()
    assert [line for line in lines if "opbench" in line and not line.startswith("plugins:")] == []
    assert not (pytester.path / "out.json").exists()


def test_disable_runs_once_and_returns_what_the_enabled_fixture_returns(
        pytester: pytest.Pytester) -> None:
    # The README's example, unchanged: it must pass with and without --opbench-disable.
    pytester.makepyfile(test_readme="""
        def test_sort_speed(opbench):
            xs = list(range(1000, 0, -1))
            m = opbench(lambda: sorted(xs), min_run_time=0.05)
            assert m.median > 0

        calls = []

        def test_once(opbench):
            m = opbench(lambda: calls.append(1), setup=lambda: calls.append("setup"))
            assert calls == ["setup", 1] and len(m.times) == 1 and m.number_per_run == 1
    """)
    result = run(pytester, "--opbench-disable", "--opbench-save", "out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["opbench: --opbench-disable: each benchmark ran once; "
                                 "nothing saved or compared"])
    assert not (pytester.path / "out.json").exists()
    run(pytester, "-k", "sort_speed").assert_outcomes(passed=1)


def test_several_benchmarks_in_one_test_get_their_own_keys(bench: pytest.Pytester) -> None:
    # Two lambdas in one test used to become one `<lambda>()` row, pooled silently.
    bench.makepyfile(test_bench="""
        import functools

        def scaled(k):
            pass

        def test_many(opbench):
            opbench(lambda: 1)
            opbench(lambda: 2)
            opbench(functools.partial(scaled, 3), name="partial")
    """)
    bench_result = run(bench, "--opbench-save", "out.json")
    bench_result.assert_outcomes(passed=1)
    keys = [m.task_spec.key for m in load(bench.path / "out.json")]
    assert keys == ["test_bench.py::test_many", "test_bench.py::test_many#1",
                    "test_bench.py::test_many::partial"]


def test_groups_and_sorting_of_the_summary(bench: pytest.Pytester) -> None:
    bench.makepyfile(test_bench="""
        import pytest

        def fast():
            pass

        def slow():
            pass

        @pytest.mark.opbench(group="io")
        def test_slow(opbench):
            opbench(slow)

        @pytest.mark.opbench(group="io")
        def test_fast(opbench):
            opbench(fast)

        def test_other(opbench):
            opbench(fast)
    """)
    result = run(bench, "--opbench-sort", "median", costs={"slow": 1e-3, "fast": 1e-6})
    result.assert_outcomes(passed=3)
    text = result.stdout.str()
    assert "opbench: 2 benchmark(s), group 'io'" in text and "opbench: 1 benchmark(s)" in text
    io = text[text.index("group 'io'"):]
    assert io.index("test_fast") < io.index("test_slow")  # by median


def test_only_and_skip_select_the_benchmarks(bench: pytest.Pytester) -> None:
    bench.makepyfile(test_other="def test_plain():\n    pass\n")
    run(bench, "--opbench-only").assert_outcomes(passed=1, deselected=1)
    result = run(bench, "--opbench-skip")
    result.assert_outcomes(passed=1, deselected=1)
    assert "test_plain" in result.stdout.str() or result.ret == 0


# -- the gate --------------------------------------------------------------------

def _save_baseline(bench: pytest.Pytester, cost: float, *args: str) -> None:
    run(bench, "--opbench-save", "base.json", *args, costs={"work": cost}).assert_outcomes(
        passed=1)


def test_a_regression_fails_the_session(bench: pytest.Pytester) -> None:
    _save_baseline(bench, 1e-6)
    result = run(bench, "--opbench-compare", "base.json", "--opbench-fail-above", "5%",
                 costs={"work": 2e-6})
    result.assert_outcomes(passed=1)  # every test passed; the benchmark gate failed
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*compared with base.json*",
                                 "test_bench.py::test_work * REGRESSION",
                                 "FAILED: 1 regression in 1 benchmark(s).",
                                 "  test_bench.py::test_work: 2.0*x slower (regression, "
                                 "threshold 5.0%)"])
    # The one ratio: the table's Ratio column is the failure line's.
    assert "2.000  2.000 to 2.000" in result.stdout.str()
    # pytest's last line says the gate failed the session, not "1 passed" alone.
    last = [line for line in result.stdout.lines if line.strip()][-1]
    assert "1 passed, 1 opbench gate failed in" in last


def test_a_burst_of_load_is_re_measured_before_it_fails_the_gate(
        bench: pytest.Pytester) -> None:
    _save_baseline(bench, 1e-6)
    # The whole first measurement 2x slow (another process's load), the next one clean.
    result = run(bench, "--opbench-compare", "base.json", "--opbench-fail-above", "5%",
                 "--opbench-save", "new.json", burst=1)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    (m,) = load(bench.path / "new.json")
    # Every measurement pooled (not the fastest kept), and the report says so.
    assert m.info["remeasured"]["how"] == "pooled"
    assert m.info["remeasured"]["measurements"] in (2, 3)
    assert max(m.times) > 1.9e-6  # the burst's times are in the pooled result
    assert "Measured again because they looked slower (all measurements pooled): " \
           "test_bench.py::test_work" in result.stdout.str()
    # A real regression is there in every measurement: pooled, and failed.
    result = run(bench, "--opbench-compare", "base.json", "--opbench-fail-above", "5%",
                 "--opbench-save", "slow.json", costs={"work": 2e-6})
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert load(bench.path / "slow.json")[0].info["remeasured"]["measurements"] == 3


def test_no_change_and_an_improvement_pass(bench: pytest.Pytester) -> None:
    _save_baseline(bench, 1e-6)
    for cost, verdict in ((1e-6, "same"), (0.5e-6, "improvement")):
        result = run(bench, "--opbench-compare", "base.json", "--opbench-fail-above", "5%",
                     costs={"work": cost})
        assert result.ret == pytest.ExitCode.OK
        result.stdout.fnmatch_lines([f"test_bench.py::test_work * {verdict}",
                                     "PASSED: no regression beyond the threshold*"])
        assert "opbench gate failed" not in result.stdout.str()


def test_a_2x_slowdown_with_3_samples_per_side_fails(bench: pytest.Pytester) -> None:
    # A 50 ms op under min_run_time=0.2 gets ~4 samples; the old gate called that
    # "too few times / inconclusive" and passed a 2x slowdown with exit 0.
    _save_baseline(bench, 1e-6, "--opbench-min-samples", "3", "--opbench-min-time", "1e-9")
    result = run(bench, "--opbench-compare", "base.json", "--opbench-fail-above", "5%",
                 "--opbench-min-samples", "3", "--opbench-min-time", "1e-9",
                 costs={"work": 2e-6})
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # It looked slower, so it was measured twice more and pooled: 9 samples form an interval.
    result.stdout.fnmatch_lines(["test_bench.py::test_work * REGRESSION",
                                 "*test_bench.py::test_work: 3 measurements pooled"])


def test_compare_without_fail_above_only_reports(bench: pytest.Pytester) -> None:
    _save_baseline(bench, 1e-6)
    result = run(bench, "--opbench-compare", "base.json", costs={"work": 2e-6})
    assert result.ret == pytest.ExitCode.OK
    # Words that match the exit status: found, but not failing.
    result.stdout.fnmatch_lines(["*REGRESSION", "NOT FAILING: 1 regression found in 1 "
                                 "benchmark(s), but this gate does not fail (exit status 0*"])
    assert "FAILED" not in result.stdout.str()


def test_a_renamed_inner_function_keeps_its_history(bench: pytest.Pytester) -> None:
    _save_baseline(bench, 1e-6)
    bench.makepyfile(test_bench=BENCH.replace("work", "work_v2").replace("test_work_v2",
                                                                         "test_work"))
    result = run(bench, "--opbench-compare", "base.json", "--opbench-fail-above", "5%",
                 costs={"work_v2": 2e-6})
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # compared, found 2x slower
    assert "Only in" not in result.stdout.str()


def test_an_empty_baseline_fails_the_gate_instead_of_passing(bench: pytest.Pytester) -> None:
    from opbench import save

    save([], bench.path / "empty.json", environment={})
    result = run(bench, "--opbench-compare", "empty.json", "--opbench-fail-above", "5%")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["opbench FAILED: no benchmark is in both sets of results*"])


def test_save_and_compare_on_one_path_compare_with_the_old_file(bench: pytest.Pytester) -> None:
    _save_baseline(bench, 1e-6)
    result = run(bench, "--opbench-compare", "base.json", "--opbench-save", "base.json",
                 "--opbench-fail-above", "5%", costs={"work": 2e-6})
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # not compared with itself
    assert load(bench.path / "base.json")[0].median == pytest.approx(2e-6, rel=0.01)


def test_a_partial_run_keeps_the_rest_of_the_saved_file(bench: pytest.Pytester) -> None:
    bench.makepyfile(test_more="def test_more(opbench):\n    opbench(lambda: None)\n")
    run(bench, "--opbench-save", "out.json").assert_outcomes(passed=2)
    result = run(bench, "-k", "test_work", "--opbench-save", "out.json", costs={"work": 3e-6})
    result.stdout.fnmatch_lines(["opbench: saved 1 result(s) to out.json (1 kept from before)"])
    saved = {m.task_spec.key: m for m in load(bench.path / "out.json")}
    assert set(saved) == {"test_bench.py::test_work", "test_more.py::test_more"}
    assert saved["test_bench.py::test_work"].median == pytest.approx(3e-6, rel=0.01)


def test_missing_benchmarks_are_listed_and_can_fail(bench: pytest.Pytester) -> None:
    bench.makepyfile(test_more="def test_more(opbench):\n    opbench(lambda: None)\n")
    run(bench, "--opbench-save", "base.json").assert_outcomes(passed=2)
    result = run(bench, "-k", "test_work", "--opbench-compare", "base.json",
                 "--opbench-fail-above", "5%", "--opbench-fail-on-missing")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["  test_more.py::test_more: missing from the new results"])


def test_autosave_then_compare_with_the_latest_run(bench: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBENCH_BASELINE_DIR", str(bench.path / "baselines"))
    result = run(bench, "--opbench-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no saved run of this machine" in result.stderr.str()
    run(bench, "--opbench-autosave", costs={"work": 1e-6}).stdout.fnmatch_lines(
        ["opbench: saved this run as *baselines*0001_*.json"])
    result = run(bench, "--opbench-compare", "--opbench-fail-above", "5%", costs={"work": 2e-6})
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*compared with *0001_*.json*"])


@pytest.mark.parametrize("args, message", [
    (["--opbench-fail-above", "5%"], "--opbench-fail-above needs --opbench-compare"),
    (["--opbench-compare", "missing.json"], "--opbench-compare: cannot load missing.json"),
    (["--opbench-compare", "base.json", "--opbench-fail-above", "200%"],
     "--opbench-fail-above must be between 0% and 100%"),
    (["--opbench-save", "no/such/dir/out.json"], "--opbench-save: cannot write"),
    (["--opbench-save", "."], "is a directory"),
    (["--opbench-save", "corrupt.json"], "cannot load corrupt.json"),
    (["--opbench-only", "--opbench-skip"], "exclude each other"),
])
def test_bad_options_are_usage_errors_before_any_test_runs(pytester: pytest.Pytester, args,
                                                           message) -> None:
    from opbench import Measurement, TaskSpec, save

    save([Measurement(1, [1e-3], TaskSpec("f()", "pass"))], pytester.path / "base.json",
         environment={})
    (pytester.path / "corrupt.json").write_text("{not json")
    pytester.makepyfile("def test_plain():\n    open('ran', 'w').close()\n")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
    assert not (pytester.path / "ran").exists()
    assert (pytester.path / "corrupt.json").read_text() == "{not json"  # never overwritten


# -- xdist ---------------------------------------------------------------------------

XDIST_BENCH = """
import pytest

def work():
    pass

@pytest.mark.parametrize("n", range(6))
def test_par(opbench, n):
    opbench(work)
"""


def _intervals(path) -> list[tuple[int, float, float]]:
    rows = [line.split() for line in open(path)]
    return sorted((int(pid), float(a), float(b)) for pid, a, b in rows)


def _overlaps(intervals) -> int:
    by_start = sorted(intervals, key=lambda r: r[1])
    return sum(1 for prev, cur in zip(by_start, by_start[1:])
               if cur[0] != prev[0] and cur[1] < prev[2])


def test_xdist_workers_take_turns_and_raise_no_false_alarm(bench: pytest.Pytester) -> None:
    pytest.importorskip("xdist", reason="needs pytest-xdist (the test extra)")
    bench.makepyfile(test_bench=XDIST_BENCH)
    run(bench, "-n", "2", "--opbench-save", "base.json").assert_outcomes(passed=6)
    log = str(bench.path / "timed.log")
    result = run(bench, "-n", "2", "--opbench-compare", "base.json", "--opbench-fail-above",
                 "5%", log=log)
    result.assert_outcomes(passed=6)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()  # no change, no alarm
    result.stdout.fnmatch_lines(["*take turns to time*", "*PASSED: no regression*"])
    intervals = _intervals(log)
    assert len({pid for pid, _, _ in intervals}) == 2  # both workers timed something
    assert _overlaps(intervals) == 0  # never at the same moment
    assert len(load(bench.path / "base.json")) == 6


def test_plugin_import_is_torch_free() -> None:
    code = ("import sys, opbench.integrations.pytest_plugin\n"
            "assert 'torch' not in sys.modules\n"
            "assert 'opbench.gate' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- instruction mode -------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (CI installs it)")
def test_instruction_mode_gates_a_one_percent_change_exactly(pytester: pytest.Pytester) -> None:
    from opbench import _C

    if not _C.callgrind.available():
        pytest.skip("opbench._C was built without valgrind's headers")
    pytester.makepyfile(test_count="""
        import os

        EXTRA = int(os.environ.get("EXTRA", "0"))

        def work():
            total = 0
            for i in range(200 + EXTRA):
                total += i
            return total

        def test_work(opbench):
            c = opbench(work)
            assert c.median > 0
    """)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXTRA", "0")
        base = run(pytester, "--opbench-mode=instructions", "--opbench-save", "base.json")
        base.assert_outcomes(passed=1)
        same = run(pytester, "--opbench-mode=instructions", "--opbench-compare", "base.json",
                   "--opbench-fail-above", "0.5%")
        mp.setenv("EXTRA", "2")  # 1% more loop iterations
        slower = run(pytester, "--opbench-mode=instructions", "--opbench-compare", "base.json",
                     "--opbench-fail-above", "0.5%")
    (counts,) = load(pytester.path / "base.json").instructions
    # Repeats agree to within 0.05% (pool shifts leave a few instructions of the
    # allocator's bookkeeping), far inside the 0.5% gate.
    assert counts.per_run > 1000 and max(counts.counts) / min(counts.counts) < 1.0005
    assert same.ret == pytest.ExitCode.OK, same.stdout.str()
    same.stdout.fnmatch_lines(["test_count.py::test_work * instr * same"])
    assert slower.ret == pytest.ExitCode.TESTS_FAILED, slower.stdout.str()
    slower.stdout.fnmatch_lines(["test_count.py::test_work * 1.010 *REGRESSION"])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (CI installs it)")
def test_instruction_mode_counts_only_the_statements_own_work(pytester: pytest.Pytester) -> None:
    """torch's intra-op pool at the Timer's thread count (1), its workers asleep: a
    torch statement counts under pytest what collect_callgrind counts, every repeat."""
    from opbench import _C, Timer
    from opbench.core.instructions import InstructionCounts

    if not _C.callgrind.available():
        pytest.skip("opbench._C was built without valgrind's headers")
    pytester.makepyfile(test_torch="""
        import torch

        def test_softmax(opbench):
            torch.ones(256, 256).sum(-1)  # the pool's workers started and left idle
            x = torch.ones(32, 64)
            opbench("torch.softmax(x, -1)", globals={"x": x})

        def test_options_per_benchmark(opbench):
            opbench(lambda: None, instruction_number=7, instruction_repeats=2)
    """)
    result = run(pytester, "--opbench-mode=instructions", "--opbench-save", "counts.json",
                 "--opbench-instruction-repeats", "4")
    result.assert_outcomes(passed=2)
    softmax, options = load(pytester.path / "counts.json").instructions
    assert (softmax.number_per_run, len(softmax.counts)) == (100, 4)  # the session's options
    assert (options.number_per_run, len(options.counts)) == (7, 2)    # the benchmark's
    # Repeats close (with torch's pool at the machine's size and its workers spinning,
    # they were 25-35% apart).
    assert max(softmax.counts) / min(softmax.counts) < 1.002, softmax.counts
    collected = InstructionCounts.from_callgrind(
        Timer("torch.softmax(x, -1)", setup="x = torch.ones(32, 64)")
        .collect_callgrind(number=100, repeats=2))
    assert softmax.per_run == pytest.approx(collected.per_run, rel=0.005), \
        (softmax.per_run, collected.per_run)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (CI installs it)")
def test_instruction_counts_agree_across_fresh_processes() -> None:
    """Five fresh processes, each in another working directory with a larger environment:
    an allocating and a non-allocating Python function and a torch statement (counted by
    the plugin) and a C++ statement (collect_callgrind) agree within 0.1%."""
    import importlib.util
    from pathlib import Path

    from opbench import _C

    if not _C.callgrind.available():
        pytest.skip("opbench._C was built without valgrind's headers")
    path = Path(__file__).parents[1] / "benchmarks" / "cross_process.py"
    spec = importlib.util.spec_from_file_location("cross_process", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = module.measure(5)["opbench"]
    assert len(found) == 4 and all(len(v) == 5 for v in found.values()), found
    for row, values in found.items():
        assert module.spread(values) <= 0.001, (row, values)


def test_fixture_passes_work_through_and_the_gate_gates_on_throughput(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from opbench.core import peaks

    # Peaks saved beforehand: the session reads them, it does not measure.
    monkeypatch.setenv("OPBENCH_BASELINE_DIR", str(pytester.path / "machine"))
    peaks.save({"cpu/1": peaks.Peak(device="cpu", threads=1, bandwidth=1e10,
                                    flop_rates={"float32": 1e11})})
    pytester.makepyfile(test_bench="""
        import os

        N = int(os.environ.get("N", "1000"))

        def test_work(opbench):
            xs = list(range(N))
            m = opbench(lambda: sorted(xs), name="sort", bytes=8 * N, flops=lambda: N,
                        min_run_time=0.02)
            assert (m.bytes, m.flops) == (8 * N, N) and m.info["peaks"]["bandwidth"] == 1e10
            assert m.bound == "memory"
    """)
    run(pytester, "--opbench-save", "base.json").assert_outcomes(passed=1)
    saved = load(pytester.path / "base.json")
    assert (saved[0].task_spec.bytes, saved[0].task_spec.flops) == (8000, 1000)
    # Ten times the work: slower per run, yet judged on bytes per second.
    monkeypatch.setenv("N", "10000")
    result = run(pytester, "--opbench-compare", "base.json", "--opbench-gate-on", "byte_rate")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*GB/s*"])
# -- what a team configures, and the A/B face ------------------------------------------

def test_per_benchmark_threshold_from_the_fixture_or_the_marker(bench: pytest.Pytester) -> None:
    bench.makepyfile(test_bench="""
        import pytest

        def work():
            pass

        def test_work(opbench):
            opbench(work, threshold="50%")

        @pytest.mark.opbench(threshold=0.5)
        def test_marked(opbench):
            opbench(work, name="m")

        def test_default(opbench):
            opbench(work, name="d")
    """)
    run(bench, "--opbench-save", "base.json").assert_outcomes(passed=3)
    saved = {m.task_spec.key: m.info.get("threshold") for m in load(bench.path / "base.json")}
    assert saved == {"test_bench.py::test_work": 0.5, "test_bench.py::test_marked::m": 0.5,
                     "test_bench.py::test_default::d": None}
    # 40% slower: within the benchmarks' own 50%, beyond the session's 5%.
    result = run(bench, "--opbench-compare", "base.json", "--opbench-fail-above", "5%",
                 costs={"work": 1.4e-6})
    result.stdout.fnmatch_lines(["test_bench.py::test_default::d * REGRESSION",
                                 "FAILED: 1 regression in 3 benchmark(s)."])


def test_the_gate_writes_its_report_for_ci(bench: pytest.Pytester) -> None:
    _save_baseline(bench, 1e-6)
    result = run(bench, "--opbench-compare", "base.json", "--opbench-fail-above", "5%",
                 "--opbench-report", "report.md", costs={"work": 2e-6})
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = (bench.path / "report.md").read_text()
    assert text.startswith("### opbench: 1 regression — 1 of 1 benchmark(s) slower")
    result.stdout.fnmatch_lines(["opbench: wrote the gate's report (markdown) to report.md"])
    run(bench, "--opbench-compare", "base.json", "--opbench-report", "report.json",
        "--opbench-format", "json")
    doc = json.loads((bench.path / "report.json").read_text())
    assert doc["exit_status"] == 0 and doc["enforced"] is False and doc["failures"] == []


def test_redact_leaves_host_names_and_paths_out_of_the_report(bench: pytest.Pytester) -> None:
    import socket

    _save_baseline(bench, 1e-6)
    doc = json.loads((bench.path / "base.json").read_text())
    doc["environment"]["hostname"] = "build-host-7"  # the baseline's machine, a CI runner
    (bench.path / "base.json").write_text(json.dumps(doc))
    run(bench, "--opbench-compare", "base.json", "--opbench-report", "plain.md",
        costs={"work": 2e-6})
    text = (bench.path / "plain.md").read_text()
    assert "host build-host-7" in text
    run(bench, "--opbench-compare", "base.json", "--opbench-report", "public.md",
        "--opbench-redact", costs={"work": 2e-6})
    text = (bench.path / "public.md").read_text()
    assert "build-host-7" not in text and f"host {socket.gethostname()}" not in text
    assert text.startswith("### opbench: 1 regression")


def test_opbench_base_runs_the_suite_on_both_revisions(bench: pytest.Pytester) -> None:
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       cwd=bench.path, check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "base")
    # The working tree renames the statement; its cost (by name) is twice the base's.
    bench.makepyfile(test_bench=BENCH.replace("work()", "slow_work()").replace(
        "opbench(work)", "opbench(slow_work)"))
    result = run(bench, "--opbench-base", "HEAD", "--opbench-rounds", "3",
                 "--opbench-report", "ab.md", costs={"slow_work": 2e-6})
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["opbench ab: base HEAD (*) vs head working tree (*), time mode",
                                 "test_bench.py::test_work * REGRESSION",
                                 "FAILED: 1 regression in 1 benchmark(s)."])
    assert (bench.path / "ab.md").read_text().startswith("### opbench: 1 regression")
    bad = run(bench, "--opbench-base", "HEAD", "--opbench-compare", "base.json")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
