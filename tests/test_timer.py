"""Timer against torch.utils.benchmark.Timer with the same deterministic mock clock."""
from __future__ import annotations

import functools
import inspect
import pickle
import subprocess
import sys
import textwrap
import time
import traceback

import pytest
import torch
import torch.utils.benchmark as tb

import opbench
from conftest import MockTimer, strip_object_line
from opbench import Timer
from opbench.core.stopping import converge, sample
from opbench.engines import Engine


class OurMockTimer(opbench.Timer):
    _timer_cls = MockTimer


class TorchMockTimer(tb.Timer):
    _timer_cls = MockTimer


CASES = [
    dict(stmt="ns_stmt"),
    dict(stmt="us_stmt", setup="x = 1", label="Batched dot", sub_label="[64, 64]"),
    dict(stmt="ms_stmt", description="bmm", num_threads=2),
    dict(stmt="x = 1\ny = x + 1", setup="import math\nz = 2", label="L", env="env A"),
    dict(stmt="\n    x = 1\n    y = x + 1\n", sub_label="multi-line, indented"),
    dict(stmt="pass", setup="pass", label="nothing", description="d", num_threads=3),
]


def _both(kwargs):
    return OurMockTimer(**kwargs), TorchMockTimer(**kwargs)


def _assert_same(ours, theirs):
    assert ours.number_per_run == theirs.number_per_run
    assert ours.raw_times == theirs.raw_times
    assert ours.task_spec.summarize() == theirs.task_spec.summarize()
    assert strip_object_line(repr(ours)) == strip_object_line(repr(theirs))


@pytest.mark.parametrize("kwargs", CASES)
def test_timeit_matches_torch(kwargs):
    ours, theirs = _both(kwargs)
    for number in (1, 100, 12345):
        _assert_same(ours.timeit(number), theirs.timeit(number))


@pytest.mark.parametrize("kwargs", CASES)
@pytest.mark.parametrize("min_run_time", [0.2, 0.01, 1.0])
def test_blocked_autorange_matches_torch(kwargs, min_run_time):
    ours, theirs = _both(kwargs)
    calls_ours, calls_theirs = [], []
    m_ours = ours.blocked_autorange(
        callback=lambda n, t: calls_ours.append((n, t)), min_run_time=min_run_time
    )
    m_theirs = theirs.blocked_autorange(
        callback=lambda n, t: calls_theirs.append((n, t)), min_run_time=min_run_time
    )
    _assert_same(m_ours, m_theirs)
    assert calls_ours == calls_theirs


@pytest.mark.parametrize("kwargs", CASES)
# 0.02 is under the mock's noise, so it runs to max_run_time: kept short, since
# both libraries re-derive statistics after every block (quadratic).
@pytest.mark.parametrize("threshold, max_run_time", [(0.1, 10.0), (0.5, 10.0), (0.02, 0.3)])
def test_adaptive_autorange_matches_torch(kwargs, threshold, max_run_time):
    ours, theirs = _both(kwargs)
    _assert_same(
        ours.adaptive_autorange(threshold, max_run_time=max_run_time),
        theirs.adaptive_autorange(threshold, max_run_time=max_run_time),
    )


def test_num_threads_applied_and_restored():
    seen = []

    class ThreadProbe(MockTimer):
        def timeit(self, number):
            seen.append(torch.get_num_threads())
            return super().timeit(number)

    class Probed(opbench.Timer):
        _timer_cls = ThreadProbe

    prior = torch.get_num_threads()
    Probed("us_stmt", num_threads=1).blocked_autorange(min_run_time=0.01)
    Probed("us_stmt", num_threads=2).timeit(10)
    assert set(seen[:-2]) == {1} and seen[-2:] == [2, 2]
    assert torch.get_num_threads() == prior


# -- real timing (no mock): behaviour, not speed ---------------------------------


def test_callable_stmt_uses_native_loop_and_counts_calls():
    calls = []
    m = opbench.Timer(lambda: calls.append(1)).timeit(500)
    assert len(calls) == 500 + 5  # warm-up of max(500 // 100, 2) runs, then 500
    assert m.number_per_run == 500 and m.stmt == "<lambda>()"


def test_string_stmt_sees_setup_and_globals():
    ns = {"n": 10}
    m = opbench.Timer("y = sum(range(n)) + k", setup="k = 1", globals=ns).timeit(100)
    assert m.median > 0 and "__builtins__" not in ns


def test_callable_setup_runs_before_each_block():
    runs = []
    opbench.Timer("pass", setup=lambda: runs.append(1)).timeit(10)
    assert len(runs) == 2  # warm-up block and measured block, as timeit does


def test_stmt_may_use_torch_without_importing_it():
    m = opbench.Timer("torch.ones(2) + 1").timeit(10)
    assert m.median > 0


def test_repeat_and_autorange_work():
    m = opbench.Timer(lambda: None).repeat(repeat=4, number=1000)
    assert len(m.raw_times) == 4 and m.number_per_run == 1000
    steps = []
    auto = opbench.Timer("sum(range(50))").autorange(callback=lambda n, t: steps.append(n))
    assert auto.raw_times[0] >= 0.2 and steps[-1] == auto.number_per_run
    assert steps[:3] == [1, 2, 5]


