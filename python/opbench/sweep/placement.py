"""Placement: the slot a measurement needs, and holding it alone while it runs.

A measurement shares nothing: not a core with another measurement, not a GPU,
not an interpreter (two Python measurements in one process take turns at
the GIL). Each task of a distributed sweep declares what it needs
(``Needs``: cores, and a GPU when it times on one); the cluster's own
resource mechanism reserves that much (Dask worker resources ``CPU``/``GPU``,
Ray ``num_cpus``/``num_gpus``, the core budget of opbench's local process
pool). A count is not a set of cores, so on the worker ``reserve`` turns it
into particular ones:

* it claims free physical cores among those the process may use (hyperthread
  siblings are one core), by an exclusive ``flock`` on one lock file per core
  (and per GPU) in a directory shared by every opbench process of the host
  (``$OPBENCH_SLOT_DIR``, default ``<tmp>/opbench-slots-<uid>``): two workers of one host never measure on
  the same core, whatever each was told; the kernel drops a dead process's
  locks, so a crash never leaves a core claimed;
* it pins the measuring thread to those cores (``os.sched_setaffinity``,
  Linux; elsewhere unpinned, and the slot says so); threads the
  measurement starts inherit the pinning;
* it holds a lock of the process, so one process measures one thing at a time.

If the cores are taken (a cluster that declared more cores than it has),
``reserve`` waits for them, and the slot records how long it waited.

Example:
    >>> from opbench.sweep.placement import Needs, reserve
    >>> with reserve(Needs(cpus=1)) as slot:
    ...     len(slot["cpus"]) <= 1
    True
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from opbench.errors import PlacementError

__all__ = ["Needs", "needs_of", "reserve", "slot_dir", "visible_gpus"]

SLOT_DIR_VAR = "OPBENCH_SLOT_DIR"
# How often a task waiting for taken cores looks again.
_POLL_S = 0.005

# One measurement per process at a time: Python measurements would share the
# GIL, and torch's thread setting is process-wide.
_PROCESS_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Needs:
    """What one measurement holds alone: ``cpus`` cores and ``gpus`` GPUs (0 or 1)."""

    cpus: int = 1
    gpus: int = 0

    def resources(self) -> dict[str, int]:
        """As named resources: ``CPU`` and ``GPU``, the names Ray uses and Dask workers
        declare (``--resources CPU=1``)."""
        return {"CPU": self.cpus, **({"GPU": self.gpus} if self.gpus else {})}

    def fit(self, offer: Mapping[str, float], held: Mapping[str, float] | None = None) -> bool:
        """Whether a worker offering ``offer`` (less what it ``held``) can run a task."""
        held = held or {}
        return all(offer.get(k, 0) - held.get(k, 0) >= v for k, v in self.resources().items())


def _on_gpu(value: Any) -> bool:
    try:
        return bool(getattr(value, "is_cuda", False))
    except Exception:
        return False


def needs_of(timer: Any) -> Needs:
    """A Timer's needs: its ``num_threads`` cores, and a GPU when it times on the
    device (``device_timing``) or one of its globals is a CUDA tensor."""
    kwargs = timer.kwargs
    gpu = kwargs.get("device_timing") is not None or any(
        _on_gpu(v) for v in (kwargs.get("globals") or {}).values())
    return Needs(cpus=timer.task_spec.num_threads, gpus=1 if gpu else 0)


def slot_dir() -> str:
    """The host-wide directory of core and GPU lock files."""
    path = os.environ.get(SLOT_DIR_VAR) or os.path.join(
        tempfile.gettempdir(), f"opbench-slots-{os.getuid() if hasattr(os, 'getuid') else 0}")
    os.makedirs(path, exist_ok=True)
    return path


# Where Linux describes which logical CPUs share a physical core.
_SYSFS_CPU = "/sys/devices/system/cpu"


def _cpu_list(text: str) -> list[int]:
    """``0-3,8`` -> [0, 1, 2, 3, 8] (the kernel's CPU list format)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def _cores(allowed: list[int]) -> list[list[int]]:
    """The physical cores among ``allowed``, each as its allowed logical CPUs (its
    hyperthread siblings), lowest first; a CPU whose topology is unknown is a core."""
    cores: dict[int, list[int]] = {}
    for cpu in allowed:
        try:
            with open(f"{_SYSFS_CPU}/cpu{cpu}/topology/thread_siblings_list") as f:
                leader = min(_cpu_list(f.read()) or [cpu])
        except (OSError, ValueError):
            leader = cpu
        cores.setdefault(leader, []).append(cpu)
    return [cores[k] for k in sorted(cores)]


def _allowed_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def visible_gpus() -> list[str]:
    """Physical ids of the GPUs this process may use: CUDA_VISIBLE_DEVICES (set by Ray,
    dask-cuda, schedulers), else every GPU the NVIDIA driver lists; none without it."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    try:
        return [str(i) for i in range(len(os.listdir("/proc/driver/nvidia/gpus")))]
    except OSError:
        return []


class _Claim:
    """Exclusive flocks on lock files, all or nothing."""

    def __init__(self, directory: str) -> None:
        self._dir = directory
        self._fds: list[int] = []

    def take(self, names: list[str], count: int) -> list[str]:
        """Locks ``count`` of ``names`` (the first free ones); [] and nothing held if
        fewer are free."""
        taken: list[str] = []
        for name in names:
            if len(taken) == count:
                break
            fd = os.open(os.path.join(self._dir, f"{name}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self._fds.append(fd)
            taken.append(name)
        if len(taken) < count:
            self.release()
            return []
        return taken

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)  # closing drops the flock
        self._fds = []


def _pin(cpus: list[int]) -> set[int] | None:
    """Pins the calling thread to ``cpus``; returns the affinity to restore, or None
    where the OS cannot pin."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)  # pid 0: the calling thread, on Linux
    except OSError:
        return None
    return before


@contextlib.contextmanager
def reserve(needs: Needs) -> Iterator[dict[str, Any]]:
    """Holds a slot for ``needs`` alone, pinned, for the duration of the block.

    Yields the slot as facts for the results: ``cpus`` (the logical CPUs the thread
    is pinned to, one per physical core), ``core_cpus`` (each claimed core's logical
    CPUs, its hyperthread siblings, all held), ``gpu``
    (physical id or None), ``pinned`` (whether the thread is pinned) and
    ``waited_s`` (time spent waiting for taken cores).

    Raises:
        PlacementError: the process may use fewer cores (or GPUs) than needed,
            so waiting would never end.
    """
    allowed = _allowed_cpus()
    # Hyperthread siblings share a core's execution units: a core is claimed whole
    # (its lock is named after its lowest logical CPU) and the thread pinned to one
    # of its logical CPUs, so two measurements never share a physical core.
    cores = _cores(allowed)
    by_lock = {f"cpu{core[0]}": core for core in cores}
    gpus = visible_gpus() if needs.gpus else []
    if needs.cpus > len(cores) or needs.gpus > len(gpus):
        raise PlacementError(
            f"the measurement needs {needs.cpus} core(s) and {needs.gpus} GPU(s); this worker "
            f"process may use {len(cores)} physical core(s) (logical CPUs {allowed}) and "
            f"GPUs {gpus}. Give the worker more, or lower the Timer's num_threads.")
    waited = 0.0
    with _PROCESS_LOCK:
        claim = _Claim(slot_dir())
        try:
            while True:
                cpus = claim.take(list(by_lock), needs.cpus)
                gpu = claim.take([f"gpu{g}" for g in gpus], needs.gpus) if cpus else []
                if cpus and len(gpu) == needs.gpus:
                    break
                claim.release()
                start = time.monotonic()
                time.sleep(_POLL_S)
                waited += time.monotonic() - start
            ids = [by_lock[c][0] for c in cpus]
            restore = _pin(ids)
            try:
                yield {"cpus": ids, "core_cpus": [by_lock[c] for c in cpus],
                       "gpu": gpu[0][3:] if gpu else None,
                       "pinned": restore is not None,
                       "waited_s": round(waited, 6)}
            finally:
                if restore is not None:
                    os.sched_setaffinity(0, restore)
        finally:
            claim.release()
