"""opbench.revisions.turns: workers take turns to time, never two at once, ABBA within each pair."""
from __future__ import annotations

import os
import threading
import time

import pytest

from opbench.revisions.turns import Coordinator, TakingTurns, TurnClient, client_from_environment


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

    return [threading.Thread(target=work, args=(side,)) for side in range(len(blocks))]


# (arrived, ended, granted, wait); quoted: evaluated at import, on Python 3.9 too.
_Decision = tuple[tuple[bool, ...], tuple[bool, ...], "int | None", "float | None"]


def _decisions(coordinator: Coordinator) -> list[_Decision]:
    """Records each of the coordinator's decisions (which workers had arrived, which had
    ended or asked to end, the worker granted, the seconds it chose to wait): what it waited for,
    whatever the clock did."""
    made: list[_Decision] = []
    decide = coordinator._next

    def spy(state, now):  # type: ignore[no-untyped-def]
        grant, wait = decide(state, now)
        made.append((tuple(a is not None for a in state.arrived),
                     tuple(state.ending(w) for w in range(coordinator.workers)), grant, wait))
        return grant, wait

    coordinator._next = spy  # type: ignore[method-assign]
    return made


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
    made = _decisions(coordinator)
    # Side 1 arrives late and does little; side 0 must not stall waiting for it after.
    _serve(coordinator, _workers(coordinator, [20, 1], log, [0.0, 0.3]))
    assert coordinator.turns == [20, 1]
    # Once side 1 had ended, every decision granted side 0 the turn at once.
    after = [(grant, wait) for _, ended, grant, wait in made if ended[1]]
    assert after and all(grant == 0 and wait is None for grant, wait in after)
    # Nothing was timed before both had arrived (side 0 waited for side 1's start-up);
    # then side 1, whose turn came first, went first.
    order = [side for side, event in log if event == "start"]
    assert order[0] == 1 and order[1:] == [0] * 20


def test_taking_turns_hands_over_between_blocks() -> None:
    class FakeTimer:
        task_spec = "spec"

        def block_size(self, min_run_time: float) -> int:
            raise AssertionError("turns size blocks by time, not by the tenfold search")

        def block_size_for(self, seconds: float) -> int:
            return round(seconds / 1e-4)

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
    # Blocks of ~BLOCK seconds (2 ms of 0.1 ms calls).
    assert timer.block_size(0.2) == 20 and timer.run(20) == pytest.approx(2e-3)
    # Calibration took the turn; the block used it up (quantum 0) and handed it over.
    assert client.events == ["acquire", "release", "acquire"]


def test_a_wave_of_pairs_goes_round_forth_and_back_one_at_a_time() -> None:
    log: list[tuple[int, str]] = []
    coordinator = Coordinator(first=0, partner_wait=5.0, workers=6)
    # Worker 5 starts late: nothing is timed before every worker has arrived.
    _serve(coordinator, _workers(coordinator, [6] * 6, log, [0.0] * 5 + [0.3]))
    holding = 0
    for _, event in log:
        holding += 1 if event == "start" else -1
        assert holding in (0, 1)  # never two at once
    order = [w for w, event in log if event == "start"]
    assert coordinator.turns == [6] * 6
    # Once everyone waits: b0 h0 h1 b1 b2 h2, then back: h2 b2 b1 h1 h0 b0 (ABBA per pair).
    assert order == [0, 1, 3, 2, 4, 5, 5, 4, 2, 3, 1, 0] * 3


def test_workers_come_in_pairs() -> None:
    with pytest.raises(ValueError, match="pairs"):
        Coordinator(workers=3)


def test_ending_workers_share_a_hold_that_keeps_everyone_from_timing() -> None:
    coordinator = Coordinator(first=0, partner_wait=0.05, workers=4)
    log: list[tuple[float, int, str]] = []
    both_done = threading.Barrier(2)

    def work(w: int, blocks: int) -> None:
        read_fd, write_fd, _, protocol = coordinator.environment(w)[
            "OPBENCH_AB_TURNS"].split(",")
        assert (int(read_fd), int(write_fd), protocol) == (*coordinator.worker_fds(w), "x")
        client = TurnClient(int(read_fd), int(write_fd), 0.0, exit_holds=True)
        for _ in range(blocks):
            client.acquire()
            log.append((time.monotonic(), w, "start"))
            time.sleep(0.002)
            log.append((time.monotonic(), w, "end"))
            client.release()
        if w < 2:
            both_done.wait()  # workers 0 and 1 end at once
        client.hold_to_exit()
        log.append((time.monotonic(), w, "exit held"))
        time.sleep(0.1)  # saving, reporting, the interpreter's exit
        log.append((time.monotonic(), w, "exit done"))

    threads = [threading.Thread(target=work, args=(w, n)) for w, n in enumerate([2, 2, 30, 30])]
    _serve(coordinator, threads)
    held = {w: (t, next(u for u, v, e in log if v == w and e == "exit done"))
            for t, w, e in log if e == "exit held"}
    assert sorted(held) == [0, 1, 2, 3]
    # Workers 0 and 1 ended together: their holds overlapped (one wait, not two)...
    assert held[1][0] < held[0][1] and held[0][0] < held[1][1]
    # ...and nobody timed while any end was held.
    for t, w, e in log:
        if e == "start":
            assert not any(a <= t <= b for v, (a, b) in held.items() if v != w), (w, t)


