"""Executors: where the tasks of a distributed sweep run (``run_all(executor=...)``).

A task is one Timer and the method to call on it, sent as bytes (the Timer
travels by its constructor arguments, ``Timer.__reduce__``) with the slot it
needs (``opbench.sweep.placement.Needs``). On the worker, ``run_task`` reserves
that slot, rebuilds the Timer, measures, and returns the result with the
worker's environment; an exception in the task comes back as an error
outcome, never as a lost worker. Three executors run tasks:

* ``"processes"``: opbench's own pool of worker processes on this machine,
  one per core it may use; a task is dispatched when its cores are free;
* a Dask ``distributed.Client`` (or a scheduler address ``"tcp://HOST:PORT"``):
  tasks ask for Dask worker resources ``CPU`` (and ``GPU``), which workers
  must declare (``dask worker ADDRESS --nthreads 1 --resources CPU=1``);
* ``"ray"`` (or ``"ray://HOST:PORT"``): Ray tasks with ``num_cpus`` /
  ``num_gpus``; the running Ray, else ``ray.init()``.

Each reports a finished task as an outcome dict: ``status`` is ``"ok"``
(``value``), ``"error"`` (``error``, ``traceback``) or ``"lost"`` (the worker
died running it; ``error`` says how), with ``worker`` and ``environment``.
Neither Dask nor Ray is imported until a sweep uses it.

Example:
    >>> import pickle
    >>> import opbench
    >>> from opbench.sweep.executors import run_task
    >>> payload = pickle.dumps((opbench.Timer("1 + 1"), "timeit", {"number": 10}))
    >>> run_task(payload, (1, 0))["value"].number_per_run
    10
"""
from __future__ import annotations

import collections
import dataclasses
import importlib
import io
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import traceback
import types
import uuid
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_connections
from typing import Any

from opbench import environment
from opbench.errors import PlacementError, SchedulerUnreachableError, SerializationError
from opbench.sweep import placement
from opbench.sweep.placement import Needs

__all__ = ["Task", "connect", "is_allocator_variable", "run_task", "serialize",
           "timing_variables", "worker_environment", "worker_id"]

# Seconds to wait for a Dask scheduler given by address before giving up.
CONNECT_TIMEOUT_S = 10.0
# Seconds to wait for a first worker to join a cluster that has none.
WORKERS_WAIT_S = 30.0
# Seconds a cluster may go without a scheduler connection, or without any
# worker able to run the waiting tasks, before the sweep stops with an error.
LOST_GRACE_S = 60.0


@dataclasses.dataclass
class Task:
    """One measurement to run: ``timers[index]``, sent as ``payload``."""

    index: int
    title: str
    payload: bytes
    needs: Needs
    attempts: int = 0  # submissions so far
    avoid: str | None = None  # the worker that died running it


# -- sending timers -----------------------------------------------------------

def _pickler() -> type[pickle.Pickler]:
    """cloudpickle's pickler where installed (lambdas, closures, __main__ functions by
    value; Dask and Ray both bring it), else pickle's, taught to send modules by name."""
    try:
        from cloudpickle import CloudPickler  # type: ignore[import-untyped]

        return CloudPickler  # type: ignore[no-any-return]
    except ImportError:
        pass

    class _ModulesByName(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, types.ModuleType):
                return importlib.import_module, (obj.__name__,)
            return NotImplemented

    return _ModulesByName


def _dumps(value: Any, pickler: type[pickle.Pickler]) -> bytes:
    buffer = io.BytesIO()
    pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def _culprit(timer: Any, kwargs: dict[str, Any], pickler: type[pickle.Pickler]) -> str:
    """Names the first argument (a global by name) that does not serialize, and why."""
    arguments = dict(timer.kwargs)
    candidates = [(f"global {name!r}", value)
                  for name, value in (arguments.pop("globals", None) or {}).items()]
    candidates += [(f"argument {name}=", value) for name, value in arguments.items()]
    candidates += [(f"run_all keyword {name}=", value) for name, value in kwargs.items()]
    for what, value in candidates:
        try:
            _dumps(value, pickler)
        except Exception as e:
            return f"{what} (of type {type(value).__name__}) does not serialize: " \
                   f"{type(e).__name__}: {e}"
    return "it does not serialize"


