"""Placement: a measurement's slot is its own (cores claimed host-wide, thread pinned)."""
from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
import tempfile
import textwrap

import pytest

import opbench
import opbench.sweep.placement
import other_user
from opbench.errors import PlacementError, UntrustedPathError
from opbench.sweep.placement import Needs, needs_of, reserve
from other_user import shared_folder  # noqa: F401  (the fixture)

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                reason="pinning uses Linux affinity calls")


@pytest.fixture(autouse=True)
def slots(tmp_path, monkeypatch):
    path = tmp_path / "slots"
    monkeypatch.setenv("OPBENCH_SLOT_DIR", str(path))
    return path


class _Clock:
    """The wait's clock and pause: a pause moves the clock on by what it asked for and
    runs ``on_pause(count)`` (what another process does meanwhile); no time passes, so
    what a test sees does not depend on how busy the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.pauses = 0
        self.on_pause = lambda count: None

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses += 1
        # An endless wait (the fault the timeout guards against) fails instead of hanging.
        assert self.pauses < 100_000, "the wait for taken cores never ended"
        self.now += seconds
        self.on_pause(self.pauses)


@pytest.fixture
def clock(monkeypatch):
    """reserve()'s waits on a fake clock."""
    fake = _Clock()
    monkeypatch.setattr(opbench.sweep.placement, "_monotonic", fake.monotonic)
    monkeypatch.setattr(opbench.sweep.placement, "_sleep", fake.sleep)
    return fake


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


def test_it_waits_for_a_taken_core_and_says_how_long(slots, clock):
    cpus = sorted(os.sched_getaffinity(0))
    fds = [_hold(slots, f"cpu{c}") for c in cpus]
    # Every core is held elsewhere until the 40th pause of the wait.
    clock.on_pause = lambda count: count == 40 and [os.close(fd) for fd in fds]
    with reserve(Needs(cpus=1)) as slot:
        assert clock.pauses == 40
        assert slot["waited_s"] == pytest.approx(40 * opbench.sweep.placement._POLL_S)


def test_two_processes_never_share_a_core(slots):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two cores")
    # Each process holds its core until the test has read both claims (its stdin closes).
    code = textwrap.dedent("""
        import sys
        from opbench.sweep.placement import Needs, reserve
        with reserve(Needs(cpus=1)) as slot:
            print(slot["cpus"][0], flush=True)
            sys.stdin.read()
    """)
    # A process that waited for the other's core would give up after 30 s, not hang.
    env = dict(os.environ, OPBENCH_SLOT_DIR=str(slots), OPBENCH_SLOT_TIMEOUT="30")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    try:
        claimed = [p.stdout.readline().strip() for p in procs]  # both hold their cores now
    finally:
        for p in procs:
            p.stdin.close()
        for p in procs:
            p.wait(60)
            p.stdout.close()
    assert sorted(int(c) for c in claimed) == cpus[:2], claimed
    assert [p.returncode for p in procs] == [0, 0]


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


def test_hyperthread_siblings_are_one_core(tmp_path, monkeypatch, slots, clock):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two usable CPUs")
    a, b = allowed[:2]
    # a and b share one physical core: two measurements on them would share it.
    monkeypatch.setattr(opbench.sweep.placement, "_allowed_cpus", lambda: [a, b])
    _fake_topology(tmp_path, monkeypatch, {a: f"{a},{b}", b: f"{a}-{b}" if b == a + 1 else f"{a},{b}"})
    with pytest.raises(PlacementError, match="needs 2 core"), reserve(Needs(cpus=2)):
        pass
    fd = _hold(slots, f"cpu{a}")  # another process measures on that core, for 3 pauses
    clock.on_pause = lambda count: count == 3 and os.close(fd)
    with reserve(Needs(cpus=1)) as slot:
        pass
    # b is free as a logical CPU, but its core is taken: the claim waited for a.
    assert clock.pauses == 3
    assert slot["cpus"] == [a] and slot["core_cpus"] == [[a, b]] and slot["waited_s"] > 0


# -- the slot folder is the user's own, and no wait is endless (issue 34) ------------------

def _default_slot_dir(monkeypatch, tmp) -> None:
    """No $OPBENCH_SLOT_DIR nor $XDG_RUNTIME_DIR: the folder is made in ``tmp``."""
    monkeypatch.delenv("OPBENCH_SLOT_DIR")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))


def test_the_default_slot_folder_is_private(tmp_path, monkeypatch):
    _default_slot_dir(monkeypatch, tmp_path)
    path = opbench.sweep.placement.slot_dir()
    assert path == str(tmp_path / f"opbench-slots-{os.getuid()}")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    assert opbench.sweep.placement.slot_dir() == str(tmp_path / "run" / "opbench-slots")


@other_user.needed
def test_a_slot_folder_another_user_made_is_refused(shared_folder, monkeypatch):  # noqa: F811
    """Another user who makes /tmp/opbench-slots-<your uid> first, and holds its locks,
    would freeze every sweep of yours."""
    _default_slot_dir(monkeypatch, shared_folder)
    planted = shared_folder / f"opbench-slots-{os.getuid()}"
    other_user.run(f"mkdir -m 777 {planted}")
    with pytest.raises(UntrustedPathError, match=f"{planted}: it is owned by nobody.*"
                                                  "OPBENCH_SLOT_DIR"):
        opbench.sweep.placement.slot_dir()


def test_a_lock_held_too_long_times_out_naming_it(slots, monkeypatch, clock):
    monkeypatch.setenv("OPBENCH_SLOT_TIMEOUT", "0.3")
    cpus = sorted(os.sched_getaffinity(0))
    fds = [_hold(slots, f"cpu{c}") for c in cpus]
    try:
        with pytest.raises(PlacementError) as error, reserve(Needs(cpus=1)):
            pass
    finally:
        for fd in fds:
            os.close(fd)
    assert clock.now - 1000.0 == pytest.approx(0.3, abs=2 * opbench.sweep.placement._POLL_S)
    message = str(error.value)
    assert message.startswith("waited 0.3 s for 1 core(s) and 0 GPU(s)"), message
    assert f"{slots / f'cpu{cpus[0]}.lock'}" in message and "held by process" in message
    assert str(os.getpid()) in message and "OPBENCH_SLOT_TIMEOUT" in message


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(slots, tmp_path):
    first = sorted(os.sched_getaffinity(0))[0]
    slots.mkdir()
    target = tmp_path / "someone-elses-file"
    (slots / f"cpu{first}.lock").symlink_to(target)
    with pytest.raises(UntrustedPathError, match=f"cpu{first}.lock: it is a symbolic link"), \
            reserve(Needs(cpus=1)):
        pass
    assert not target.exists()
