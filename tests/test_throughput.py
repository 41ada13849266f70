"""Throughput (opbench.core.throughput): a Measurement's work, rates, intensity, bound and
efficiency; the Timer's flops=/bytes= (numbers, callables, "count") carried through
TaskSpec, results files, run_all and the gate."""
from __future__ import annotations

import math
import pickle

import pytest
import torch
import torch.utils.benchmark as tb

import opbench
from conftest import MockTimer
from opbench import Measurement, TaskSpec, UsageError, gate
from opbench.store.results import dumps, loads

PEAKS = {"device": "cpu", "threads": 1, "bandwidth": 1e10, "flop_rate": 1e11, "dtype": "float32"}


def _m(median=1e-3, peaks=PEAKS, info=None, **work):
    return Measurement(1, [median] * 3, TaskSpec("f()", "pass", **work),
                       info={"peaks": peaks, **(info or {})} if peaks else dict(info or {}))


def test_units_are_per_run_at_the_median_in_si():
    m = _m(2e-3, flops=4e9, bytes=1e7)
    assert m.flop_rate == pytest.approx(2e12)  # FLOP/s
    assert m.byte_rate == pytest.approx(5e9)   # bytes/s
    assert m.arithmetic_intensity == 400.0


def test_bound_is_the_side_of_the_measured_ridge_point():
    assert _m(bytes=1e6, flops=1e6).bound == "memory"      # 1 FLOP/B < ridge 10
    assert _m(bytes=1e6, flops=1e8).bound == "compute"     # 100 FLOP/B
    assert _m(bytes=1e6, flops=0).bound == "memory"        # a copy
    assert _m(bytes=0, flops=1e6).arithmetic_intensity == math.inf


def test_efficiency_is_the_share_of_the_relevant_peak():
    assert _m(1e-3, bytes=5e6, flops=0).efficiency == pytest.approx(0.5)    # 5 of 10 GB/s
    assert _m(1e-3, bytes=1e6, flops=5e7).efficiency == pytest.approx(0.5)  # 50 of 100 GFLOP/s
    assert _m(1e-3, bytes=5e6).efficiency == pytest.approx(0.5)  # bytes alone: bandwidth


def test_unknown_work_or_peaks_give_none_never_a_guess():
    m = _m(peaks=None, bytes=1e6, flops=1e6)
    assert m.bound is None and m.efficiency is None and m.byte_rate == pytest.approx(1e9)
    bare = _m()
    assert (bare.flops, bare.bytes, bare.flop_rate, bare.byte_rate, bare.arithmetic_intensity,
            bare.bound, bare.efficiency) == (None,) * 7
    assert _m(flops=1e6).bound is None  # FLOPs without bytes: no intensity


def test_declared_work_wins_over_counted():
    m = _m(flops=10, info={"work": {"flops": 99, "bytes": 40, "counted": True}})
    assert (m.flops, m.bytes) == (10, 40)


def test_taskspec_text_and_equality_stay_torchs():
    spec = {"stmt": "x + 1", "setup": "x = 1", "label": "L", "description": "d"}
    ours, theirs = TaskSpec(**spec), tb.TaskSpec(**spec)
    assert ours.summarize() == theirs.summarize() and ours == TaskSpec(**spec)
    assert TaskSpec(**spec, flops=1) != ours and TaskSpec(**spec, flops=1).key == ours.key
    assert ours.to_dict() == {f: getattr(theirs, f) for f in (
        "stmt", "setup", "global_setup", "label", "sub_label", "description", "env",
        "num_threads")} | {"name": None}


def test_timer_declares_numbers_without_peaks_measured_twice(fake_peaks):
    t = opbench.Timer("x + 1", setup="x = 1", flops=1, bytes=24)
    assert (t.task_spec.flops, t.task_spec.bytes) == (1, 24)
    m = t.timeit(1000)
    assert (m.flops, m.bytes) == (1, 24) and m.byte_rate == pytest.approx(24 / m.median)
    assert m.info["peaks"]["bandwidth"] == 1e10 and m.bound == "memory"
    t.timeit(100)
    assert fake_peaks == [("cpu", 1, ("float32",))]


def test_timer_without_work_measures_no_peaks(fake_peaks):
    m = opbench.Timer("x + 1", setup="x = 1").timeit(100)
    assert "peaks" not in m.info and "work" not in m.info and m.flops is None
    assert fake_peaks == []


def test_timer_resolves_callables_with_globals_and_setup_names(fake_peaks):
    a = torch.ones(8, 4)
    m = opbench.Timer("a @ b", setup="b = torch.ones(4, 2)", globals={"a": a},
                      flops=lambda a, b: 2 * a.shape[0] * a.shape[1] * b.shape[1],
                      bytes=lambda a, b: (a.numel() + b.numel() + 16) * 4).timeit(10)
    assert (m.flops, m.bytes) == (2 * 8 * 4 * 2, (32 + 8 + 16) * 4)
    with pytest.raises(UsageError, match="'c' names no input"):
        opbench.Timer("pass", flops=lambda c: 1).timeit(10)