def test_a_worker_of_an_older_coordinator_holds_the_turn_to_exit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No ",x" in $OPBENCH_AB_TURNS: the coordinator knows no shared holds (it would never
    # answer an "x"), so the worker asks for the ordinary turn and never gives it back.
    requests, grants = os.pipe(), os.pipe()
    try:
        os.write(grants[1], b"g")
        monkeypatch.setenv("OPBENCH_AB_TURNS", f"{grants[0]},{requests[1]},0.02")
        client = client_from_environment()
        assert client is not None
        client.hold_to_exit()
        assert client.held and os.read(requests[0], 16) == b"a"
    finally:
        for fd in (*requests, *grants):
            os.close(fd)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_workers_time_on_the_coordinators_cpu_and_end_on_their_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    own = os.sched_getaffinity(0)
    cpu = max(own)
    coordinator = Coordinator(workers=2, cpu=cpu)
    monkeypatch.setenv("OPBENCH_AB_TURNS", coordinator.environment(0)["OPBENCH_AB_TURNS"])
    assert coordinator.environment(0)["OPBENCH_AB_TURNS"].endswith(f",x,cpu={cpu}")
    client = client_from_environment()
    assert client is not None
    try:
        os.write(coordinator._grants[0][1], b"gg")  # the coordinator's grants, by hand
        client.acquire()
        assert os.sched_getaffinity(0) == {cpu}  # timing: pinned
        client.hold_to_exit()
        assert os.sched_getaffinity(0) == own  # ending: anywhere again
        assert os.read(coordinator._requests[0][0], 16) == b"arx"
    finally:
        os.sched_setaffinity(0, own)
        coordinator.close()


def test_a_worker_that_ends_without_timing_does_not_hold_up_the_start() -> None:
    # A process with no benchmark asks to end at once: it counts as started, so the others
    # are not kept waiting for it (start_wait, 30 s here) to reach a benchmark it has not.
    coordinator = Coordinator(first=0, partner_wait=0.05, start_wait=30.0, workers=4)
    log: list[tuple[int, str]] = []

    def work(w: int) -> None:
        client = TurnClient(*coordinator.worker_fds(w), quantum=0.0, exit_holds=True)
        for _ in range(0 if w == 3 else 3):
            client.acquire()
            log.append((w, "start"))
            client.release()
        client.hold_to_exit()
        time.sleep(0.05)

    made = _decisions(coordinator)
    _serve(coordinator, [threading.Thread(target=work, args=(w,)) for w in range(4)])
    assert coordinator.turns == [3, 3, 3, 0]
    # Once worker 3 had asked to end, a wait longer than a partner's was only ever for the
    # start of a worker that times (0 to 2), never for worker 3's.
    assert all(not all(arrived[:3]) for arrived, ended, _, wait in made
               if ended[3] and wait is not None and wait > 0.05)


def test_a_spawned_workers_exit_reads_as_end_of_file_without_polling() -> None:
    import subprocess
    import sys

    coordinator = Coordinator(partner_wait=0.05)
    code = ("from opbench.revisions.turns import client_from_environment\n"
            "c = client_from_environment()\n"
            "for _ in range(3):\n    c.acquire(); c.release()\n"
            "c.hold_to_exit()\n")
    procs = []
    for w in range(2):
        procs.append(subprocess.Popen([sys.executable, "-c", code], pass_fds=coordinator.worker_fds(w),
                                      env={**os.environ, **coordinator.environment(w)}))
        coordinator.spawned(w)
    # finished() never says so: only end of file on each worker's pipe can end serve.
    server = threading.Thread(target=coordinator.serve, args=(lambda w: False,), daemon=True)
    server.start()
    server.join(60)
    alive = server.is_alive()
    for p in procs:
        p.wait(60)
    coordinator.close()
    assert not alive and coordinator.turns == [3, 3]


def test_a_wave_runs_session_ends_quickly_with_one_line_not_the_table(tmp_path) -> None:
    import subprocess
    import sys

    from conftest import PYTEST_PLUGIN_ARGS

    (tmp_path / "test_one.py").write_text(
        "import os\n"
        "class Cycle:\n"  # cyclic garbage whose finalizer leaves a mark
        "    def __del__(self):\n"
        "        open(os.environ['MARK'], 'w').close()\n"
        "def test_sum(opbench):\n"
        "    opbench('sum(range(50))')\n"
        "    import gc; gc.disable()\n"  # so that only an explicit collection finds it
        "    c = Cycle(); c.me = c; del c\n")
    # The heap is frozen by the time pytest unconfigures (its collections skip it).
    (tmp_path / "conftest.py").write_text(
        "import gc, os\n"
        "def pytest_unconfigure(config):\n"
        "    open(os.environ['MARK'] + '.frozen', 'w').write(str(gc.get_freeze_count()))\n")
    coordinator = Coordinator(partner_wait=0.05)
    procs = []
    for w in range(2):
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PYTEST_PLUGIN_ARGS,
             "--opbench-min-time=0.01", "--opbench-min-samples=5",
             f"--opbench-save={tmp_path / f'{w}.json'}", str(tmp_path / "test_one.py")],
            cwd=tmp_path, pass_fds=coordinator.worker_fds(w), stdout=subprocess.PIPE, text=True,
            env={**os.environ, **coordinator.environment(w), "MARK": str(tmp_path / f"mark{w}")}))
        coordinator.spawned(w)
    coordinator.serve(lambda w: procs[w].poll() is not None)
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    coordinator.close()
    for out in outputs:
        assert "opbench: 1 benchmark(s) timed, taking turns in an `opbench ab` wave" in out, out
        assert "ops/s" not in out  # the table's header
    for w in (0, 1):
        assert (tmp_path / f"mark{w}").exists()  # the session's garbage was still finalized
        assert int((tmp_path / f"mark{w}.frozen").read_text()) > 1000
    assert coordinator.turns[0] >= 1 and coordinator.turns[1] >= 1
