"""Recovery: disturbed results measured again within a budget, in a sweep and alone."""
from __future__ import annotations

import pytest

import opbench
from opbench import environment
from opbench.core import recovery
from opbench.core.measurement import Measurement, TaskSpec

BUSY = {"waits": [1.0] * 6, "slowdowns": [1.0] * 6, "threads": 2, "cpus": 2, "others": 2.0}
CLEAN = {**BUSY, "waits": [0.0] * 6}


def _m(median, signals, name="f()"):
    return Measurement(1, [median] * 6, TaskSpec(name, "pass", num_threads=2),
                       info={"disturbance": dict(signals)})


def test_a_clean_figure_replaces_a_disturbed_one():
    out = recovery.remeasure([_m(9e-3, BUSY), _m(1e-3, CLEAN)], lambda i: _m(1.1e-3, CLEAN),
                             budget=1.0, quiet_wait=0)
    assert [m.median for m in out] == [1.1e-3, 1e-3]
    assert out[0].info["disturbance"]["remeasured"] == 1
    assert "remeasured" not in out[1].info["disturbance"]


def test_of_two_disturbed_figures_the_lower_is_kept_and_tries_stop_at_the_budget(monkeypatch):
    clock = iter(range(100))
    monkeypatch.setattr(recovery.time, "monotonic", lambda: float(next(clock)))
    tries = iter([_m(5e-3, BUSY), _m(7e-3, BUSY), _m(4e-3, BUSY)])
    out = recovery.remeasure([_m(9e-3, BUSY)], lambda i: next(tries), budget=2.5, quiet_wait=0)
    # The clock ticks a second per look: the budget of 2.5 s allows two tries.
    assert out[0].median == 5e-3 and out[0].info["disturbance"]["remeasured"] == 2


def test_the_cpus_are_checked_before_a_try_unless_the_try_before_came_out_clean(monkeypatch):
    waited = []
    monkeypatch.setattr(recovery, "wait_until_free", lambda threads, timeout: waited.append(threads))
    tries = iter([_m(8e-3, BUSY), _m(1e-3, CLEAN), _m(1e-3, CLEAN), _m(1e-3, CLEAN)])
    first = [_m(9e-3, BUSY, "a()"), _m(9e-3, BUSY, "b()"), _m(9e-3, BUSY, "c()")]
    out = recovery.remeasure(first, lambda i: next(tries), budget=60.0, quiet_wait=1.0)
    # a (busy again): waited before; b: waited (a's try was busy); c: at once (b's was
    # clean); a's second round: at once (c's was clean).
    assert len(waited) == 2 and not any(m.disturbed for m in out)
    assert [m.info["disturbance"]["remeasured"] for m in out] == [2, 1, 1]


def test_the_default_budget_is_a_share_of_the_first_measurement(monkeypatch):
    clock = iter([10.0, 18.0])
    monkeypatch.setattr(recovery.time, "monotonic", lambda: next(clock))
    budgets = []
    monkeypatch.setattr(recovery, "remeasure",
                        lambda results, measure, budget, quiet_wait: budgets.append(budget) or results)
    recovery.recovered(lambda: _m(1e-3, CLEAN))
    assert budgets == [recovery.default_budget(8.0)] == [8.0 * recovery.BUDGET_SHARE]


def test_nothing_is_measured_again_without_a_budget_or_a_disturbance():
    def never(i):
        raise AssertionError("measured again")

    first = [_m(9e-3, BUSY)]
    assert recovery.remeasure(first, never, budget=0.0)[0] is first[0]
    clean = [_m(1e-3, CLEAN)]
    assert recovery.remeasure(clean, never, budget=5.0)[0] is clean[0]


@pytest.mark.parametrize("budget", [-1.0, float("inf"), float("nan")])
def test_a_bad_budget_is_refused(budget):
    with pytest.raises(ValueError, match="budget must be a finite number of seconds"):
        recovery.remeasure([], lambda i: None, budget=budget)


def _snapshots(monkeypatch, busy_per_window, slowdowns=(1.0,)):
    """CPU snapshots 0.1 s apart whose other processes used ``busy_per_window`` CPUs, and
    the core's speed probe reading ``slowdowns`` in turn (the last one from then on)."""
    speeds = {"i": 0}

    def slowdown_now():
        speeds["i"] += 1
        return slowdowns[min(speeds["i"] - 1, len(slowdowns) - 1)]

    monkeypatch.setattr(recovery, "slowdown_now", slowdown_now)
    state = {"wall": 0.0, "busy": 0.0, "i": 0}

    def snapshot():
        others = busy_per_window[min(state["i"], len(busy_per_window) - 1)]
        state["i"] += 1
        state["wall"] += 0.1
        state["busy"] += others * 0.1
        return environment.CpuSnapshot(state["wall"], state["busy"], 0.0, 0.2 * state["i"], 0.0)

    monkeypatch.setattr(environment, "cpu_snapshot", snapshot)
    monkeypatch.setattr(environment, "allowed_cpus", lambda: 2)
    monkeypatch.setattr(recovery.time, "sleep", lambda s: None)
    return speeds


def test_waiting_for_free_cpus_returns_once_they_are_free(monkeypatch):
    _snapshots(monkeypatch, [2.0, 2.0, 2.0, 0.1])
    assert recovery.wait_until_free(2, timeout=10.0)


