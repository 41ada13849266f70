"""What the sweep driver needs from a cluster (``_Executor``), and the checks every
executor makes: can a worker ever run this task, does the scheduler answer.

Each executor reports a finished task as an outcome dict: ``status`` is ``"ok"``
(``value``), ``"error"`` (``error``, ``traceback``) or ``"lost"`` (the worker
died running it; ``error`` says how), with ``worker`` and ``environment``.
"""
from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opbench.errors import PlacementError, SchedulerUnreachableError
from opbench.sweep.executors.task import Task
from opbench.sweep.placement import Needs

# Seconds to wait for a Dask scheduler given by address before giving up.
CONNECT_TIMEOUT_S = 10.0
# Seconds to wait for a first worker to join a cluster that has none.
WORKERS_WAIT_S = 30.0
# Seconds a cluster may go without a scheduler connection, or without any
# worker able to run the waiting tasks, before the sweep stops with an error.
LOST_GRACE_S = 60.0


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