def test_timer_counts_torch_statements(fake_peaks):
    x, y = torch.ones(1000), torch.empty(1000)
    m = opbench.Timer("y.copy_(x)", globals={"x": x, "y": y}, flops="count",
                      bytes="count").timeit(10)
    assert (m.flops, m.bytes) == (0, 8000) and m.info["work"]["counted"] is True
    assert "FlopCounterMode" in m.info["work"]["method"] and m.bound == "memory"
    assert m.task_spec.flops is None  # counted work lives in info, not the TaskSpec
    m = opbench.Timer(lambda: x.add(x), flops="count", bytes="count").timeit(10)
    assert (m.flops, m.bytes) == (1000, 8000)


def test_a_statement_that_cannot_be_counted_says_why(fake_peaks):
    m = opbench.Timer("sum(range(10))", flops="count", bytes="count").timeit(10)
    assert m.flops is None and m.bytes is None and "no ATen op" in m.info["work"]["reason"]
    assert "peaks" not in m.info


def test_counting_runs_the_real_statement_even_with_a_mock_clock(fake_peaks):
    class Mock(opbench.Timer):
        _timer_cls = MockTimer

    x = torch.ones(10)
    m = Mock("x * 2", globals={"x": x}, bytes="count").blocked_autorange()
    assert m.bytes == 80 and m.task_spec.key == "x * 2"


def test_bad_declarations_fail_when_the_timer_is_built():
    with pytest.raises(UsageError, match="flops must be a number >= 0"):
        opbench.Timer("pass", flops=-1)
    with pytest.raises(UsageError, match="bytes must be"):
        opbench.Timer("pass", bytes="all of them")


def test_work_survives_save_and_load_and_old_files_still_load(fake_peaks):
    x = torch.ones(100)
    m = opbench.Timer("x + x", globals={"x": x}, flops=100, bytes="count").timeit(10)
    back = loads(dumps([m]))[0]
    assert (back.flops, back.bytes, back.bound) == (100, 800, m.bound)  # x read once
    old = dumps([_m(peaks=None)])
    assert '"flops"' not in old  # no declared work: the file is as before
    assert loads(old)[0].flops is None
    with pytest.raises(opbench.ResultsFileError, match="flops: expected a finite number"):
        loads(dumps([_m(flops=1)]).replace('"flops": 1', '"flops": -1'))


def test_timer_with_work_pickles_for_workers(fake_peaks):
    t = opbench.Timer("x + 1", setup="x = 1", flops=1, bytes=16)
    again = pickle.loads(pickle.dumps(t))
    assert (again.task_spec.flops, again.task_spec.bytes) == (1, 16)
    [m] = opbench.run_all([t], "timeit", number=100, progress=False)
    assert (m.flops, m.bytes) == (1, 16)


def test_the_gate_can_gate_on_throughput():
    times = [1e-3 * (1 + i / 100) for i in range(40)]  # enough for the 10th percentile's CI
    old = [Measurement(1, times, TaskSpec("f()", "pass", bytes=1e6))]
    # Twice the time for twice the bytes: slower in time, the same in throughput.
    new = [Measurement(1, [2 * t for t in times], TaskSpec("f()", "pass", bytes=2e6))]
    assert gate.compare(old, new).rows[0].status == "regression"
    report = gate.compare(old, new, metric="byte_rate")
    assert report.rows[0].status == "same" and report.rows[0].kind == "byte_rate"
    assert "0.9625 GB/s" in report.text() and "time per unit of work" in report.text()
    # Without the work on one side, the benchmark is listed, not silently passed.
    bare = [Measurement(1, times, TaskSpec("f()", "pass"))]
    assert gate.compare(old, bare, metric="byte_rate").mismatched == ("f()",)
    with pytest.raises(ValueError, match="metric must be one of"):
        gate.compare(old, new, metric="speed")


def test_merged_replicates_keep_their_work_and_peaks(fake_peaks):
    t = opbench.Timer("x * 2", globals={"x": torch.ones(10)}, bytes="count", flops=10)
    [merged] = Measurement.merge([t.timeit(10), t.timeit(10)])
    assert (merged.flops, merged.bytes) == (10, 80) and merged.peaks["bandwidth"] == 1e10


def test_describe_says_the_work_or_why_it_is_unknown(fake_peaks):
    m = opbench.Timer("x * 2", globals={"x": torch.ones(10)}, bytes="count").timeit(10)
    assert "  Work: 80 bytes (counted): " in m.describe()
    m = opbench.Timer("x = 1", bytes="count").timeit(10)
    assert "  Work: not counted (the statement ran no ATen op" in m.describe()
    assert "Work" not in opbench.Timer("x = 1").timeit(10).describe()


def test_a_callable_statement_with_a_string_setup_gives_its_names_too(fake_peaks):
    m = opbench.Timer(lambda: None, setup="n = 12", flops=lambda n: 2 * n).timeit(10)
    assert m.flops == 24