def test_free_cpus_on_a_slow_core_are_waited_out(monkeypatch):
    # Other processes hold no CPU, but the core runs 1.9x slow (a busy sibling the guest
    # cannot see), then full speed: the wait ends only then.
    speeds = _snapshots(monkeypatch, [0.0], slowdowns=(1.9, 1.9, 1.0))
    assert recovery.wait_until_free(1, timeout=10.0)
    assert speeds["i"] == 3  # it read the core's speed until it was full


def test_a_core_that_stays_slow_is_not_called_free(monkeypatch):
    _snapshots(monkeypatch, [0.0], slowdowns=(1.9,))
    ticks = iter(range(1000))
    monkeypatch.setattr(recovery.time, "monotonic", lambda: next(ticks) * 0.1)
    assert not recovery.wait_until_free(1, timeout=0.5)


def test_waiting_for_full_speed_reads_the_probe_until_it_is_within_the_limit(monkeypatch):
    # The core reads 1.9x, then 1.3x, then 1.1x another process's full speed of 1000 ns.
    reads = iter([1900, 1300, 1100, 1000])
    monkeypatch.setattr(recovery, "speed_ns", lambda: next(reads))
    monkeypatch.setattr(recovery.time, "sleep", lambda s: None)
    assert recovery.wait_for_speed(1000.0, 1.15, timeout=10.0)
    assert next(reads) == 1000  # it stopped at the first read within 1.15x


def test_waiting_for_full_speed_gives_up_at_its_timeout(monkeypatch):
    monkeypatch.setattr(recovery, "speed_ns", lambda: 1900)
    ticks = iter(range(1000))
    monkeypatch.setattr(recovery.time, "monotonic", lambda: next(ticks) * 0.1)
    monkeypatch.setattr(recovery.time, "sleep", lambda s: None)
    assert not recovery.wait_for_speed(1000.0, 1.15, timeout=0.5)


def test_waiting_for_free_cpus_gives_up_at_its_timeout(monkeypatch):
    _snapshots(monkeypatch, [2.0])
    ticks = iter(range(1000))
    monkeypatch.setattr(recovery.time, "monotonic", lambda: next(ticks) * 0.1)
    assert not recovery.wait_until_free(2, timeout=0.5)


class _Scripted:
    """A Timer stand-in whose blocked_autorange returns prepared results in turn."""

    def __init__(self, *results):
        self._results = list(results)
        self.calls = 0

    def blocked_autorange(self, **kwargs):
        self.calls += 1
        return self._results.pop(0)


def test_run_all_recovers_only_when_asked():
    first, second = _Scripted(_m(9e-3, BUSY), _m(1e-3, CLEAN)), _Scripted(_m(1e-3, CLEAN))
    [kept] = opbench.run_all([first], progress=False)
    assert kept.disturbed and first.calls == 1  # torch's behaviour: measured once
    [recovered] = opbench.run_all([_Scripted(_m(9e-3, BUSY), _m(1e-3, CLEAN))], progress=False,
                                  recover=5.0)
    assert not recovered.disturbed and recovered.info["disturbance"]["remeasured"] == 1
    [untouched] = opbench.run_all([second], progress=False, recover=True)
    assert second.calls == 1 and not untouched.disturbed


def test_run_all_refuses_a_bad_recovery_budget():
    with pytest.raises(ValueError, match="recover must be True, False or a budget"):
        opbench.run_all([opbench.Timer("pass")], progress=False, recover=-2)


def test_a_recovered_sweep_file_holds_the_figure_kept(tmp_path):
    path = tmp_path / "sweep.json"
    timers = [opbench.Timer("sum(range(10))", label="L")]
    opbench.run_all(timers, progress=False, results_path=path, min_run_time=0.01)
    # The file's last success wins: a result written again replaces the first.
    from opbench.store.sweep_file import SweepWriter

    with SweepWriter(path, "blocked_autorange", {"min_run_time": 0.01}, resume=True) as writer:
        key = next(iter(writer.completed))
        doc = writer.completed[key]
        doc["measurements"][0]["raw_times"] = [1.0]
        writer.add_result(key, 0, doc)
    [loaded] = opbench.load(path)
    assert loaded.raw_times == [1.0]


def test_a_cpu_table_that_turns_unreadable_leaves_the_speed_to_decide(monkeypatch):
    # /proc/stat readable at first, then gone (a container's view changed): the wait
    # goes by the core's speed alone instead of running to its timeout.
    _snapshots(monkeypatch, [2.0])
    readings = iter([environment.CpuSnapshot(0.1, 0.2, 0.0, 0.2, 0.0)])
    monkeypatch.setattr(environment, "cpu_snapshot", lambda: next(readings, None))
    ticks = iter(range(1000))
    monkeypatch.setattr(recovery.time, "monotonic", lambda: next(ticks) * 0.1)
    assert recovery.wait_until_free(2, timeout=5.0)


def test_without_a_cpu_table_a_full_speed_core_is_free_at_once(monkeypatch):
    speeds = _snapshots(monkeypatch, [2.0])
    monkeypatch.setattr(environment, "cpu_snapshot", lambda: None)
    assert recovery.wait_until_free(2, timeout=0.0)
    assert speeds["i"] == 1
