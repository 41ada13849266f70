"""opbench.sweep.executors.local: opbench's own pool of worker processes."""
from __future__ import annotations

import pytest

import opbench
from opbench.errors import PlacementError
from opbench.sweep.executors.local import _Processes
from opbench.sweep.executors.task import Task, serialize
from opbench.sweep.placement import Needs


def _task(index: int, stmt: str, cpus: int = 1) -> Task:
    return Task(index, stmt, serialize(opbench.Timer(stmt), "timeit", {"number": 10}, index), Needs(cpus, 0))


def _drain(pool: _Processes, n: int) -> dict[int, dict]:
    outcomes: dict[int, dict] = {}
    for _ in range(600):
        for done, outcome in pool.wait(0.5):
            outcomes[done.index] = outcome
        if len(outcomes) == n:
            return outcomes
    raise AssertionError(f"only {len(outcomes)} of {n} tasks finished")


def test_tasks_run_in_worker_processes_and_come_back() -> None:
    pool = _Processes()
    try:
        tasks = [_task(0, "1 + 1"), _task(1, "1 / 0"), _task(2, "sum(range(9))")]
        pool.prepare(tasks)
        for t in tasks:
            pool.submit(t)
        outcomes = _drain(pool, 3)
    finally:
        pool.close(cancel=False)
    assert [outcomes[i]["status"] for i in range(3)] == ["ok", "error", "ok"]
    assert outcomes[0]["value"].number_per_run == 10


def test_a_dead_worker_loses_its_task_and_is_replaced() -> None:
    pool = _Processes()
    try:
        pool.submit(_task(0, "import os; os._exit(3)"))
        [outcome] = _drain(pool, 1).values()
        assert outcome["status"] == "lost" and "exit status 3" in outcome["error"]
        pool.submit(_task(1, "1 + 1"))
        assert _drain(pool, 1)[1]["status"] == "ok"
    finally:
        pool.close(cancel=True)


def test_a_task_wanting_more_cores_than_the_machine_is_refused() -> None:
    pool = _Processes()
    with pytest.raises(PlacementError, match="Lower the Timers' num_threads"):
        pool.prepare([_task(0, "pass", cpus=pool._cores + 1)])
