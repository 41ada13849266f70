"""Sweeps on a Dask cluster: a ``distributed.Client`` or a scheduler address
(``"tcp://HOST:PORT"``). Tasks ask for Dask worker resources ``CPU`` (and ``GPU``),
which workers must declare (``dask worker ADDRESS --nthreads 1 --resources CPU=1``).
distributed is imported when a sweep uses it."""
from __future__ import annotations

import collections
import dataclasses
import time
import uuid
from typing import Any

from opbench.errors import SchedulerUnreachableError
from opbench.sweep.executors import base
from opbench.sweep.executors.base import _check_reachable, _Executor, _placement_problem
from opbench.sweep.executors.task import Task, _lost, run_task

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
            client = Client(address, timeout=base.CONNECT_TIMEOUT_S)
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
                self._client.wait_for_workers(1, timeout=base.WORKERS_WAIT_S)
            except TimeoutError:
                pass
            self._refresh()
        _placement_problem({t.needs for t in tasks}, list(self._offers.values()),
                           f"(Waited {base.WORKERS_WAIT_S:g} s for workers.) {_DASK_HOW}"
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
