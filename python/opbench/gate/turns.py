"""Turns: two live benchmark processes (base and head of an ``opbench ab`` round) take
turns to time, in short alternating slices, so the machine's drift cancels between them.

Sequential whole-process rounds compare two different moments of a shared
machine: another job starting between them reads as a speed difference
(measured here: paired run ratios from 0.72 to 1.23 for a 10% change). So
``opbench ab`` starts both sides' processes at once and a coordinator (the
``ab`` process) hands a single *turn* back and forth: only the holder times,
for about ``quantum`` seconds of blocks, then the other side times its own
blocks of the same benchmark. A change in load lands on both sides within a
few tens of milliseconds, and the rounds (fresh process pairs) still carry
the between-process variance that the decision needs (``opbench.stats.decide.runs``).

The protocol is two pipes a side, handed to the worker as inherited file
descriptors in ``$OPBENCH_AB_TURNS`` (``"READ_FD,WRITE_FD,QUANTUM"``): the
worker writes ``a`` to ask for the turn, reads ``g`` when it is granted, and
writes ``r`` when it gives it back. No turn is granted until both sides have
asked once (both reached their first benchmark: timing while the other process
still imports would time its start-up), or ``START_WAIT`` seconds passed, or
the other process ended. Then the coordinator grants the waiting side; when
both wait it alternates in ABBA order; when the other side is away (in test
setup or teardown) for more than ``PARTNER_WAIT`` seconds it does not wait
for it. Everything outside a benchmark's timing runs freely.
Only the pytest plugin takes turns (each fixture call holds the turn while it
calibrates and times, handing it over between blocks); ``opbench ab`` falls
back to sequential rounds for scripts and for revisions whose plugin predates
this module.
"""
from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable
from typing import Any

__all__ = ["BLOCK", "ENV_VAR", "PARTNER_WAIT", "QUANTUM", "START_WAIT", "Coordinator", "TakingTurns",
           "TurnClient", "client_from_environment"]

ENV_VAR = "OPBENCH_AB_TURNS"
# Seconds of timing a side does per turn: short, so both sides see the same machine.
QUANTUM = 0.02
# Seconds the coordinator waits for a side that just gave the turn back (it is between
# blocks or benchmarks) before letting the other side go on alone.
PARTNER_WAIT = 0.25
# Seconds a block lasts in a round: the same grain on both sides (see TakingTurns).
BLOCK = 0.002
# Seconds the first side to reach a benchmark waits for the other to reach one too: timing
# while the other process still starts up (imports, collection) would time that load.
START_WAIT = 60.0


class TurnClient:
    """The worker's end: ``acquire`` before timing, ``tick`` after each block (hands the
    turn over once ``quantum`` seconds were spent), ``release`` when done."""

    def __init__(self, read_fd: int, write_fd: int, quantum: float = QUANTUM) -> None:
        self._read, self._write, self.quantum = read_fd, write_fd, quantum
        self._since: float | None = None  # when the turn was granted (None: not held)

    @property
    def held(self) -> bool:
        return self._since is not None

    def acquire(self) -> None:
        if self._since is not None:
            return
        if self._write >= 0:
            try:
                os.write(self._write, b"a")
                granted = os.read(self._read, 1) == b"g"
            except OSError:
                granted = False
            if not granted:  # the coordinator is gone: go on alone
                self._write = -1
        self._since = time.perf_counter()

    def release(self) -> None:
        if self._since is None:
            return
        self._since = None
        if self._write >= 0:
            try:
                os.write(self._write, b"r")
            except OSError:
                self._write = -1

    def tick(self) -> None:
        if self._since is not None and time.perf_counter() - self._since >= self.quantum:
            self.release()
            self.acquire()


