"""Sweeps: many Timers measured in this process or on a cluster, every result kept.

``run_all(timers, method, executor=..., results_path=..., resume=...)`` calls
``method`` on every Timer and returns the results in the order of ``timers``,
with a progress bar (counting finished tasks, with time left).

* ``executor=None`` runs them here, one after another, as before: an
  exception from a Timer reaches the caller as itself.
* ``"processes"``, a Dask ``distributed.Client`` (or ``"tcp://HOST:PORT"``),
  or ``"ray"`` (``"ray://HOST:PORT"``) send each Timer (by its constructor
  arguments) to a worker, where it runs alone in a slot of its own
  (``opbench.sweep.placement``: its cores, pinned; one GPU when it times on one).
  Everything is serialized before anything is submitted, so a global that
  cannot be sent is refused up front, by name (``SerializationError``). A
  task that raises is reported and the sweep goes on; a task whose worker
  dies is retried once on another worker, then reported. When tasks failed,
  ``run_all`` raises ``SweepError`` at the end, carrying every result
  (``.results``, None where a task failed) and ``.failures``.
  Each result carries its worker's environment in ``info["environment"]``
  (host, CPU model, governor, torch, GPUs and driver, the cores it held),
  and a Timer given no ``env`` gets the worker's host name as its env, so
  ``Compare`` shows one block of rows per host.
* ``results_path`` streams each result into one file as it arrives
  (``opbench.store.sweep_file``; ``opbench.load`` and ``python -m opbench show``
  read it); ``resume=True`` skips the tasks the file already holds, so a
  sweep stopped by a crash or Ctrl-C goes on where it stopped.

The package also holds ``placement`` (which cores a task gets) and ``executors`` (a local
process pool, Dask, Ray).

Floor: sweep; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).

Example:
    >>> import opbench
    >>> timers = [opbench.Timer(f"sum(range({n}))") for n in (10, 100)]
    >>> [m.number_per_run for m in opbench.run_all(timers, "timeit", number=100, progress=False)]
    [100, 100]
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Iterable
from typing import IO, Any, NoReturn

from opbench.core import identity, recovery
from opbench.core.measurement import Measurement
from opbench.errors import MachineWarning, SweepError, WarningRecord, attach, warn
from opbench.progress import Progress
from opbench.store import results as _results
from opbench.store.sweep_file import SweepWriter, jsonish
from opbench.sweep import executors, placement

__all__ = ["TaskFailure", "run_all", "task_keys"]

# Timer methods that produce results and may be run in a sweep.
_METHODS = frozenset(
    {"timeit", "repeat", "autorange", "blocked_autorange", "adaptive_autorange",
     "collect_callgrind"}
)
# Tries per task when its worker dies: the first, and one retry.
_TRIES = 2
# How long the driver waits for results before looking at the cluster's health.
_WAIT_S = 0.2


@dataclasses.dataclass
class TaskFailure:
    """A task of a sweep that produced no result."""

    index: int
    title: str
    error: str  # one line: "ZeroDivisionError: division by zero", or how the worker died
    traceback: str | None
    worker: str | None  # where it failed last
    attempts: int
    environment: dict[str, Any] | None = None

    def __str__(self) -> str:
        where = f" on {self.worker}" if self.worker else ""
        tries = f", after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"timers[{self.index}] ({self.title}): {self.error}{where}{tries}"


def _title(timer: Any) -> str:
    spec = getattr(timer, "task_spec", None)
    if spec is None:
        return type(timer).__name__
    parts = [spec.title.splitlines()[0]]
    parts += [p for p in (spec.description, spec.env) if p]
    return " | ".join(parts)


def task_keys(timers: list[Any]) -> list[str]:
    """Each timer's key in a results file (``opbench.core.identity.sweep_keys``: its TaskSpec,
    timing settings and globals' identity)."""
    return identity.sweep_keys(timers)


