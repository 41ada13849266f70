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
  (and per GPU) in a directory shared by every opbench process of the user on
  the host (``$OPBENCH_SLOT_DIR``, default ``$XDG_RUNTIME_DIR/opbench-slots`` or
  ``<tmp>/opbench-slots-<uid>``, made 0700 and refused when another user owns
  it; lock files are never opened through a link): two workers of one host
  never measure on the same core, whatever each was told; the kernel drops a
  dead process's locks, so a crash never leaves a core claimed;
* it pins the measuring thread to those cores (``os.sched_setaffinity``,
  Linux; elsewhere unpinned, and the slot says so); threads the
  measurement starts inherit the pinning;
* it holds a lock of the process, so one process measures one thing at a time.

If the cores are taken (a cluster that declared more cores than it has),
``reserve`` waits for them, and the slot records how long it waited; after
``$OPBENCH_SLOT_TIMEOUT`` seconds (600) it gives up with a ``PlacementError``
that names the lock files and the processes holding them.

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

from opbench._ownership import private_folder
from opbench.errors import PlacementError, UntrustedPathError

__all__ = ["Needs", "needs_of", "reserve", "slot_dir", "visible_gpus"]

SLOT_DIR_VAR = "OPBENCH_SLOT_DIR"
TIMEOUT_VAR = "OPBENCH_SLOT_TIMEOUT"
# How often a task waiting for taken cores looks again, and for how long at most: a
# measurement holds its cores for seconds, not ten minutes.
_POLL_S = 0.005
_WAIT_S = 600.0
# The wait's clock and pause, module attributes so that tests replace them and wait
# without time passing.
_monotonic = time.monotonic
_sleep = time.sleep

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
    """The host-wide directory of core and GPU lock files: ``$OPBENCH_SLOT_DIR`` as given
    (a folder the user chose, shared on purpose), else a folder of the user's own,
    ``$XDG_RUNTIME_DIR/opbench-slots`` or ``<tmp>/opbench-slots-<uid>``, made with mode
    0700 and refused when another user made it first (whoever can write it can hold
    its locks, and every sweep would wait on them).

    Raises:
        UntrustedPathError: the default folder is another user's or writable by others.
    """
    chosen = os.environ.get(SLOT_DIR_VAR)
    if chosen:
        os.makedirs(chosen, exist_ok=True)
        return chosen
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    path = (os.path.join(runtime, "opbench-slots") if runtime else os.path.join(
        tempfile.gettempdir(), f"opbench-slots-{os.getuid() if hasattr(os, 'getuid') else 0}"))
    return str(private_folder(path, what="take the sweep's core locks in",
                              fix=f"Set ${SLOT_DIR_VAR} to a folder of your own."))


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
        self.busy: set[str] = set()  # lock files found held, for a timeout's message

    def path(self, name: str) -> str:
        return os.path.join(self._dir, f"{name}.lock")

    def take(self, names: list[str], count: int) -> list[str]:
        """Locks ``count`` of ``names`` (the first free ones); [] and nothing held if
        fewer are free.

        Raises:
            UntrustedPathError: a lock file is a symbolic link (never followed: it could
                point at any file of the user's).
        """
        taken: list[str] = []
        for name in names:
            if len(taken) == count:
                break
            try:
                fd = os.open(self.path(name), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            except OSError:
                if os.path.islink(self.path(name)):
                    raise UntrustedPathError(
                        f"{self.path(name)}: it is a symbolic link, not one of opbench's lock "
                        "files: remove it (it is not followed)") from None
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                self.busy.add(self.path(name))
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


def _timeout() -> float:
    """Seconds ``reserve`` waits for taken cores: ``$OPBENCH_SLOT_TIMEOUT``, else
    ``_WAIT_S``."""
    text = os.environ.get(TIMEOUT_VAR)
    try:
        return float(text) if text else _WAIT_S
    except ValueError:
        raise PlacementError(f"${TIMEOUT_VAR} must be a number of seconds, got {text!r}") \
            from None


def _holders() -> dict[tuple[int, int], int]:
    """(device, inode) -> pid of each flock held on the host (``/proc/locks``; empty
    where it cannot be read)."""
    found = {}
    try:
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[3] == "WRITE":
                    major, minor, inode = fields[5].split(":")
                    found[(os.makedev(int(major, 16), int(minor, 16)), int(inode))] = \
                        int(fields[4])
    except (OSError, ValueError):
        pass
    return found


def _waited_too_long(busy: set[str], waited: float, needs: Needs) -> str:
    holders, named = _holders(), []
    for path in sorted(busy):
        try:
            st = os.stat(path)
            pid = holders.get((st.st_dev, st.st_ino))
        except OSError:
            pid = None
        named.append(path + (f" (held by process {pid})" if pid else " (held)"))
    return (f"waited {waited:.1f} s for {needs.cpus} core(s) and {needs.gpus} GPU(s): the "
            f"lock files {', '.join(named)} stayed held by other measurements (one that "
            "never ends, or a process of another user's). Stop it, or set "
            f"${TIMEOUT_VAR} to wait longer.")


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
            so waiting would never end; or the cores stayed taken for
            ``$OPBENCH_SLOT_TIMEOUT`` seconds (default 600): the message names
            the lock files and the processes holding them.
        UntrustedPathError: the slot folder, or a lock file in it, is not the
            user's own (``slot_dir``).
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
    waited, limit = 0.0, _timeout()
    with _PROCESS_LOCK:
        claim = _Claim(slot_dir())
        try:
            while True:
                cpus = claim.take(list(by_lock), needs.cpus)
                gpu = claim.take([f"gpu{g}" for g in gpus], needs.gpus) if cpus else []
                if cpus and len(gpu) == needs.gpus:
                    break
                claim.release()
                if waited >= limit:
                    raise PlacementError(_waited_too_long(claim.busy, waited, needs))
                start = _monotonic()
                _sleep(_POLL_S)
                waited += _monotonic() - start
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