def client_from_environment() -> TurnClient | None:
    """The client ``$OPBENCH_AB_TURNS`` describes, or None outside an ``opbench ab`` run."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return None
    try:
        read_fd, write_fd, quantum = spec.split(",")
        client = TurnClient(int(read_fd), int(write_fd), float(quantum))
        os.fstat(client._read)
        os.fstat(client._write)
    except (ValueError, OSError):
        return None  # not ours to use (a copied environment): time without turns
    return client


class TakingTurns:
    """A Timer that holds the turn while it calibrates and times: ``block_size`` and
    ``run`` take it, each block may hand it over (``TurnClient.tick``); the caller
    releases it when the measurement is done. Everything else is the Timer's.

    Blocks last about ``BLOCK`` seconds on both sides. The Timer's own block size
    grows tenfold until the clock's overhead, probed under the machine's load, is
    negligible, so on a busy machine one side may get blocks of 1 ms and the other
    of 20 ms; a block longer than the scheduler's time slice always includes a
    preemption, so per-call figures then differ with the block size, not the code
    (measured here: paired run ratios up to 4.9 for a 1.8x change). Equal short
    blocks sample both sides at one grain, and most run unpreempted.
    """

    def __init__(self, timer: Any, client: TurnClient) -> None:
        self._timer, self._client = timer, client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._timer, name)

    def block_size(self, min_run_time: float) -> int:
        self._client.acquire()
        self._timer.block_size(min_run_time)  # starts the measurement, warms up
        per_call = min(self._timer.run(1) for _ in range(3))
        return max(1, round(BLOCK / per_call)) if per_call > 0 else 1

    def run(self, number: int) -> float:
        self._client.acquire()
        t = float(self._timer.run(number))
        self._client.tick()
        return t


class Coordinator:
    """The ``ab`` process's end for two workers (0: base, 1: head).

    Give ``worker_fds(side)`` to the side's process (``pass_fds``) with
    ``environment(side)``, then ``serve(finished)`` until both processes ended, and
    ``close()``. ``first`` is the side whose turn comes first (alternate it by round);
    turns then go ABBA (first, other, other, first...).
    """

    def __init__(self, first: int = 0, quantum: float = QUANTUM,
                 partner_wait: float = PARTNER_WAIT, start_wait: float = START_WAIT) -> None:
        self.quantum, self.partner_wait, self.start_wait = quantum, partner_wait, start_wait
        self._order = [first, 1 - first, 1 - first, first]
        self._requests = [os.pipe(), os.pipe()]  # worker writes, coordinator reads
        self._grants = [os.pipe(), os.pipe()]    # coordinator writes, worker reads
        self.turns = [0, 0]                     # turns granted to each side

    def worker_fds(self, side: int) -> tuple[int, int]:
        return self._grants[side][0], self._requests[side][1]

    def environment(self, side: int) -> dict[str, str]:
        read_fd, write_fd = self.worker_fds(side)
        return {ENV_VAR: f"{read_fd},{write_fd},{self.quantum}"}

    def close(self) -> None:
        """Closes every descriptor (after the workers ended)."""
        for side in (0, 1):
            for fd in (*self._requests[side], *self._grants[side]):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def serve(self, finished: Callable[[int], bool]) -> None:
        """Grants turns until both sides are ``finished(side)`` (their process ended): a
        side that died holding the turn, or away, is never waited for."""
        sel = selectors.DefaultSelector()
        for side in (0, 1):
            sel.register(self._requests[side][0], selectors.EVENT_READ, side)
        waiting, closed = [False, False], [False, False]
        holder: int | None = None
        last_release = [-1e9, -1e9]
        arrived: list[float | None] = [None, None]  # when each side first asked
        pattern = 0
        try:
            while True:
                for side in (0, 1):
                    if not closed[side] and finished(side):
                        closed[side], waiting[side] = True, False
                        holder = None if holder == side else holder
                if all(closed):
                    return
                timeout = 0.05
                if holder is None:
                    ready = [s for s in (0, 1) if waiting[s]]
                    grant: int | None = None
                    if len(ready) == 2:
                        grant = self._order[pattern % 4]
                    elif len(ready) == 1:
                        s, other = ready[0], 1 - ready[0]
                        first_ask = arrived[s]
                        wait_until = (last_release[other] + self.partner_wait
                                      if arrived[other] is not None or first_ask is None
                                      else first_ask + self.start_wait)
                        now = time.monotonic()
                        if closed[other] or now >= wait_until:
                            grant = s
                        else:
                            timeout = wait_until - now
                    if grant is not None:
                        if grant == self._order[pattern % 4]:
                            pattern += 1
                        waiting[grant], holder = False, grant
                        self.turns[grant] += 1
                        try:
                            os.write(self._grants[grant][1], b"g")
                        except OSError:  # it died between asking and the grant
                            closed[grant], holder = True, None
                        continue
                for key, _ in sel.select(timeout):
                    side = key.data
                    data = os.read(key.fd, 64)
                    if not data:
                        closed[side], waiting[side] = True, False
                        sel.unregister(key.fd)
                        if holder == side:
                            holder = None
                        continue
                    for byte in data:
                        if byte == ord("a"):
                            waiting[side] = True
                            if arrived[side] is None:
                                arrived[side] = time.monotonic()
                        elif byte == ord("r") and holder == side:
                            holder, last_release[side] = None, time.monotonic()
        finally:
            sel.close()
