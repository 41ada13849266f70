"""Placement: a measurement's slot is its own (cores claimed host-wide, thread pinned)."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import opbench
import opbench.sweep.placement
from opbench.errors import PlacementError
from opbench.sweep.placement import Needs, needs_of, reserve

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                reason="pinning uses Linux affinity calls")


@pytest.fixture(autouse=True)
def slots(tmp_path, monkeypatch):
    path = tmp_path / "slots"
    monkeypatch.setenv("OPBENCH_SLOT_DIR", str(path))
    return path


def _hold(slots, name):
    """Claims a lock file as another process's measurement would; returns its fd."""
    slots.mkdir(exist_ok=True)
    fd = os.open(slots / f"{name}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_the_thread_is_pinned_to_the_claimed_core_and_released_after():
    before = os.sched_getaffinity(0)
    with reserve(Needs(cpus=1)) as slot:
        assert os.sched_getaffinity(0) == set(slot["cpus"]) and slot["pinned"]
        assert len(slot["cpus"]) == 1 and slot["gpu"] is None and slot["waited_s"] == 0
    assert os.sched_getaffinity(0) == before


def test_a_core_held_elsewhere_on_the_host_is_not_used(slots):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two cores")
    fd = _hold(slots, f"cpu{cpus[0]}")
    try:
        with reserve(Needs(cpus=1)) as slot:
            assert slot["cpus"] == [cpus[1]]
    finally:
        os.close(fd)


def test_it_waits_for_a_taken_core_and_says_how_long(slots):
    cpus = sorted(os.sched_getaffinity(0))
    fds = [_hold(slots, f"cpu{c}") for c in cpus]
    threading.Timer(0.2, lambda: [os.close(fd) for fd in fds]).start()
    start = time.monotonic()
    with reserve(Needs(cpus=1)) as slot:
        assert time.monotonic() - start >= 0.15
        assert slot["waited_s"] >= 0.1


def test_two_processes_never_share_a_core(slots):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two cores")
    code = textwrap.dedent("""
        import sys, time
        from opbench.sweep.placement import Needs, reserve
        with reserve(Needs(cpus=1)) as slot:
            print(slot["cpus"][0], flush=True)
            time.sleep(1.0)
    """)
    env = dict(os.environ, OPBENCH_SLOT_DIR=str(slots))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    claimed = [int(p.communicate(timeout=60)[0]) for p in procs]
    assert sorted(claimed) == cpus[:2]


def test_impossible_needs_fail_at_once():
    cores = len(os.sched_getaffinity(0))
    with pytest.raises(PlacementError, match=f"needs {cores + 1} core"), \
            reserve(Needs(cpus=cores + 1)):
        pass


def test_a_gpu_slot_claims_the_visible_gpu(monkeypatch, slots):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with reserve(Needs(cpus=1, gpus=1)) as slot:
        assert slot["gpu"] == "3"
        assert (slots / "gpu3.lock").exists()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(PlacementError, match="1 GPU"), reserve(Needs(cpus=1, gpus=1)):
        pass


class _FakeCudaTensor:
    is_cuda = True


def test_needs_of_a_timer():
    assert needs_of(opbench.Timer("pass")) == Needs(cpus=1, gpus=0)
    assert needs_of(opbench.Timer("pass", num_threads=2)) == Needs(cpus=2, gpus=0)
    assert needs_of(opbench.Timer("pass", globals={"x": _FakeCudaTensor()})).gpus == 1
    assert Needs(cpus=2, gpus=1).resources() == {"CPU": 2, "GPU": 1}
    assert Needs().resources() == {"CPU": 1}


def test_fit_counts_what_a_worker_already_holds():
    offer = {"CPU": 2, "GPU": 1}
    assert Needs(cpus=2, gpus=1).fit(offer)
    assert not Needs(cpus=2).fit(offer, held={"CPU": 1})
    assert Needs(cpus=1).fit(offer, held={"CPU": 1, "GPU": 1})
    assert not Needs(cpus=1, gpus=1).fit({"CPU": 8})
    assert not Needs().fit({})  # a Dask worker that declares no resources


def _fake_topology(tmp_path, monkeypatch, siblings: dict[int, str]):
    """A sysfs CPU tree where ``siblings[cpu]`` is its thread_siblings_list."""
    root = tmp_path / "sysfs_cpu"
    for cpu, text in siblings.items():
        (root / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (root / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(text + "\n")
    monkeypatch.setattr(opbench.sweep.placement, "_SYSFS_CPU", str(root), raising=False)


def test_hyperthread_siblings_are_one_core(tmp_path, monkeypatch, slots):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two usable CPUs")
    a, b = allowed[:2]
    # a and b share one physical core: two measurements on them would share it.
    monkeypatch.setattr(opbench.sweep.placement, "_allowed_cpus", lambda: [a, b])
    _fake_topology(tmp_path, monkeypatch, {a: f"{a},{b}", b: f"{a}-{b}" if b == a + 1 else f"{a},{b}"})
    with pytest.raises(PlacementError, match="needs 2 core"), reserve(Needs(cpus=2)):
        pass
    fd = _hold(slots, f"cpu{a}")  # another process measures on that core
    got: list[dict] = []

    def claim():
        with reserve(Needs(cpus=1)) as slot:
            got.append(slot)

    thread = threading.Thread(target=claim)
    thread.start()
    time.sleep(0.3)
    waiting = not got  # b is free as a logical CPU, but its core is taken
    os.close(fd)
    thread.join(10)
    assert waiting, got
    assert got[0]["cpus"] == [a] and got[0]["core_cpus"] == [[a, b]] and got[0]["waited_s"] > 0
