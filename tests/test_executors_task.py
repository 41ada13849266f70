"""opbench.sweep.executors.task: a Timer sent as bytes, run on the worker, an outcome back."""
from __future__ import annotations

import pickle
import threading

import pytest

import opbench
from opbench.errors import SerializationError
from opbench.sweep.executors import task


def test_a_timer_goes_and_its_measurement_comes_back() -> None:
    payload = task.serialize(opbench.Timer("x * 2", setup="x = 21"), "timeit", {"number": 50}, 0)
    outcome = task.run_task(payload, (1, 0))
    assert outcome["status"] == "ok" and outcome["value"].number_per_run == 50
    assert outcome["worker"] == outcome["environment"]["worker"]


def test_a_lambda_travels_by_value() -> None:
    offset = 5
    payload = task.serialize(opbench.Timer(lambda: offset + 1), "timeit", {"number": 3}, 0)
    assert task.run_task(payload, (1, 0))["status"] == "ok"


def test_an_unsendable_global_is_named_before_anything_is_submitted() -> None:
    timer = opbench.Timer("lock.acquire(); lock.release()", globals={"lock": threading.Lock()})
    with pytest.raises(SerializationError, match=r"timers\[3\] cannot be sent to a worker: global 'lock' "
                                                 r"\(of type lock\) does not serialize"):
        task.serialize(timer, "timeit", {"number": 1}, 3)


def test_an_exception_in_the_task_is_an_error_outcome_not_a_lost_worker() -> None:
    payload = pickle.dumps((opbench.Timer("1 / 0"), "timeit", {"number": 1}))
    outcome = task.run_task(payload, (1, 0))
    assert outcome["status"] == "error"
    assert outcome["error"] == "ZeroDivisionError: division by zero"
    assert "ZeroDivisionError" in outcome["traceback"]


def test_a_lost_outcome_says_why() -> None:
    lost = task._lost("host:1", "its worker process died")
    assert (lost["status"], lost["error"], lost["worker"]) == ("lost", "its worker process died", "host:1")
