"""opbench's own pool of worker processes on this machine (``executor="processes"``):
one per core this process may use; a task is dispatched when its cores are free."""
from __future__ import annotations

import collections
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_connections
from typing import Any

from opbench.sweep import placement
from opbench.sweep.executors.base import _Executor, _placement_problem
from opbench.sweep.executors.probe import _pool_environment
from opbench.sweep.executors.task import Task, _lost, run_task


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
        code = ("from opbench.sweep.executors.local import _child_main; "
                f"_child_main({from_driver}, {to_driver})")
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
