"""run_all on opbench's local process pool: placement, faults, streaming, resume, Ctrl-C.

The same driver runs Dask and Ray sweeps (tests/test_executors_dask.py,
tests/test_executors_ray.py); the pool needs neither, so the driver's
behaviour is tested here on real worker processes.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import opbench
from opbench import sweep
from opbench.errors import (
    PlacementError,
    ResultsFileError,
    SerializationError,
    SweepError,
)
from opbench.sweep import executors
from sweep_faults import die_once

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"),
                                reason="the process pool pins cores with Linux affinity calls")

HOST = socket.gethostname()


@pytest.fixture(autouse=True)
def _private_slots(tmp_path, monkeypatch):
    # Core locks of this test alone: other test runs on the machine hold their own.
    monkeypatch.setenv("OPBENCH_SLOT_DIR", str(tmp_path / "slots"))


def _log_setup(log, i):
    """A setup that records, in `log`, that task `i` ran and on which cores."""
    return (f"import os\nwith open({str(log)!r}, 'a') as _f:\n"
            f"    _f.write('{i} ' + ','.join(map(str, sorted(os.sched_getaffinity(0)))) + '\\n')")


def _logged(log):
    runs = {}
    for line in log.read_text().splitlines():
        i, cpus = line.split()
        runs.setdefault(int(i), []).append([int(c) for c in cpus.split(",")])
    return runs


def _timers(log, n=4):
    return [opbench.Timer("sum(range(50))", setup=_log_setup(log, i), label="sum",
                          sub_label=str(i)) for i in range(n)]


def test_processes_return_results_in_order_each_pinned_to_one_core(tmp_path):
    log = tmp_path / "log"
    results = opbench.run_all(_timers(log), "timeit", executor="processes", progress=False,
                              number=100)
    assert [m.sub_label for m in results] == ["0", "1", "2", "3"]
    assert all(m.number_per_run == 100 and m.median > 0 for m in results)
    for m in results:
        env = m.info["environment"]
        assert m.env == HOST == env["hostname"]  # no env given: the worker's host
        assert env["worker"].startswith(HOST + ":") and env["worker"] != f"{HOST}:{os.getpid()}"
        assert env["slot"]["pinned"] and len(env["slot"]["cpus"]) == 1
        assert {"cpu_model", "governor", "torch", "gpu_driver", "gpus"} <= env.keys()
        assert env["variables"] == executors.timing_variables()  # inherited from here
        assert not m.info.get("warnings")
    # The setup (run before each block) ran pinned to the slot's one core.
    runs = _logged(log)
    for i, m in enumerate(results):
        assert runs[i] and all(cpus == m.info["environment"]["slot"]["cpus"] for cpus in runs[i])


def test_a_given_env_is_kept():
    t = opbench.Timer("pass", env="mine")
    (m,) = opbench.run_all([t], "timeit", executor="processes", progress=False, number=10)
    assert m.env == "mine" and m.info["environment"]["hostname"] == HOST


def test_a_task_that_raises_is_reported_and_the_sweep_goes_on(tmp_path):
    timers = [opbench.Timer("1 + 1", label="ok"), opbench.Timer("1 / 0", label="bad"),
              opbench.Timer("2 + 2", label="ok2")]
    with pytest.raises(SweepError, match=r"1 of 3 tasks failed") as info:
        opbench.run_all(timers, "timeit", executor="processes", progress=False, number=10)
    results, (failure,) = info.value.results, info.value.failures
    assert [r is None for r in results] == [False, True, False]
    assert failure.index == 1 and failure.title == "bad" and failure.attempts == 1
    assert failure.error == "ZeroDivisionError: division by zero"
    assert "ZeroDivisionError" in failure.traceback and failure.worker.startswith(HOST)
    assert "timers[1] (bad): ZeroDivisionError" in str(info.value)


def test_a_worker_that_dies_is_retried_once_then_reported(tmp_path):
    timers = [opbench.Timer(lambda: os._exit(3), label="killer"),
              opbench.Timer("1 + 1", label="ok")]
    with pytest.raises(SweepError) as info:
        opbench.run_all(timers, "timeit", executor="processes", progress=False, number=10)
    (failure,) = info.value.failures
    assert failure.index == 0 and failure.attempts == 2
    assert "died running it (exit status 3)" in failure.error
    assert info.value.results[1].label == "ok"


def test_a_worker_death_is_survived_by_the_retry_on_another_worker(tmp_path):
    timers = [opbench.Timer(die_once(str(tmp_path / "died")), label="flaky")]
    (m,) = opbench.run_all(timers, "timeit", executor="processes", progress=False, number=10)
    assert (tmp_path / "died").exists() and m.label == "flaky" and m.number_per_run == 10


def test_unsendable_globals_are_refused_naming_the_global_before_anything_runs(tmp_path):
    log, path = tmp_path / "log", tmp_path / "sweep.jsonl"
    timers = [*_timers(log, 1), opbench.Timer("lock", globals={"lock": threading.Lock()})]
    with pytest.raises(SerializationError, match=r"timers\[1\].*global 'lock' \(of type lock\)"):
        opbench.run_all(timers, "timeit", executor="processes", progress=False,
                        results_path=path, number=10)
    assert not log.exists()  # timers[0] was never sent
    # The file holds no result, so the corrected sweep starts it afresh.
    opbench.run_all(timers[:1], "timeit", executor="processes", progress=False,
                    results_path=path, number=10)
    assert len(opbench.load(path)) == 1


def test_a_task_needing_more_cores_than_there_are_is_refused_up_front():
    cores = len(os.sched_getaffinity(0))
    with pytest.raises(PlacementError, match=f"{cores + 1} core"):
        opbench.run_all([opbench.Timer("pass", num_threads=cores + 1)], "timeit",
                        executor="processes", progress=False, number=1)


def test_unknown_executor_and_non_timers_are_refused():
    with pytest.raises(ValueError, match="executor must be"):
        opbench.run_all([opbench.Timer("pass")], "timeit", executor="threads", number=1)

    class Fake:
        def timeit(self, number):
            return number

    with pytest.raises(TypeError, match=r"timers\[0\] \(Fake\) is not an opbench.Timer"):
        opbench.run_all([Fake()], "timeit", executor="processes", number=1)


def test_progress_counts_the_cluster_tasks(tmp_path):
    stream = _TTY()
    opbench.run_all(_timers(tmp_path / "log", 3), "timeit", executor="processes",
                    progress=True, stream=stream, number=10)
    out = stream.getvalue()
    assert "timeit  0/3" in out and "on processes" in out and "timeit  3/3" in out
    assert "~0:0" in out  # time left, from the tasks finished so far


class _TTY:
    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass

    def isatty(self):
        return True

    def getvalue(self):
        return "".join(self.parts)


# -- the results file ---------------------------------------------------------

def test_results_stream_into_the_file_and_resume_skips_them(tmp_path):
    log, path = tmp_path / "log", tmp_path / "sweep.jsonl"
    timers = _timers(log)
    first = opbench.run_all(timers[:2], "timeit", executor="processes", progress=False,
                            results_path=path, number=10)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "opbench-sweep" and len(lines) == 3
    with pytest.raises(ResultsFileError, match="resume=True"):
        opbench.run_all(timers, "timeit", executor="processes", results_path=path, number=10)
    with pytest.raises(ResultsFileError, match="method='timeit'"):
        opbench.run_all(timers, "timeit", executor="processes", results_path=path,
                        resume=True, number=20)

    log.unlink()
    again = opbench.run_all(timers, "timeit", executor="processes", progress=False,
                            results_path=path, resume=True, number=10)
    assert sorted(_logged(log)) == [2, 3]  # only what the file did not hold ran
    assert [m.sub_label for m in again] == ["0", "1", "2", "3"]
    assert [m.raw_times for m in again[:2]] == [m.raw_times for m in first]
    assert again[0].info["environment"] == first[0].info["environment"]
    loaded = opbench.load(path)
    assert [m.sub_label for m in loaded] == ["0", "1", "2", "3"]
    assert loaded.environment["hostname"] == HOST
    assert all(m.env == HOST for m in loaded)


def test_failures_are_written_and_rerun_on_resume(tmp_path):
    path, marker = tmp_path / "sweep.jsonl", tmp_path / "fixed"
    stmt = f"assert __import__('os').path.exists({str(marker)!r}), 'not yet'"
    timers = [opbench.Timer(stmt, label="later"), opbench.Timer("1", label="ok")]
    with pytest.raises(SweepError):
        opbench.run_all(timers, "timeit", executor="processes", progress=False,
                        results_path=path, number=5)
    from opbench.store import sweep_file
    (failed,) = sweep_file.failures(path.read_bytes())
    assert failed["index"] == 0 and failed["error"] == "AssertionError: not yet"
    marker.touch()
    results = opbench.run_all(timers, "timeit", executor="processes", progress=False,
                              results_path=path, resume=True, number=5)
    assert [m.label for m in results] == ["later", "ok"]
    assert sweep_file.failures(path.read_bytes()) == []


def test_in_process_sweep_streams_too_and_errors_propagate_as_themselves(tmp_path):
    path = tmp_path / "here.jsonl"
    timers = [opbench.Timer("1", label="a"), opbench.Timer("1 / 0", label="b")]
    with pytest.raises(ZeroDivisionError):
        opbench.run_all(timers, "timeit", progress=False, results_path=path, number=5)
    (kept,) = opbench.load(path)
    assert kept.label == "a" and kept.task_spec.env is None  # here: the env as given
    assert kept.info["environment"]["worker"] == f"{HOST}:{os.getpid()}"
    with pytest.raises(ValueError, match="resume=True needs results_path"):
        opbench.run_all(timers, "timeit", resume=True, number=5)


def test_task_keys_tell_apart_timers_that_share_a_task_spec():
    a, b = opbench.Timer("x", globals={"x": 1}), opbench.Timer("x", globals={"x": 2})
    keys = sweep.task_keys([a, b, opbench.Timer("y")])
    assert len(set(keys)) == 3
    assert sweep.task_keys([a, b]) == keys[:2]  # stable across runs


_SWEEP_SCRIPT = textwrap.dedent("""
    import sys, opbench
    timers = [opbench.Timer("__import__('time').sleep(0.2)", label="slow", sub_label=str(i))
              for i in range(8)]
    opbench.run_all(timers, "timeit", executor="processes", progress=False,
                    results_path=sys.argv[1], resume=True, number=1)
