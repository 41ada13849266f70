"""Disturbance: verdicts from recorded signals, and where users see them.

The verdicts are driven by recorded signals (no timing thresholds); the native
probes are checked against conditions that make their answer certain (a spinning
competitor on the one CPU both may use)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings

import pytest

import opbench
from opbench import _C, environment
from opbench.analysis.table import BUSY_MARK
from opbench.core import disturbance
from opbench.core.disturbance import judge
from opbench.core.measurement import Measurement, TaskSpec
from opbench.errors import DisturbanceWarning

# Signals as the probe records them, from runs on this project's 2-vCPU machine.
QUIET = {"waits": [0.0] * 20, "slowdowns": [1.0] * 20, "threads": 1, "cpus": 2, "others": 0.02,
         "steal": 0.0}
# Two threads, two spinning competitors: every block waits at OpenMP's barrier.
BARRIER = {"waits": [1.01] * 13, "slowdowns": [1.02] * 13, "threads": 2, "cpus": 2,
           "others": 1.98, "steal": 0.0}
# One thread, preempted now and then: 3 of 20 blocks waited, the median did not move.
PREEMPTED = {"waits": [0.0] * 17 + [0.6] * 3, "slowdowns": [1.0] * 20, "threads": 1, "cpus": 2,
             "others": 1.9, "steal": 0.0}
# The hyperthread sibling busy all along: no wait, the core 1.8x slower.
SIBLING = {"waits": [0.0] * 10, "slowdowns": [1.8] * 10, "threads": 1, "cpus": 2, "others": 1.0,
           "steal": 0.0}


def _measurement(times, signals=None, **spec):
    info = {} if signals is None else {"disturbance": signals}
    return Measurement(1, list(times), TaskSpec("f()", "pass", **spec), info=info)


def test_a_quiet_run_is_not_disturbed():
    d = judge([1e-3] * 20, QUIET)
    assert not d.disturbed and d.disturbed_blocks == 0 and d.shift is None


def test_an_oversubscribed_parallel_region_is_disturbed_and_says_why():
    d = judge([15.9e-3] * 13, BARRIER)
    assert d.disturbed and d.waiting_blocks == 13 and d.shift is None
    assert d.cpus_free == pytest.approx(0.02)
    assert d.reason() == ("13 of 13 blocks waited for a CPU (threads waited 101% of the time); "
                          "2 threads asked, 0.0 CPUs free")
    assert "no block ran undisturbed" in d.warning()


def test_a_few_preempted_blocks_that_leave_the_median_are_not_a_disturbance():
    times = [1.00e-3 + i * 1e-6 for i in range(17)] + [2.5e-3] * 3
    d = judge(times, PREEMPTED)
    assert d.waiting_blocks == 3 and d.shift is not None and d.shift < disturbance.SHIFT_LIMIT
    assert not d.disturbed


def test_waiting_blocks_that_move_the_median_are_a_disturbance():
    signals = {**PREEMPTED, "waits": [0.0] * 8 + [0.5] * 12}
    d = judge([1e-3] * 8 + [1.6e-3] * 12, signals)
    assert d.disturbed and d.shift == pytest.approx(0.6)
    assert "the median is 60% above that of the undisturbed blocks" in d.warning()


def test_a_shared_core_is_a_disturbance_without_any_wait():
    d = judge([1.8e-3] * 10, SIBLING)
    assert d.disturbed and d.waiting_blocks == 0 and d.slow_blocks == 10
    assert d.slowdown == pytest.approx(1.8)
    assert "10 of 10 blocks ran on a core 1.8x slower than its best" in d.reason()


def test_slow_blocks_among_full_speed_ones_are_judged_by_the_median():
    signals = {**SIBLING, "slowdowns": [1.0] * 8 + [1.8] * 2}
    assert not judge([1e-3] * 8 + [1.8e-3] * 2, signals).disturbed


def test_records_without_slowdowns_are_judged_by_their_waits():
    old = {k: v for k, v in BARRIER.items() if k != "slowdowns"}
    assert judge([15.9e-3] * 13, old).disturbed


def test_signals_that_do_not_fit_the_times_are_refused():
    with pytest.raises(ValueError, match="3 block waits and 3 slowdowns for 2 blocks"):
        judge([1e-3, 1e-3], {"waits": [0, 0, 0], "slowdowns": [1, 1, 1]})


def test_steal_is_named_when_large():
    d = judge([15.9e-3] * 13, {**BARRIER, "steal": 0.12})
    assert "the hypervisor stole 12% of CPU time" in d.reason()


def test_merge_pools_the_blocks_in_order_and_needs_every_replicate():
    merged = disturbance.merge([QUIET, BARRIER])
    assert merged["waits"] == QUIET["waits"] + BARRIER["waits"]
    assert merged["slowdowns"] == QUIET["slowdowns"] + BARRIER["slowdowns"]
    assert merged["others"] == 1.98
    assert disturbance.merge([QUIET, None]) is None


def test_merged_replicates_of_two_processes_are_against_the_faster_full_speed():
    # The second process's full speed was 1.5x slower (its core shared all along): its
    # blocks, 1.0 against its own best, are 1.5 against the first's.
    merged = disturbance.merge([{**QUIET, "speed_ns": 1000}, {**QUIET, "speed_ns": 1500}])
    assert merged["slowdowns"] == [1.0] * 20 + [1.5] * 20 and merged["speed_ns"] == 1000
    # Without both full speeds, the slowdowns stay as each process recorded them.
    assert disturbance.merge([{**QUIET, "speed_ns": 1000}, QUIET])["slowdowns"] == [1.0] * 40


def test_a_figure_is_as_slow_as_the_blocks_it_is_taken_from():
    # The fastest 4 blocks ran at full speed, the other 36 on a shared core.
    times = [1.0] * 4 + [1.8] * 36
    m = _measurement(times, {**QUIET, "waits": [0.0] * 40, "slowdowns": [1.0] * 4 + [1.7] * 36,
                             "speed_ns": 900})
    assert disturbance.figure_slowdown(m, 1.0) == 1.0
    assert disturbance.figure_slowdown(m, 1.8) == 1.7
    assert disturbance.full_speed_ns(m) == 900.0
    assert disturbance.full_speed_ns(_measurement(times, {**QUIET})) is None
    assert disturbance.figure_slowdown(_measurement(times), 1.0) is None


# -- the Measurement ---------------------------------------------------------------------

def test_a_disturbed_measurement_warns_in_its_text_and_has_warnings():
    m = _measurement([15.9e-3] * 13, BARRIER)
    assert m.disturbed and m.has_warnings and not m.high_variance
    text = repr(m)
    assert "WARNING: the machine was busy: 13 of 13 blocks waited for a CPU" in text
    assert "\n\n" not in text  # no blank line where torch's (absent) warnings would go


def test_signals_that_find_nothing_leave_torchs_text():
    clean = _measurement([1e-3] * 20, QUIET)
    bare = _measurement([1e-3] * 20)
    assert not clean.has_warnings and clean.disturbance is not None
    assert repr(clean).split("\n", 1)[1] == repr(bare).split("\n", 1)[1]
    assert bare.disturbance is None and not bare.disturbed


def test_merged_replicates_are_judged_on_their_pooled_blocks():
    a = _measurement([1e-3] * 20, QUIET)
    b = _measurement([15.9e-3] * 13, BARRIER)
    [merged] = Measurement.merge([a, b])
    assert merged.disturbance.blocks == 33 and merged.disturbance.waiting_blocks == 13


def test_signals_survive_save_and_load(tmp_path):
    m = _measurement([15.9e-3] * 13, BARRIER)
    opbench.save([m], tmp_path / "r.json")
    [loaded] = opbench.load(tmp_path / "r.json")
    assert loaded.info["disturbance"] == BARRIER and loaded.disturbed


# -- Compare and its exports -------------------------------------------------------------

def _table(disturbed):
    second = BARRIER if disturbed else {**BARRIER, "waits": [0.0] * 13, "slowdowns": [1.0] * 13}
    cells = [_measurement([1e-3] * 20, QUIET, label="L", sub_label="[1]", description="a"),
             _measurement([15.9e-3] * 13, second, label="L", sub_label="[1]", description="b",
                          num_threads=2)]
    return opbench.Compare(cells)


def test_compare_marks_disturbed_cells_and_says_how_many_and_why():
    text = str(_table(disturbed=True))
    assert f"15.9{BUSY_MARK}" in text
    assert ("(busy) 1 of 2 cells were measured while the machine was busy (13 of 13 of their "
            "blocks waited for a CPU; 2 threads asked, 0.0 CPUs free): their figures are too "
            "high.") in text


def test_compare_of_undisturbed_signals_is_the_plain_table():
    plain = opbench.Compare([_measurement(m.raw_times, None, **{
        k: getattr(m.task_spec, k) for k in ("label", "sub_label", "description", "num_threads")})
        for m in _table(disturbed=False).results])
    assert str(_table(disturbed=False)) == str(plain)
    assert "(busy)" not in str(plain)


def test_exports_carry_the_mark_and_the_footnote():
    compare = _table(disturbed=True)
    markdown = compare.to_markdown()
    assert "| 2 | [1] |  | 15.9 (busy) |" in markdown
    assert "\n(busy) 1 of 2 cells were measured" in markdown
    assert "<br>(busy) 1 of 2 cells were measured" in compare.to_html()


# -- the probes ---------------------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's")
def test_the_scheduler_probe_sees_a_competitor_on_the_same_cpu():
    if not _C.SchedProbe().available:
        pytest.skip("this kernel has no per-thread schedstat (CONFIG_SCHED_INFO)")
    cpu = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                               preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    try:
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.1)  # the spinner is running
        probe = _C.SchedProbe()
        probe.begin()
        deadline = time.thread_time() + 0.05
        while time.thread_time() < deadline:  # 50 ms of CPU, shared with the spinner
            pass
        ran, waited, own_waited, slices, threads = probe.end()
        assert slices >= 1
    finally:
        os.sched_setaffinity(0, before)
        spinner.kill()
        spinner.wait()
    # Two runnable tasks on one CPU: this thread cannot have run 50 ms without waiting.
    assert ran >= 50_000_000 and waited > 0 and own_waited > 0 and threads >= 1


def test_the_speed_probe_times_its_work():
    assert 0 < _C.cpu_speed_probe_ns(2, 1000) < 1_000_000_000


@pytest.fixture
def probing(monkeypatch):
    monkeypatch.setenv(disturbance.ENV_VAR, "on")


@pytest.mark.skipif(not _C.SchedProbe().available, reason="no per-thread schedstat here")
def test_a_timer_records_one_wait_and_slowdown_per_block(probing):
    m = opbench.Timer("sum(range(100))").blocked_autorange(min_run_time=0.02)
    signals = m.info["disturbance"]
    assert len(signals["waits"]) == len(signals["slowdowns"]) == len(m.raw_times)
    assert all(w >= 0 for w in signals["waits"]) and all(v > 0 for v in signals["slowdowns"])
    assert signals["threads"] == 1 and signals["cpus"] == environment.allowed_cpus()
    assert isinstance(signals["speed_ns"], int) and signals["speed_ns"] > 0
    assert isinstance(m.disturbance, disturbance.Disturbance)


def test_switched_off_a_timer_records_nothing(monkeypatch):
    monkeypatch.setenv(disturbance.ENV_VAR, "off")
    m = opbench.Timer("sum(range(100))").blocked_autorange(min_run_time=0.01)
    assert "disturbance" not in m.info and m.disturbance is None


def test_a_mock_clock_records_nothing(probing):
    from conftest import MockTimer

    class Mocked(opbench.Timer):
        _timer_cls = MockTimer

    assert "disturbance" not in Mocked("us_stmt").blocked_autorange().info
    fake = iter(range(10**6))
    custom = opbench.Timer("pass", timer=lambda: float(next(fake))).timeit(10)
    assert "disturbance" not in custom.info


def test_oversubscription_is_said_before_timing(monkeypatch):
    snaps = iter([environment.CpuSnapshot(0.0, 0.0, 0.0, 0.0, 0.0),
                  environment.CpuSnapshot(2.0, 3.6, 0.0, 4.0, 0.0)])
    monkeypatch.setattr(environment, "cpu_snapshot", lambda: next(snaps))
    monkeypatch.setattr(environment, "allowed_cpus", lambda: 2)
    monkeypatch.setattr(disturbance, "_history", disturbance.collections.deque(maxlen=4))
    monkeypatch.setattr("opbench.errors._shown", set())
    disturbance._snapshot()
    with pytest.warns(DisturbanceWarning, match=r"2 threads asked, but other processes keep "
                                                r"1\.8 of 2 CPUs busy \(0\.2 free\)"):
        disturbance.check_threads(2)


def test_a_free_machine_says_nothing_before_timing(monkeypatch):
    snaps = iter([environment.CpuSnapshot(0.0, 0.0, 0.0, 0.0, 0.0),
                  environment.CpuSnapshot(2.0, 0.1, 0.0, 4.0, 0.0)])
    monkeypatch.setattr(environment, "cpu_snapshot", lambda: next(snaps))
    monkeypatch.setattr(disturbance, "_history", disturbance.collections.deque(maxlen=4))
    disturbance._snapshot()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DisturbanceWarning)
        disturbance.check_threads(2)


# -- the gate and ab ---------------------------------------------------------------------

def _run(times, signals, name="bench"):
    return Measurement(1, list(times), TaskSpec("f()", "pass", name=name),
                       info={"disturbance": signals})


def test_the_gate_decides_a_disturbed_run_on_its_undisturbed_blocks_and_says_so():
    from opbench import gate

    base = [_run([1e-3 * (1 + i / 1000) for i in range(20)], QUIET)]
    # Half the new run's blocks waited and read 3x: its undisturbed half is unchanged code.
    signals = {**QUIET, "waits": [0.0, 0.8] * 10}
    new = [_run([1e-3 * (1 + i / 1000) if i % 2 == 0 else 3e-3 for i in range(20)], signals)]
    assert new[0].disturbed
    report = gate.compare(base, new, threshold=0.05)
    assert report.rows[0].status != "regression" and report.rows[0].samples == (20, 10)
    assert report.disturbed == ("bench (new): the machine was busy: decided on its 10 "
                                "undisturbed of 20 blocks",)
    assert "Disturbed by other work on the machine" in report.text()


def test_the_gate_drops_a_run_with_no_undisturbed_block_when_another_run_has_some():
    from opbench import gate

    base = [_run([1e-3 * (1 + i / 100) for i in range(10)], {**QUIET, "waits": [0.0] * 10,
                                                              "slowdowns": [1.0] * 10})] * 2
    hopeless = _run([9e-3] * 10, {**BARRIER, "waits": [1.0] * 10, "slowdowns": [1.0] * 10})
    clean = _run([1e-3 * (1 + i / 100) for i in range(10)], {**QUIET, "waits": [0.0] * 10,
                                                              "slowdowns": [1.0] * 10})
    report = gate.compare(base, [hopeless, clean, clean], threshold=0.05)
    assert report.rows[0].runs == (2, 2) and report.rows[0].status != "regression"
    assert "1 of 3 runs dropped: no block of theirs ran undisturbed" in report.disturbed[0]


def test_a_run_that_never_ran_undisturbed_is_said_to_be_too_high():
    from opbench import gate

    base = [_run([1e-3 * (1 + i / 100) for i in range(13)], {**QUIET, "waits": [0.0] * 13,
                                                              "slowdowns": [1.0] * 13})]
    report = gate.compare(base, [_run([15.9e-3] * 13, BARRIER)], threshold=0.05)
    assert "no block ran undisturbed" in report.disturbed[0]
    assert "the verdict may be wrong" in report.disturbed[0]
