"""Sweeps on Ray (``executor="ray"`` or ``"ray://HOST:PORT"``): Ray tasks with
``num_cpus`` / ``num_gpus``, on the running Ray, else ``ray.init()``. Ray is
imported when a sweep uses it."""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from opbench.errors import SchedulerUnreachableError
from opbench.sweep.executors.base import _check_reachable, _Executor, _placement_problem
from opbench.sweep.executors.task import Task, _lost, run_task


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
