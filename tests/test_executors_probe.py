"""opbench.sweep.executors.probe: what a worker says about itself with each result."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from opbench.sweep.executors import probe


def test_the_variables_that_change_timings_are_picked() -> None:
    for name in ("MALLOC_ARENA_MAX", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONMALLOC", "LD_PRELOAD"):
        assert probe._is_timing_variable(name), name
    assert not probe._is_timing_variable("HOME") and not probe._is_timing_variable("PATH")
    assert probe.is_allocator_variable("MALLOC_TRIM_THRESHOLD_")
    assert not probe.is_allocator_variable("OMP_NUM_THREADS")


def test_timing_variables_are_those_the_process_started_with() -> None:
    # A later change to os.environ does not reach the allocator: the probe reads /proc.
    code = ("import os; os.environ['OMP_NUM_THREADS'] = '7'; "
            "from opbench.sweep.executors.probe import timing_variables; print(timing_variables())")
    env = {k: v for k, v in os.environ.items() if not probe._is_timing_variable(k)}
    env["MALLOC_ARENA_MAX"] = "2"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "{'MALLOC_ARENA_MAX': '2'}"


def test_a_pool_worker_gets_the_drivers_starting_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "_environment_at_start", lambda: {"MALLOC_ARENA_MAX": "2", "HOME": "/h"})
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")  # changed since start: the start value wins
    monkeypatch.setenv("OPBENCH_PROBE_TEST", "kept")
    env = probe._pool_environment()
    assert env["MALLOC_ARENA_MAX"] == "2" and env["OPBENCH_PROBE_TEST"] == "kept"


def test_the_worker_environment_names_the_worker_and_its_slot() -> None:
    env = probe.worker_environment({"cpus": [0]})
    assert env["worker"] == probe.worker_id() == f"{os.uname().nodename}:{os.getpid()}"
    assert env["slot"] == {"cpus": [0]}
    assert "gpu_driver" in env and "python" in env and isinstance(env["variables"], dict)


def test_no_nvidia_driver_reads_as_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "_read_first_line", lambda path: None)
    monkeypatch.setattr(probe.os, "listdir", lambda path: (_ for _ in ()).throw(FileNotFoundError(path)))
    assert probe._gpu_facts() == {"gpu_driver": None, "gpus": None}


def test_only_variables_of_exact_names_are_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34: variables were picked by prefix, so MKL_SECRET_THING (a token someone
    named so) went into every results file."""
    monkeypatch.setattr(probe, "_environment_at_start", lambda: {
        "MKL_SECRET_THING": "s3cret", "OMP_API_TOKEN": "t0ken", "MALLOC_PASSWORD": "pw",
        "MKL_NUM_THREADS": "2", "OMP_PROC_BIND": "close", "MALLOC_ARENA_MAX": "2",
        "GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "HOME": "/home/ann"})
    assert probe.timing_variables() == {
        "GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "MALLOC_ARENA_MAX": "2",
        "MKL_NUM_THREADS": "2", "OMP_PROC_BIND": "close"}
    assert "s3cret" not in repr(probe.worker_environment(None))