""")


def _start_sweep(path, tmp_path):
    env = dict(os.environ, OPBENCH_SLOT_DIR=str(tmp_path / "slots"))
    return subprocess.Popen([sys.executable, "-c", _SWEEP_SCRIPT, str(path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_results(path, n, proc):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_text().count("\n") >= n + 1:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {n} results in time: {proc.poll()}")


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "crash"])
def test_an_interrupted_sweep_keeps_what_it_measured_and_resumes(tmp_path, sig):
    path = tmp_path / "sweep.jsonl"
    proc = _start_sweep(path, tmp_path)
    _wait_for_results(path, 2, proc)
    running = opbench.load(path)  # readable while the sweep writes it
    assert len(running) >= 2
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err
    kept = opbench.load(path)
    assert len(kept) >= len(running)
    workers = {int(m.info["environment"]["worker"].rsplit(":", 1)[1]) for m in kept}
    if sig == signal.SIGINT:  # the driver stopped its workers; a killed driver cannot
        assert not [pid for pid in workers if _alive(pid)]

    proc = _start_sweep(path, tmp_path)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    done = opbench.load(path)
    assert sorted(int(m.sub_label) for m in done) == list(range(8))
    assert [m.raw_times for m in done[:len(kept)]] == [m.raw_times for m in kept]


def test_import_opbench_imports_neither_dask_nor_ray():
    code = ("import sys, opbench\n"
            "opbench.run_all([opbench.Timer('1')], 'timeit', progress=False, number=1)\n"
            "print(sorted(m for m in ('dask', 'distributed', 'ray', 'cloudpickle') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_cluster_unusable_for_the_grace_period_stops_the_sweep(monkeypatch):
    from opbench.errors import SchedulerUnreachableError
    from opbench.sweep import executors

    class Gone(executors._Executor):
        def _usable(self):
            return False

    clock = [1000.0]
    monkeypatch.setattr(executors.base.time, "monotonic", lambda: clock[0])
    gone = Gone()
    for _ in range(int(executors.base.LOST_GRACE_S // 2.5) + 1):
        gone.check()  # unusable, but not for long yet
        clock[0] += 2.5
    with pytest.raises(SchedulerUnreachableError, match="the cluster cannot run"):
        gone.check()


def test_a_worker_with_other_timing_variables_is_flagged(monkeypatch):
    monkeypatch.setattr(opbench.errors, "_shown", set())  # shown once per process: fresh here
    monkeypatch.setattr(executors.probe, "_environment_at_start", lambda: {"OMP_NUM_THREADS": "3"})
    m = opbench.Measurement(1, [1e-6], opbench.TaskSpec("f()", "pass"))
    env = {"hostname": "h", "variables": {"MALLOC_TRIM_THRESHOLD_": "65536"}}
    with pytest.warns(opbench.MachineWarning,
                      match=r"allocator .*: MALLOC_TRIM_THRESHOLD_=65536 \(here unset\);"
                      r".*pre-spawn-environ"):  # thread pools differ too: kept, not flagged
        got = sweep._received(m, env, on_worker=True)
    assert got.env == "h" and got.info["environment"] is env
    assert [w["category"] for w in got.info["warnings"]] == ["MachineWarning"]
    same = {"hostname": "h", "variables": executors.timing_variables()}
    assert "warnings" not in sweep._received(m, same, on_worker=True).info
    assert sweep._received(m, env, on_worker=False).task_spec.env is None  # here: as given


def test_pool_workers_start_with_the_variables_this_process_started_with(monkeypatch):
    # As a Dask LocalCluster's nanny does to the process that starts it: os.environ
    # changes, the allocator this process started with does not.
    if "MALLOC_TRIM_THRESHOLD_" in executors.timing_variables():
        pytest.skip("this process started with MALLOC_TRIM_THRESHOLD_ set")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    assert "MALLOC_TRIM_THRESHOLD_" not in executors.timing_variables()
    (m,) = opbench.run_all([opbench.Timer("pass")], "timeit", executor="processes",
                           progress=False, number=10)
    assert "MALLOC_TRIM_THRESHOLD_" not in m.info["environment"]["variables"]
    assert not m.info.get("warnings")
