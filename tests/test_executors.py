"""opbench.sweep.executors: ``connect`` picks the executor ``run_all(executor=...)`` names."""
from __future__ import annotations

import socket

import pytest

from opbench.errors import SchedulerUnreachableError
from opbench.sweep import executors
from opbench.sweep.executors.base import _Executor


def test_processes_is_opbenchs_own_pool() -> None:
    pool = executors.connect("processes")
    try:
        assert isinstance(pool, _Executor) and pool.name == "processes"
    finally:
        pool.close(cancel=True)


def test_an_unknown_executor_lists_the_ones_there_are() -> None:
    with pytest.raises(ValueError, match=r"'processes', a distributed.Client.*got 'threads'"):
        executors.connect("threads")


def test_a_scheduler_address_that_does_not_answer_fails_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("opbench.sweep.executors.base.CONNECT_TIMEOUT_S", 2.0)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SchedulerUnreachableError):
        executors.connect(f"tcp://127.0.0.1:{port}")
