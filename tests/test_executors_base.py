"""opbench.sweep.executors.base: the checks every executor makes before and during a sweep."""
from __future__ import annotations

import socket

import pytest

from opbench.errors import PlacementError, SchedulerUnreachableError
from opbench.sweep.executors import base
from opbench.sweep.placement import Needs


def test_a_task_no_worker_can_hold_is_refused_before_anything_runs() -> None:
    base._placement_problem({Needs(1, 0)}, [{"CPU": 2, "GPU": 0}], "fix")
    with pytest.raises(PlacementError, match=r"no worker can give a measurement 4 core\(s\) and 0 GPU"):
        base._placement_problem({Needs(1, 0), Needs(4, 0)}, [{"CPU": 2, "GPU": 0}], "Lower them.")
    with pytest.raises(PlacementError, match=r"nothing \(no workers\)"):
        base._placement_problem({Needs(1, 0)}, [], "Start workers.")


def test_reachable_is_a_tcp_connection() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        base._check_reachable(f"tcp://127.0.0.1:{server.getsockname()[1]}", "no", "how")
    with pytest.raises(SchedulerUnreachableError, match=r"cannot reach it .*Start the scheduler"):
        base._check_reachable("tcp://127.0.0.1:notaport", "cannot reach it", "Start the scheduler.")


class _Gone(base._Executor):
    def _usable(self) -> bool:
        return False


def test_an_unusable_cluster_stops_the_sweep_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(base.time, "monotonic", lambda: clock[0])
    executor = _Gone()
    executor.check()  # the first sign: the grace starts
    clock[0] += base.LOST_GRACE_S / 2
    executor.check()
    clock[0] += base.LOST_GRACE_S
    with pytest.raises(SchedulerUnreachableError, match="cannot run the remaining tasks"):
        executor.check()


def test_a_cluster_that_recovers_starts_the_grace_again(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, usable = [0.0], [False]
    monkeypatch.setattr(base.time, "monotonic", lambda: clock[0])
    executor = _Gone()
    executor._usable = lambda: usable[0]  # type: ignore[method-assign]
    clock[0] = 10.0
    executor.check()
    usable[0], clock[0] = True, 10.0 + base.LOST_GRACE_S / 2
    executor.check()
    usable[0], clock[0] = False, 10.0 + base.LOST_GRACE_S * 1.2
    executor.check()  # unusable again, but only just: no error
    assert executor._unusable_since == clock[0]
