"""opbench.gate.turns: two workers take turns to time, never both at once, in ABBA order."""
from __future__ import annotations

import threading
import time

import pytest

from opbench.gate.turns import Coordinator, TakingTurns, TurnClient


def _workers(coordinator: Coordinator, blocks: list[int], log: list[tuple[int, str]],
             delay: list[float]) -> list[threading.Thread]:
    """Fake workers: each takes the turn ``blocks[side]`` times (one block per turn)."""
    def work(side: int) -> None:
        time.sleep(delay[side])
        client = TurnClient(*coordinator.worker_fds(side), quantum=0.0)
        for _ in range(blocks[side]):
            client.acquire()
            log.append((side, "start"))
            time.sleep(0.002)
            log.append((side, "end"))
            client.release()

    return [threading.Thread(target=work, args=(side,)) for side in (0, 1)]


def _serve(coordinator: Coordinator, threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    coordinator.serve(lambda side: not threads[side].is_alive())
    for t in threads:
        t.join(10)
    coordinator.close()


def test_only_one_side_times_at_a_time_in_abba_order() -> None:
    log: list[tuple[int, str]] = []
    coordinator = Coordinator(first=0, partner_wait=5.0)
    _serve(coordinator, _workers(coordinator, [8, 8], log, [0.0, 0.0]))
    holding = 0
    for _, event in log:
        holding += 1 if event == "start" else -1
        assert holding in (0, 1)  # never two at once
    order = [side for side, event in log if event == "start"]
    assert coordinator.turns == [8, 8] and sorted(order) == [0] * 8 + [1] * 8
    # Both waiting all along: ABBA (0 1 1 0 0 1 1 0 ...), apart from who arrived first.
    assert order[1:7] in ([1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 0, 0])


def test_both_start_together_then_a_side_away_or_gone_is_not_waited_for() -> None:
    log: list[tuple[int, str]] = []
    coordinator = Coordinator(first=1, partner_wait=0.05)
    start = time.monotonic()
    # Side 1 arrives late and does little; side 0 must not stall waiting for it after.
    _serve(coordinator, _workers(coordinator, [20, 1], log, [0.0, 0.3]))
    assert coordinator.turns == [20, 1]
    assert time.monotonic() - start < 5
    # Nothing was timed before both had arrived (side 0 waited for side 1's start-up);
    # then side 1, whose turn came first, went first.
    order = [side for side, event in log if event == "start"]
    assert order[0] == 1 and order[1:] == [0] * 20


def test_taking_turns_hands_over_between_blocks() -> None:
    class FakeTimer:
        task_spec = "spec"

        def block_size(self, min_run_time: float) -> int:
            return 10

        def run(self, number: int) -> float:
            return 1e-4 * number

    class Recorder(TurnClient):
        def __init__(self) -> None:
            super().__init__(-1, -1, quantum=0.0)
            self.events: list[str] = []

        def acquire(self) -> None:
            if not self.held:
                self.events.append("acquire")
            self._since = time.perf_counter()

        def release(self) -> None:
            if self.held:
                self.events.append("release")
            self._since = None

    client = Recorder()
    timer = TakingTurns(FakeTimer(), client)
    assert timer.task_spec == "spec"  # everything else is the Timer's
    # Blocks of ~BLOCK seconds (2 ms of 0.1 ms calls), whatever the Timer's own size.
    assert timer.block_size(0.2) == 20 and timer.run(20) == pytest.approx(2e-3)
    # Calibration took the turn; the block used it up (quantum 0) and handed it over.
    assert client.events == ["acquire", "release", "acquire"]