class _Probe:
    """calibrate_overhead's probe engine: records what it runs, returns set times."""

    made: list[_Probe] = []

    def __init__(self, stmt, setup, timer, globals):
        self.stmt, self.numbers = stmt, []
        self._times = iter([1.0, 5e-3, 3e-3, 4e-3, 6e-3, 7e-3])  # the warm-up, then five runs
        _Probe.made.append(self)

    def timeit(self, number):
        self.numbers.append(number)
        return next(self._times)


def test_calibrate_overhead_is_the_least_of_five_runs_recorded_not_subtracted(monkeypatch):
    # On the real clock an estimate's size depends on the machine's load; the probe's
    # times are set here, so the test asserts the arithmetic and where the figure goes.
    monkeypatch.setattr(opbench.timer, "PythonEngine", _Probe)
    monkeypatch.setattr(_Probe, "made", [])
    t = OurMockTimer("us_stmt")
    assert t.calibrate_overhead(number=20000) == 3e-3 / 20000
    probe = _Probe.made[0]
    assert probe.stmt == "pass" and probe.numbers == [200] + [20000] * 5
    m = t.timeit(1000)
    assert m.overhead == 3e-3 / 20000
    assert m.raw_times == OurMockTimer("us_stmt").timeit(1000).raw_times  # not subtracted
    # A Python callable's harness calls a Python no-op; a C callable's calls a C one.
    opbench.Timer(lambda: None).calibrate_overhead(number=20000)
    opbench.Timer(time.perf_counter).calibrate_overhead(number=20000)  # a C callable
    assert inspect.isfunction(_Probe.made[1].stmt) and inspect.isbuiltin(_Probe.made[2].stmt)


@pytest.mark.parametrize("stmt", ["pass", lambda: None, time.perf_counter])
def test_calibrate_overhead_on_the_real_clock_is_positive(stmt):
    assert opbench.Timer(stmt).calibrate_overhead(number=2000) > 0


# -- errors ----------------------------------------------------------------------


def test_syntax_error_in_stmt_raises_at_construction():
    with pytest.raises(SyntaxError) as info:
        opbench.Timer("x = = 1")
    assert info.value.filename == "<stmt>" and "x = = 1" in info.value.text
    with pytest.raises(SyntaxError) as info:
        opbench.Timer("pass", setup="def (")
    assert info.value.filename == "<setup>"


def test_exception_in_timed_code_keeps_its_traceback():
    def boom():
        raise KeyError("from the statement")

    with pytest.raises(KeyError, match="from the statement") as info:
        opbench.Timer(boom).timeit(10)
    assert info.traceback[-1].name == "boom"

    with pytest.raises(ZeroDivisionError) as info:
        opbench.Timer("x = 1\ny = 1 / 0").timeit(10)
    text = "".join(traceback.format_exception(info.value))
    assert "y = 1 / 0" in text  # the statement's own line is shown


@pytest.mark.parametrize("number", [0, -1, 1.5, True])
def test_bad_number_is_value_error(number):
    with pytest.raises(ValueError, match="number must be a positive int"):
        opbench.Timer("pass").timeit(number)


def test_bad_arguments():
    with pytest.raises(TypeError, match="stmt must be a string of code or a zero-argument"):
        opbench.Timer(42)
    with pytest.raises(ValueError, match="min_run_time must be a positive finite number"):
        opbench.Timer("pass").blocked_autorange(min_run_time=0)
    with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\)"):
        opbench.Timer("pass").adaptive_autorange(threshold=1.5)
    with pytest.raises(ValueError, match="global_setup is C\\+\\+ only"):
        opbench.Timer("pass", global_setup="#include <x>")
    with pytest.raises(ValueError, match="Invalid language"):
        opbench.Timer("pass", language="rust")
    with pytest.raises(ValueError, match="num_threads"):
        opbench.Timer("pass", num_threads=0)


def test_globals_are_copied_not_mutated():
    ns = {"a": 1}
    opbench.Timer("b = a", globals=ns).timeit(5)
    assert ns == {"a": 1}