def _check(timers: list[Any], method: str, executor: Any, results_path: Any,
           resume: bool) -> None:
    if method not in _METHODS:
        raise ValueError(f"method must be one of {sorted(_METHODS)}, got {method!r}")
    for i, t in enumerate(timers):
        if not callable(getattr(t, method, None)):
            raise TypeError(f"timers[{i}] ({type(t).__name__}) has no method {method!r}; "
                            "pass opbench.Timer objects")
        if (executor is not None or results_path is not None) and not (
                hasattr(t, "kwargs") and hasattr(t, "task_spec")):
            raise TypeError(f"timers[{i}] ({type(t).__name__}) is not an opbench.Timer: a "
                            "sweep on an executor or into a results file needs Timers")
    if resume and results_path is None:
        raise ValueError("resume=True needs results_path: the file whose results to skip")
    if results_path is not None and method == "collect_callgrind":
        raise ValueError("a results file holds Measurements; collect_callgrind returns "
                         "CallgrindStats: run it without results_path")


def _variables_warning(variables: dict[str, str]) -> WarningRecord | None:
    """Warns (once per difference) that a worker's memory allocator was set up otherwise
    than this process's; returns the record to keep on the result, or None."""
    here = executors.timing_variables()
    differ = sorted(k for k in here.keys() | variables.keys()
                    if executors.is_allocator_variable(k) and here.get(k) != variables.get(k))
    if not differ:
        return None
    listed = ", ".join(f"{k}={variables.get(k, '(unset)')} (here {here.get(k, 'unset')})"
                       for k in differ)
    fix = (" Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 for its workers, which slows "
           "every statement that allocates more than 64 KiB: start the cluster under "
           "dask.config.set({'distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_': None})."
           if "MALLOC_TRIM_THRESHOLD_" in differ else "")
    return warn(MachineWarning,
                f"measured on a worker whose memory allocator is set up otherwise than this "
                f"process's: {listed}; its figures may not match one measured here.{fix}",
                once=f"worker:{listed}")


def _received(value: Any, environment: dict[str, Any] | None, on_worker: bool) -> Any:
    """A result as the caller gets it: with its environment in info, and for a worker's,
    the worker's host as env when the Timer gave none, and a warning when the worker's
    timing variables differ from this process's."""
    if not isinstance(value, Measurement) or environment is None:
        return value
    spec, info = value.task_spec, {**value.info, "environment": environment}
    if on_worker:
        if spec.env is None and environment.get("hostname"):
            spec = dataclasses.replace(spec, env=environment["hostname"])
        record = _variables_warning(environment.get("variables") or {})
        if record is not None:
            info["warnings"] = list(info.get("warnings", []))
            attach(info, record)
    return dataclasses.replace(value, task_spec=spec, info=info)


def _document(m: Measurement, environment: dict[str, Any]) -> dict[str, Any]:
    """``m`` as a results document measured in ``environment`` (kept there, not in info)."""
    stored = dataclasses.replace(
        m, info={k: v for k, v in m.info.items() if k != "environment"})
    return json.loads(_results.dumps(stored, environment=jsonish(environment)))


def _recovery_budget(recover: bool | float, method: str) -> bool | float | None:
    """None (no recovery), True (``recovery.default_budget`` of the time the sweep took)
    or the seconds asked for."""
    if recover is False or method == "collect_callgrind":  # instruction counts are not disturbed
        return None
    if recover is True:
        return True
    if not isinstance(recover, (int, float)) or not 0 <= recover < math.inf:
        raise ValueError(f"recover must be True, False or a budget in seconds (>= 0), "
                         f"got {recover!r}")
    return float(recover)