def serialize(timer: Any, method: str, kwargs: dict[str, Any], index: int) -> bytes:
    """``(timer, method, kwargs)`` as bytes for a worker.

    Raises:
        SerializationError: naming the timer and the global (or argument) that
            cannot be sent, before anything is submitted.
    """
    pickler = _pickler()
    try:
        return _dumps((timer, method, kwargs), pickler)
    except Exception as e:
        hint = "" if pickler.__module__.startswith("cloudpickle") else \
            " (install cloudpickle to send lambdas and closures)"
        raise SerializationError(
            f"timers[{index}] cannot be sent to a worker: {_culprit(timer, kwargs, pickler)}. "
            f"Create it in `setup` instead, or pass a picklable value{hint}."
        ) from e


# -- on the worker ------------------------------------------------------------

def _read_first_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().strip() or None
    except OSError:
        return None


def _gpu_facts() -> dict[str, Any]:
    """The NVIDIA driver and GPU models, from the driver's /proc files (no library
    loaded, nothing imported); None where there is no NVIDIA driver."""
    driver = _read_first_line("/proc/driver/nvidia/version")
    models = []
    try:
        for gpu in sorted(os.listdir("/proc/driver/nvidia/gpus")):
            with open(f"/proc/driver/nvidia/gpus/{gpu}/information", encoding="utf-8") as f:
                models += [line.split(":", 1)[1].strip() for line in f
                           if line.startswith("Model:")]
    except OSError:
        pass
    return {"gpu_driver": driver, "gpus": models or None}


def worker_id() -> str:
    """``host:pid`` of this process: which worker ran a task."""
    return f"{socket.gethostname()}:{os.getpid()}"