def _run_without_torch(code: str) -> subprocess.CompletedProcess:
    # A meta-path entry that refuses torch: the same as torch not being installed.
    prelude = textwrap.dedent(
        """
        import sys
        class _NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError("No module named 'torch'")
        sys.meta_path.insert(0, _NoTorch())
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=120,
    )


def test_import_does_not_import_torch():
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, opbench; print('torch' in sys.modules)"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_works_without_torch_installed():
    proc = _run_without_torch(
        """
        import opbench
        m = opbench.Timer("x * 2", setup="x = 3").blocked_autorange(min_run_time=0.01)
        m2 = opbench.Timer(lambda: None, label="L", description="d").timeit(100)
        print(opbench.Compare([m, m2]))
        try:
            opbench.Timer("torch.ones(1)")
        except ImportError as e:
            print("ERR", e)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "Times are in" in proc.stdout
    assert "ERR the statement uses `torch`, which is not installed" in proc.stdout


def test_record_first_call_times_the_cold_call_once():
    calls = []

    def f():
        calls.append(None)
        if len(calls) == 1:
            sum(range(200000))  # the cold call is the slow one

    t = opbench.Timer(f, record_first_call=True)
    m = t.timeit(100)
    first = m.info["first_call_s"]
    assert first > m.median
    assert len(calls) == 1 + 2 + 100  # first call, warm-up, measured
    assert t.timeit(10).info["first_call_s"] == first  # measured once per Timer
    assert "first_call_s" not in opbench.Timer(f).timeit(10).info


def test_profile_and_converge_delegate():
    report = opbench.Timer(lambda: sorted(range(50))).profile(number=200, top=5)
    assert any("sorted" in row.function for row in report.rows)
    m = OurMockTimer("us_stmt").converge(0.05, max_run_time=2.0)
    assert m.converged is True and m.info["stop_reason"]


# -- opbench beyond torch: identity, the sampling protocol, pickling, the clock ------

def test_benchmark_keys_follow_the_documented_rule():
    def sort_v1():
        pass

    assert Timer("sorted(xs)", setup="xs = []").task_spec.key == "sorted(xs)"
    assert Timer("sorted(xs)", label="sort", description="v1").task_spec.key == "sort | v1"
    assert Timer("x", label="L", num_threads=4, env="A").task_spec.key == "L | 4 threads | env=A"
    assert Timer(sort_v1).task_spec.key == f"{__name__}.test_benchmark_keys_follow_the_" \
                                            "documented_rule.<locals>.sort_v1"
    assert Timer(sort_v1, label="sort").task_spec.key == "sort"  # labels before the callable
    assert Timer(sort_v1, name="sort", label="x").task_spec.key == "sort"  # name first
    assert Timer(functools.partial(sort_v1)).task_spec.stmt == "partial(sort_v1)()"
    assert "0x" not in Timer(functools.partial(print, object())).task_spec.key
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        Timer("pass", name=" ")


def test_timers_pickle_through_their_arguments():
    t = Timer("x + y", setup="y = 2", globals={"x": 1}, label="L", num_threads=2, name="add")
    clone = pickle.loads(pickle.dumps(t))
    assert clone.kwargs == t.kwargs and clone.task_spec == t.task_spec
    assert clone.timeit(10).number_per_run == 10
    assert Timer(**t.kwargs).task_spec == t.task_spec


def test_the_sampling_protocol_is_what_custom_stopping_rules_need():
    t = Timer("sum(range(10))")
    number = t.block_size(0.01)
    times = [t.run(number) for _ in range(3)]
    m = t.measurement(number, times)
    assert (m.number_per_run, m.raw_times, m.task_spec) == (number, times, t.task_spec)
    with pytest.raises(ValueError, match="number must be a positive int"):
        t.run(0)


def test_opbench_timer_is_the_module_and_still_reads_the_clock():
    import importlib

    import opbench.timer as module

    assert importlib.import_module("opbench.timer") is module and module.Timer is Timer
    assert isinstance(module(), float)  # torch code calls benchmark.timer()
    assert module.default_timer() <= module()
    # `timer=benchmark.timer`, as torch code writes it, is the default clock
    assert Timer("pass", timer=module).kwargs["timer"] is module
    assert Timer("pass", timer=module).timeit(10).median > 0


class _PerCallEngine(Engine):
    """Keeps every call as its own sample, as the CUDA per-iteration and C++
    layouts engines do; each call's sample is the size of the block it ran in, so
    the search's blocks (1, 10, ...) show in the result if they leak into it."""

    def __init__(self, **kwargs):
        self.kept: list[float] = []

    def timeit(self, number):
        self.kept += [float(number)] * number
        return number * 1e-6

    def discard_samples(self):
        self.kept = []

    def samples(self, number, times):
        return 1, list(self.kept)


@pytest.mark.parametrize("rule", [
    lambda t: sample(t, min_run_time=0.05, min_samples=2),
    lambda t: converge(t, min_run_time=0.05, max_run_time=0.2),
    lambda t: t.blocked_autorange(min_run_time=0.05),
])
def test_block_size_search_calls_are_never_samples(rule):
    class T(Timer):
        _timer_cls = _PerCallEngine

    m = rule(T("f()", globals={"f": len}))
    assert set(m.raw_times) == {float(m.info["block_size"])}, sorted(set(m.raw_times))


def test_block_size_for_sizes_blocks_by_time_and_keeps_its_warm_up_out():
    class T(Timer):
        _timer_cls = _PerCallEngine

    t = T("f()", globals={"f": len})
    number = t.block_size_for(0.002)  # calls of 1 us: 2000 to a block of 2 ms
    assert number == 2000
    m = t.measurement(number, [t.run(number)])
    assert set(m.raw_times) == {2000.0}  # the three sizing calls and the warm-up block: gone
    with pytest.raises(ValueError, match="seconds"):
        t.block_size_for(0)