def _recover(results: list[Any], run: Any, budget: float, *, quiet: bool,
             progress: bool | None, stream: IO[str] | None) -> list[int]:
    """Measures the disturbed results again through ``run`` (as the sweep measured them);
    returns the indices measured again."""
    disturbed = [i for i, r in enumerate(results) if getattr(r, "disturbed", False)]
    if not disturbed:
        return []
    with Progress(len(disturbed), desc="measuring disturbed results again", enabled=progress,
                  stream=stream) as bar:
        def again(i: int) -> Any:
            before = results[i]
            run([i], bar)
            fresh, results[i] = results[i], before
            return fresh

        results[:] = recovery.remeasure(results, again, budget=budget,
                                        quiet_wait=recovery.QUIET_WAIT_S if quiet else 0.0)
    return disturbed


def _here(timers: list[Any], todo: list[int], method: str, kwargs: dict[str, Any],
          bar: Progress, keep: Any) -> None:
    """Runs the tasks in this process, in order; exceptions propagate as themselves."""
    for i in todo:
        bar.set_item(_title(timers[i]))
        keep(i, getattr(timers[i], method)(**kwargs), None)
        bar.update()


def _on_cluster(timers: list[Any], todo: list[int], method: str, kwargs: dict[str, Any],
                executor: Any, bar: Progress, keep: Any, fail: Any) -> None:
    """Runs the tasks on the executor's workers, keeping each outcome as it arrives."""
    # Serialize everything first: nothing is submitted if one timer cannot be sent.
    tasks = [executors.Task(i, _title(timers[i]),
                            executors.serialize(timers[i], method, kwargs, i),
                            placement.needs_of(timers[i])) for i in todo]
    cluster = executors.connect(executor)
    cancel = True
    try:
        cluster.prepare(tasks)
        for task in tasks:
            task.attempts += 1
            cluster.submit(task)
        left = len(tasks)
        bar.set_item(f"on {cluster.name}")
        while left:
            for task, outcome in cluster.wait(_WAIT_S):
                if outcome["status"] == "lost" and task.attempts < _TRIES:
                    task.attempts += 1
                    task.avoid = outcome["worker"]
                    cluster.submit(task)
                    continue
                left -= 1
                if outcome["status"] == "ok":
                    keep(task.index, outcome["value"], outcome["environment"])
                else:
                    fail(TaskFailure(task.index, task.title, outcome["error"],
                                     outcome["traceback"], outcome["worker"], task.attempts,
                                     outcome["environment"]))
                bar.update(item=task.title)
            cluster.check()
        cancel = False
    finally:
        cluster.close(cancel=cancel)