# Environment variables that change how timed code runs whatever the Timer says:
# the allocator (Dask's nanny gives its workers MALLOC_TRIM_THRESHOLD_=65536, which
# hands memory back to the OS on every large free) and the thread pools of OpenMP,
# MKL and OpenBLAS (numpy's, which Timer's num_threads does not set).
_TIMING_VARIABLE_PREFIXES = ("MALLOC_", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_")
_TIMING_VARIABLES = ("PYTHONMALLOC", "LD_PRELOAD")
# Those that set up the memory allocator: a worker whose differ from the driver's
# times every allocating statement differently (the Timer cannot undo it).
_ALLOCATOR_VARIABLES = ("MALLOC_", "PYTHONMALLOC", "LD_PRELOAD")


def _environment_at_start() -> dict[str, str]:
    """The environment this process started with, which is what the allocator and the
    thread pools read: later changes to os.environ do not reach them (and a Dask
    LocalCluster's nanny changes the driver's own os.environ before it spawns workers)."""
    try:
        with open("/proc/self/environ", "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return dict(os.environ)
    pairs = (e.decode(errors="replace").partition("=") for e in entries if b"=" in e)
    return {k: v for k, _, v in pairs}


def timing_variables() -> dict[str, str]:
    """The environment variables this process started with that change how timed code
    runs (allocator, thread pools)."""
    return {k: v for k, v in sorted(_environment_at_start().items()) if _is_timing_variable(k)}


def _is_timing_variable(name: str) -> bool:
    return name.startswith(_TIMING_VARIABLE_PREFIXES) or name in _TIMING_VARIABLES


def is_allocator_variable(name: str) -> bool:
    """Whether ``name`` sets up the memory allocator (glibc's MALLOC_*, PYTHONMALLOC,
    an LD_PRELOAD of jemalloc or tcmalloc)."""
    return name.startswith(_ALLOCATOR_VARIABLES)


def _pool_environment() -> dict[str, str]:
    """os.environ for a pool worker, with this process's timing variables as it started
    (so the worker's allocator and thread pools are set up as this process's are)."""
    env = {k: v for k, v in os.environ.items() if not _is_timing_variable(k)}
    env.update(timing_variables())
    return env


def worker_environment(slot: dict[str, Any] | None) -> dict[str, Any]:
    """``environment.collect()`` plus the GPU driver and models, the variables that
    change timings (``timing_variables``), the worker and its slot."""
    env = environment.collect()
    env.update(_gpu_facts())
    env["variables"] = timing_variables()
    env["worker"] = worker_id()
    env["slot"] = slot
    return env


def run_task(payload: bytes, needs: tuple[int, int]) -> dict[str, Any]:
    """Runs one task on the worker, alone in its slot: the outcome dict."""
    slot = None
    try:
        with placement.reserve(Needs(*needs)) as slot:
            timer, method, kwargs = pickle.loads(payload)
            value = getattr(timer, method)(**kwargs)
    except Exception as e:
        return {"status": "error", "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(), "worker": worker_id(),
                "environment": worker_environment(slot)}
    return {"status": "ok", "value": value, "worker": worker_id(),
            "environment": worker_environment(slot)}


def _lost(worker: str | None, reason: str) -> dict[str, Any]:
    return {"status": "lost", "error": reason, "worker": worker, "traceback": None,
            "environment": None}


# -- executors ----------------------------------------------------------------

class _Executor:
    """What the sweep driver needs from a cluster."""

    name = "executor"
    _unusable_since: float | None = None
    _last_check = 0.0

    def prepare(self, tasks: list[Task]) -> None:
        """Raises PlacementError (or SchedulerUnreachableError) before anything is
        submitted when some task can never run."""

    def submit(self, task: Task) -> None:
        raise NotImplementedError

    def wait(self, timeout: float) -> list[tuple[Task, dict[str, Any]]]:
        """The tasks that finished within ``timeout`` seconds, with their outcomes."""
        raise NotImplementedError

    def _usable(self) -> bool:
        """Whether the cluster can still run every waiting task."""
        return True

    def _lost(self) -> str:
        return "the cluster cannot run the remaining tasks"

    def check(self) -> None:
        """Raises SchedulerUnreachableError once the cluster has been unusable for
        LOST_GRACE_S (a sweep never hangs on a cluster that went away)."""
        now = time.monotonic()
        if now - self._last_check < 2.0:
            return
        self._last_check = now
        if self._usable():
            self._unusable_since = None
            return
        self._unusable_since = self._unusable_since or now
        if now - self._unusable_since > LOST_GRACE_S:
            raise SchedulerUnreachableError(f"for {LOST_GRACE_S:g} s {self._lost()}")

    def close(self, cancel: bool) -> None:
        """Releases the cluster; ``cancel`` stops tasks still running."""


def _placement_problem(needs: set[Needs], offers: Sequence[Mapping[str, float]],
                       how: str) -> None:
    for need in sorted(needs, key=dataclasses.astuple):
        if not any(need.fit(offer) for offer in offers):
            raise PlacementError(
                f"no worker can give a measurement {need.cpus} core(s) and {need.gpus} GPU(s) "
                f"to itself: the workers offer {offers or 'nothing (no workers)'}. {how}")


def _check_reachable(address: str, problem: str, how: str) -> None:
    """Raises SchedulerUnreachableError unless ``[scheme://]HOST:PORT`` accepts a TCP
    connection within CONNECT_TIMEOUT_S."""
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as e:
        raise SchedulerUnreachableError(f"{problem} ({e}). {how}") from None


# opbench's local pool: one process per core ----------------------------------

def _child_main(read_fd: int, write_fd: int) -> None:
    """A pool worker: receives sys.path, then tasks, until told to stop."""
    # Ctrl-C is the driver's to handle: it stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    sys.path[:] = inbox.recv()
    while True:
        try:
            message = inbox.recv()
        except EOFError:  # the driver is gone
            return
        if message is None:
            return
        outcome = run_task(*message)
        try:
            outbox.send(outcome)
        except Exception as e:
            outbox.send({**outcome, "status": "error", "value": None,
                         "error": f"the result cannot be sent back: {type(e).__name__}: {e}",
                         "traceback": traceback.format_exc()})


class _PoolWorker:
    def __init__(self) -> None:
        from_driver, to_child = os.pipe()
        from_child, to_driver = os.pipe()
        code = f"from opbench.sweep.executors import _child_main; _child_main({from_driver}, {to_driver})"
        self.process = subprocess.Popen([sys.executable, "-c", code],
                                        pass_fds=(from_driver, to_driver),
                                        stdin=subprocess.DEVNULL, env=_pool_environment())
        os.close(from_driver)
        os.close(to_driver)
        self.outbox = Connection(to_child, readable=False)
        self.inbox = Connection(from_child, writable=False)
        self.outbox.send(list(sys.path))
        self.task: Task | None = None

    @property
    def id(self) -> str:
        return f"{socket.gethostname()}:{self.process.pid}"

    def death(self) -> str:
        code = self.process.wait()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return f"its worker process died running it ({how})"

    def stop(self, kill: bool) -> None:
        try:
            if not kill:
                self.outbox.send(None)
        except OSError:
            pass
        if kill:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.inbox.close()
        self.outbox.close()


class _Processes(_Executor):
    """opbench's pool: one worker process per core this process may use; a task is
    dispatched when a worker is idle and its cores are free."""

    name = "processes"

    def __init__(self) -> None:
        self._cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else (os.cpu_count() or 1)
        self._workers: list[_PoolWorker | None] = [None] * self._cores
        self._queue: collections.deque[Task] = collections.deque()
        self._busy_cores = 0

    def prepare(self, tasks: list[Task]) -> None:
        offers = [{"CPU": self._cores, "GPU": len(placement.visible_gpus())}]
        _placement_problem({t.needs for t in tasks}, offers,
                           "Lower the Timers' num_threads, or use a cluster executor.")

    def submit(self, task: Task) -> None:
        self._queue.append(task)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._queue and self._busy_cores + self._queue[0].needs.cpus <= self._cores:
            task = self._queue[0]
            idle = [i for i, w in enumerate(self._workers) if w is None or w.task is None]
            # A retried task goes to another worker than the one that died.
            idle.sort(key=lambda i: self._workers[i] is not None
                      and self._workers[i].id == task.avoid)  # type: ignore[union-attr]
            if not idle:
                return
            worker = self._workers[idle[0]]
            if worker is None:
                worker = self._workers[idle[0]] = _PoolWorker()
            self._queue.popleft()
            worker.task = task
            worker.outbox.send((task.payload, dataclasses.astuple(task.needs)))
            self._busy_cores += task.needs.cpus

    def wait(self, timeout: float) -> list[tuple[Task, dict[str, Any]]]:
        busy = {w.inbox: (i, w) for i, w in enumerate(self._workers) if w and w.task}
        finished = []
        for inbox in wait_for_connections(list(busy), timeout):
            i, worker = busy[inbox]  # type: ignore[index]
            task, worker.task = worker.task, None
            self._busy_cores -= task.needs.cpus  # type: ignore[union-attr]
            try:
                outcome = worker.inbox.recv()
            except (EOFError, OSError):
                outcome = _lost(worker.id, worker.death())
                worker.stop(kill=True)
                self._workers[i] = None  # replaced by a fresh process when needed
            finished.append((task, outcome))
        self._dispatch()
        return finished  # type: ignore[return-value]

    def close(self, cancel: bool) -> None:
        for worker in self._workers:
            if worker is not None:
                worker.stop(kill=cancel)
        self._workers = [None] * self._cores


# Dask -------------------------------------------------------------------------

_DASK_HOW = ("Start workers with resources, one measurement each: `dask worker SCHEDULER "
             "--nthreads 1 --resources CPU=1` (GPU=1 for a GPU worker), or "
             "LocalCluster(threads_per_worker=1, resources={'CPU': 1}).")


class _Dask(_Executor):
    """Tasks on a Dask cluster. Each asks for its resources (``CPU``, ``GPU``), which
    the worker holds while it runs; and the driver keeps a ledger of what each worker
    holds, so a task is submitted only to a worker with its resources free. Nothing
    waits in a worker's queue, where a worker that dies would take it down with the
    task that killed it."""

    name = "dask"

    def __init__(self, client: Any, owned: bool) -> None:
        self._client = client
        self._owned = owned
        self._futures: dict[Any, tuple[Task, str]] = {}
        self._queue: list[Task] = []
        self._offers: dict[str, dict[str, float]] = {}
        self._held: dict[str, collections.Counter[str]] = {}
        self._token = uuid.uuid4().hex[:8]

    @classmethod
    def at(cls, address: str) -> _Dask:
        try:
            from distributed import Client
        except ImportError as e:
            raise ImportError("a Dask executor needs distributed: pip install 'opbench[dask]'") \
                from e
        problem = f"no Dask scheduler reachable at {address}"
        how = "Start one (`dask scheduler`) or fix the address."
        _check_reachable(address, problem, how)
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as e:
            raise SchedulerUnreachableError(f"{problem} ({e}). {how}") from None
        return cls(client, owned=True)

    def _address(self) -> str:
        client = self._client
        return str(getattr(client.scheduler, "address", None)
                   or (getattr(client, "_scheduler_identity", None) or {}).get("address")
                   or getattr(client.cluster, "scheduler_address", None) or client)

    def _refresh(self) -> None:
        """Reads the workers and their declared resources from the scheduler."""
        if self._client.status != "running":
            raise SchedulerUnreachableError(
                f"the Dask client is {self._client.status}, not connected to the scheduler at "
                f"{self._address()}: reconnect it (or create a new Client) and run again.")
        try:
            info = self._client.scheduler_info(n_workers=-1)  # every worker, not the first 5
        except TypeError:  # a distributed from before n_workers, which lists them all
            info = self._client.scheduler_info()
        self._offers = {address: dict(w.get("resources") or {})
                        for address, w in info["workers"].items()}

    def prepare(self, tasks: list[Task]) -> None:
        self._refresh()
        if not self._offers:  # starting, scaling up, or restarting after a crash
            try:
                self._client.wait_for_workers(1, timeout=WORKERS_WAIT_S)
            except TimeoutError:
                pass
            self._refresh()
        _placement_problem({t.needs for t in tasks}, list(self._offers.values()),
                           f"(Waited {WORKERS_WAIT_S:g} s for workers.) {_DASK_HOW}"
                           if not self._offers else _DASK_HOW)

    def _place(self, task: Task) -> str | None:
        """A worker with the task's resources free (another than the one it killed,
        where the cluster has one that could ever run it), or None."""
        able = [a for a, offer in self._offers.items() if task.needs.fit(offer)]
        if task.avoid and any(a != task.avoid for a in able):
            able = [a for a in able if a != task.avoid]
        free = [a for a in able if task.needs.fit(self._offers[a], self._held.get(a))]
        return min(free, key=lambda a: sum(self._held.get(a, {}).values()), default=None)

    def _dispatch(self) -> None:
        waiting = []
        for task in self._queue:
            worker = self._place(task)
            if worker is None:
                waiting.append(task)
                continue
            resources = task.needs.resources()
            self._held.setdefault(worker, collections.Counter()).update(resources)
            # Loosely bound to the worker: should it leave, the scheduler places the
            # task elsewhere rather than waiting for a worker that never returns.
            future = self._client.submit(
                run_task, task.payload, dataclasses.astuple(task.needs),
                key=f"opbench-{self._token}-{task.index}-{task.attempts}", pure=False,
                retries=0, resources=resources, workers=[worker], allow_other_workers=True)
            self._futures[future] = (task, worker)
        self._queue = waiting

    def submit(self, task: Task) -> None:
        self._queue.append(task)
        self._dispatch()

    def wait(self, timeout: float) -> list[tuple[Task, dict[str, Any]]]:
        from distributed import wait
        from distributed.scheduler import KilledWorker

        if not self._futures:
            time.sleep(timeout)
            return []
        try:
            done, _ = wait(list(self._futures), timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        finished = []
        for future in done:
            task, worker = self._futures.pop(future)
            self._held[worker].subtract(task.needs.resources())
            try:
                outcome = future.result()
            except KilledWorker as e:
                address = getattr(getattr(e, "last_worker", None), "address", worker)
                outcome = _lost(address, f"its Dask worker {address} died running it")
            except Exception as e:
                outcome = _lost(worker, f"{type(e).__name__}: {e}")
            # Held no longer: else a worker that dies later has the scheduler measure
            # it again, to restore a result already read.
            future.release()
            if outcome["status"] == "lost":
                self._refresh()  # a restarted worker comes back under a new address
            finished.append((task, outcome))
        self._dispatch()
        return finished

    def _usable(self) -> bool:
        try:
            self._refresh()  # workers that joined can take waiting tasks
        except SchedulerUnreachableError:
            return False
        self._dispatch()
        waiting = [t for t, _ in self._futures.values()] + self._queue
        return all(any(t.needs.fit(offer) for offer in self._offers.values()) for t in waiting)

    def _lost(self) -> str:
        return (f"the Dask scheduler at {self._address()} has been unreachable, or has had no "
                f"worker able to run the remaining tasks. {_DASK_HOW}")

    def close(self, cancel: bool) -> None:
        if cancel and self._futures and self._client.status == "running":
            self._client.cancel(list(self._futures), force=True)
        self._futures = {}
        self._queue = []
        if self._owned:
            self._client.close()


# Ray --------------------------------------------------------------------------

class _Ray(_Executor):
    name = "ray"

    def __init__(self, address: str | None) -> None:
        try:
            import ray
        except ImportError as e:
            raise ImportError("executor='ray' needs Ray: pip install 'opbench[ray]'") from e
        self._ray = ray
        if not ray.is_initialized():
            where = address or os.environ.get("RAY_ADDRESS") or None
            how = "Start one (`ray start --head`) or fix the address."
            if where not in (None, "auto", "local"):
                # Ray itself retries an absent head for minutes.
                _check_reachable(where, f"no Ray cluster reachable at {where}", how)
            try:
                ray.init(address=where, log_to_driver=False)
            except (ConnectionError, RuntimeError, TimeoutError) as e:
                raise SchedulerUnreachableError(
                    f"no Ray cluster reachable at {where or 'a new local instance'} ({e}). "
                    + how) from None
        self._remote = ray.remote(run_task)
        self._refs: dict[Any, Task] = {}

    def prepare(self, tasks: list[Task]) -> None:
        _placement_problem({t.needs for t in tasks}, self._offers(),
                           "Add nodes with those resources, or lower the Timers' num_threads.")

    def _offers(self) -> list[dict[str, float]]:
        return [{k: v for k, v in n["Resources"].items() if k in ("CPU", "GPU")}
                for n in self._ray.nodes() if n.get("Alive")]

    def _usable(self) -> bool:
        if not self._ray.is_initialized():
            return False
        offers = self._offers()
        return all(any(t.needs.fit(offer) for offer in offers) for t in self._refs.values())

    def _lost(self) -> str:
        return ("the Ray cluster has been gone, or has had no node able to run the remaining "
                "tasks (their CPUs and GPUs).")

    def submit(self, task: Task) -> None:
        ref = self._remote.options(num_cpus=task.needs.cpus, num_gpus=task.needs.gpus,
                                   max_retries=0, retry_exceptions=False).remote(
            task.payload, dataclasses.astuple(task.needs))
        self._refs[ref] = task

    def wait(self, timeout: float) -> list[tuple[Task, dict[str, Any]]]:
        ray = self._ray
        if not self._refs:
            return []
        ready, _ = ray.wait(list(self._refs), num_returns=len(self._refs), timeout=timeout)
        finished = []
        for ref in ready:
            task = self._refs.pop(ref)
            try:
                outcome = ray.get(ref)
            except ray.exceptions.RayTaskError as e:  # raised outside run_task's guard
                outcome = {"status": "error", "error": str(e).splitlines()[-1], "worker": None,
                           "traceback": str(e), "environment": None}
            except ray.exceptions.RayError as e:  # the worker or its node died
                outcome = _lost(None, f"its Ray worker died running it ({type(e).__name__}: "
                                      f"{str(e).splitlines()[0]})")
            finished.append((task, outcome))
        return finished

    def close(self, cancel: bool) -> None:
        if cancel:
            for ref in self._refs:
                self._ray.cancel(ref, force=True)
        self._refs = {}


def _is_dask_client(value: Any) -> bool:
    cls = type(value)
    return cls.__module__.split(".")[0] == "distributed" and hasattr(value, "submit")


def connect(executor: Any) -> _Executor:
    """The executor for ``run_all(executor=...)``.

    Raises:
        ValueError: an executor opbench does not know.
        SchedulerUnreachableError: a scheduler address that does not answer.
        ImportError: Dask or Ray asked for but not installed.
    """
    if executor == "processes":
        return _Processes()
    if _is_dask_client(executor):
        return _Dask(executor, owned=False)
    if isinstance(executor, str) and executor.startswith(("tcp://", "tls://", "dask://")):
        return _Dask.at(executor.replace("dask://", "tcp://", 1))
    if isinstance(executor, str) and (executor == "ray" or executor.startswith("ray://")):
        return _Ray(None if executor == "ray" else executor)
    raise ValueError(
        f"executor must be None (this process), 'processes', a distributed.Client, a Dask "
        f"scheduler address ('tcp://HOST:PORT'), 'ray' or 'ray://HOST:PORT'; got {executor!r}")
