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

One module per concern: ``task`` (what is sent, and ``run_task`` on the
worker), ``probe`` (the worker's facts and timing variables), ``base`` (the
``_Executor`` protocol and its checks), ``local``, ``dask``, ``ray``.

Example:
    >>> import pickle
    >>> import opbench
    >>> from opbench.sweep.executors import run_task
    >>> payload = pickle.dumps((opbench.Timer("1 + 1"), "timeit", {"number": 10}))
    >>> run_task(payload, (1, 0))["value"].number_per_run
    10
"""
from __future__ import annotations

from typing import Any

from opbench.sweep.executors.base import _Executor
from opbench.sweep.executors.probe import (
    is_allocator_variable,
    timing_variables,
    worker_environment,
    worker_id,
)
from opbench.sweep.executors.task import Task, run_task, serialize

__all__ = ["Task", "connect", "is_allocator_variable", "run_task", "serialize",
           "timing_variables", "worker_environment", "worker_id"]


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
        from opbench.sweep.executors.local import _Processes

        return _Processes()
    if _is_dask_client(executor):
        from opbench.sweep.executors.dask import _Dask

        return _Dask(executor, owned=False)
    if isinstance(executor, str) and executor.startswith(("tcp://", "tls://", "dask://")):
        from opbench.sweep.executors.dask import _Dask

        return _Dask.at(executor.replace("dask://", "tcp://", 1))
    if isinstance(executor, str) and (executor == "ray" or executor.startswith("ray://")):
        from opbench.sweep.executors.ray import _Ray

        return _Ray(None if executor == "ray" else executor)
    raise ValueError(
        f"executor must be None (this process), 'processes', a distributed.Client, a Dask "
        f"scheduler address ('tcp://HOST:PORT'), 'ray' or 'ray://HOST:PORT'; got {executor!r}")