def run_all(
    timers: Iterable[Any],
    method: str = "blocked_autorange",
    progress: bool | None = None,
    *,
    stream: IO[str] | None = None,
    executor: Any = None,
    results_path: str | os.PathLike[str] | None = None,
    resume: bool = False,
    recover: bool | float = False,
    **kwargs: Any,
) -> list[Any]:
    """Runs ``getattr(timer, method)(**kwargs)`` for every Timer, with a progress bar.

    Args:
        timers: the Timers (anything with ``method`` when run here without a file).
        method: ``"blocked_autorange"`` (default), ``"adaptive_autorange"``,
            ``"timeit"``, ``"repeat"``, ``"autorange"`` or ``"collect_callgrind"``.
        progress: True / False to force the bar, None to show it only on a
            terminal (and unless ``OPBENCH_PROGRESS=0``).
        stream: where the bar goes (default stderr).
        executor: None (this process), ``"processes"``, a ``distributed.Client``
            or a Dask scheduler address, ``"ray"`` or ``"ray://HOST:PORT"``
            (see the module doc).
        results_path: a file to stream each result into as it arrives.
        resume: skip the tasks ``results_path`` already holds (their results
            are read back into the returned list).
        recover: measure the results the busy machine disturbed again, at the end
            (``opbench.core.recovery``): True within ``recovery.default_budget`` of the time the sweep
            took, a number within that many seconds; False (default) keeps them as
            measured, as torch would (they are flagged either way).
        **kwargs: passed to every call, e.g. ``min_run_time=1``.

    Returns:
        One result per Timer, in order (Measurements; CallgrindStats for
        collect_callgrind).

    Raises:
        ValueError: unknown ``method``; ``resume`` without ``results_path``; a negative
            or infinite ``recover`` budget.
        TypeError: a timer lacks the method (or is no Timer, for an executor).
        SerializationError: a timer cannot be sent to a worker (names the global).
        PlacementError: no worker can give a task the slot it needs.
        SchedulerUnreachableError: the cluster cannot be reached (names the address).
        ResultsFileError: ``results_path`` holds results and ``resume`` is False,
            or was written by another sweep.
        SweepError: after the sweep, when tasks on an executor failed.
        All of these but SweepError before anything runs.
    """
    timers = list(timers)
    _check(timers, method, executor, results_path, resume)
    results: list[Any] = [None] * len(timers)
    failures: list[TaskFailure] = []
    keys: list[str] = []
    writer = None
    if results_path is not None:
        keys = task_keys(timers)
        writer = SweepWriter(results_path, method, kwargs, resume=resume)
        _read_back(writer, keys, results)

    def keep(i: int, value: Any, environment: dict[str, Any] | None) -> None:
        if writer is not None and environment is None:
            environment = executors.worker_environment(None)
        results[i] = _received(value, environment, on_worker=executor is not None)
        if writer is not None and environment is not None:
            writer.add_result(keys[i], i, _document(results[i], environment))

    def fail(failure: TaskFailure) -> None:
        failures.append(failure)
        if writer is not None:
            fields = dataclasses.asdict(failure)
            del fields["index"]
            writer.add_failure(keys[failure.index], failure.index, fields)

    def run(todo: list[int], bar: Progress) -> None:
        if executor is None:
            _here(timers, todo, method, kwargs, bar, keep)
        elif todo:
            _on_cluster(timers, todo, method, kwargs, executor, bar, keep, fail)

    budget = _recovery_budget(recover, method)
    todo = [i for i, r in enumerate(results) if r is None]
    try:
        started = time.monotonic()
        with Progress(len(todo), desc=method, enabled=progress, stream=stream) as bar:
            run(todo, bar)
        if budget is not None:
            spent = time.monotonic() - started
            measured_again = _recover(
                results, run, recovery.default_budget(spent) if budget is True else budget,
                quiet=executor is None, progress=progress, stream=stream)
            if writer is not None:
                _write_again(writer, keys, results, measured_again)
    finally:
        if writer is not None:
            writer.close()
    if failures:
        _raise_failures(failures, results, results_path)
    return results


def _read_back(writer: SweepWriter, keys: list[str], results: list[Any]) -> None:
    """Puts the results the file already holds (``resume``) in their places."""
    for i, key in enumerate(keys):
        if key in writer.completed:
            results[i] = _results.loads(json.dumps(writer.completed[key]))[0]


def _write_again(writer: SweepWriter, keys: list[str], results: list[Any],
                 measured_again: Iterable[int]) -> None:
    """Writes the results measured again by recovery after their first figures."""
    for i in measured_again:
        # The file's last word on a task is the figure kept (a clean one, or the
        # lower of two disturbed ones), whichever was measured last.
        writer.add_result(keys[i], i, _document(
            results[i], results[i].info.get("environment") or {}))


def _raise_failures(failures: list[TaskFailure], results: list[Any],
                    results_path: str | os.PathLike[str] | None) -> NoReturn:
    """Raises the SweepError naming every failed task, in order, with the results kept."""
    failures.sort(key=lambda f: f.index)
    kept = f" (and in {results_path})" if results_path is not None else ""
    raise SweepError(
        f"{len(failures)} of {len(results)} tasks failed; the other results are in "
        f"SweepError.results{kept}:\n" + "\n".join(f"  {f}" for f in failures),
        results=results, failures=failures)
