"""Turns: the live benchmark processes of an ``opbench ab`` wave (a base and a head
process per round) take turns to time, in short slices, so the machine's drift
cancels between them.

Sequential whole-process rounds compare two different moments of a shared
machine: another job starting between them reads as a speed difference
(``docs/figures/ab_turns.md`` has the measurements). So
``opbench ab`` starts a wave's processes at once and a coordinator (the ``ab``
process) hands a single *turn* round them: only the holder times, for about
``quantum`` seconds of blocks, then the next process times its own blocks of
the same benchmark. A change in load lands on every process within a few
hundred milliseconds, and the rounds (fresh process pairs) still carry the
between-process variance that the decision needs (``opbench.stats.decide.runs``).

The protocol is two pipes a worker, handed to it as inherited file descriptors in
``$OPBENCH_AB_TURNS`` (``"READ_FD,WRITE_FD,QUANTUM"``): the worker writes ``a`` to
ask for the turn, reads ``g`` when it is granted, and writes ``r`` when it gives it
back. No turn is granted until every worker has asked once (all reached their first
benchmark: timing while another process still imports would time its start-up), or
``START_WAIT`` seconds passed, or the others ended. Then the coordinator goes round
the waiting workers forth and back (ABBA within each pair); a worker away (in test
setup or teardown) is waited for at most ``PARTNER_WAIT`` seconds. Everything outside
a benchmark's timing runs freely, but for a worker's end: the pytest plugin asks to
hold timing off before saving and reporting, never giving it back (workers ending
at once share the hold), so no one times beside an end. Only the pytest plugin
takes turns (each fixture call holds the turn while it calibrates and times,
handing it over between blocks); ``opbench ab`` falls back to sequential rounds
for scripts and for revisions whose plugin predates this module.
"""
from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable
from typing import Any

from opbench import _choices

__all__ = ["BLOCK", "ENV_VAR", "PARTNER_WAIT", "QUANTUM", "START_WAIT", "Coordinator", "TakingTurns",
           "TurnClient", "client_from_environment"]

ENV_VAR = "OPBENCH_AB_TURNS"
# Seconds of timing a side does per turn: short, so both sides see the same machine.
QUANTUM = 0.02
# Seconds the coordinator waits for a side that just gave the turn back (it is between
# blocks or benchmarks) before letting the other side go on alone.
PARTNER_WAIT = 0.25
# Seconds a block lasts in a round: the same grain on both sides (see TakingTurns), and as
# in plain runs of the pytest plugin.
BLOCK = _choices.BLOCK
# Seconds the first side to reach a benchmark waits for the other to reach one too: timing
# while the other process still starts up (imports, collection) would time that load.
START_WAIT = 60.0


class TurnClient:
    """The worker's end: ``acquire`` before timing, ``tick`` after each block (hands the
    turn over once ``quantum`` seconds were spent), ``release`` when done."""

    def __init__(self, read_fd: int, write_fd: int, quantum: float = QUANTUM,
                 exit_holds: bool = False, cpu: int | None = None) -> None:
        self._read, self._write, self.quantum = read_fd, write_fd, quantum
        self._exit_holds = exit_holds  # the coordinator grants shared exit holds ("x")
        self._cpu = cpu                   # the CPU every worker times on (None: any)
        self._affinity: set[int] | None = None  # this process's own, while pinned
        self._since: float | None = None  # when the turn was granted (None: not held)

    @property
    def held(self) -> bool:
        return self._since is not None

    def acquire(self) -> None:
        if self._since is not None:
            return
        self._ask(b"a")
        if self._cpu is not None and self._affinity is None:
            self._pin(self._cpu)
        self._since = time.perf_counter()

    def _ask(self, request: bytes) -> None:
        """Sends ``request`` and waits for the grant; a coordinator that is gone (or
        never was) leaves this worker to go on alone."""
        if self._write < 0:
            return
        try:
            os.write(self._write, request)
            granted = os.read(self._read, 1) == b"g"
        except OSError:
            granted = False
        if not granted:
            self._write = -1

    def _pin(self, cpu: int) -> None:
        # Every worker times on one CPU: a CPU whose hardware sibling is busy with
        # another tenant runs everything on it slower, for as long as the tenant
        # runs; on a CPU of its own each process would keep its own share of that for
        # its whole run (a run slower than the rest), shared it cancels.
        try:
            self._affinity = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {cpu})
        except (AttributeError, OSError):  # no such CPU, no affinity on this system
            self._cpu = None

    def _unpin(self) -> None:
        if self._affinity is not None:
            try:
                os.sched_setaffinity(0, self._affinity)
            except OSError:
                pass
            self._affinity = None

    def release(self) -> None:
        if self._since is None:
            return
        self._since = None
        if self._write >= 0:
            try:
                os.write(self._write, b"r")
            except OSError:
                self._write = -1

    def hold_to_exit(self) -> None:
        """Holds timing off for the rest of this process (saving, reporting, exit): no
        worker times until it ends. Workers ending at once share such a hold (their
        ends overlap, nobody's timing does); a coordinator without shared holds grants
        the turn itself, never given back."""
        self.release()
        self._unpin()  # ends share the hold: spread them over every CPU
        self._cpu = None
        if not self._exit_holds:
            self.acquire()
            return
        self._ask(b"x")
        self._since = time.perf_counter()

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
        read_fd, write_fd, quantum, *protocol = spec.split(",")
        cpu = next((int(f[4:]) for f in protocol if f.startswith("cpu=")), None)
        client = TurnClient(int(read_fd), int(write_fd), float(quantum),
                            exit_holds="x" in protocol, cpu=cpu)
        os.fstat(client._read)
        os.fstat(client._write)
    except (ValueError, OSError):
        return None  # not ours to use (a copied environment): time without turns
    return client


class TakingTurns:
    """A Timer that holds the turn while it calibrates and times: ``block_size`` and
    ``run`` take it, each block may hand it over (``TurnClient.tick``); the caller
    releases it when the measurement is done. Everything else is the Timer's.

    Blocks last about ``BLOCK`` seconds on both sides (``Timer.block_size_for``), not
    what the Timer's own search picks. That search grows the block tenfold until the
    clock's overhead, probed under the machine's load, is negligible, so on a busy
    machine one side may get blocks of 1 ms and the other of 20 ms; a block longer
    than the scheduler's time slice always includes a preemption, so per-call figures
    then differ with the block size, not the code. Equal short blocks sample both sides
    at one grain, and
    most run unpreempted; and one warm-up block costs less than the search's thousand.
    """

    def __init__(self, timer: Any, client: TurnClient) -> None:
        self._timer, self._client = timer, client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._timer, name)

    def block_size(self, min_run_time: float) -> int:
        self._client.acquire()
        return int(self._timer.block_size_for(BLOCK))

    def run(self, number: int) -> float:
        self._client.acquire()
        t = float(self._timer.run(number))
        self._client.tick()
        return t


class Coordinator:
    """The ``ab`` process's end for ``workers`` processes: pair ``i`` of a wave is workers
    ``2i`` (base) and ``2i + 1`` (head).

    Give ``worker_fds(w)`` to worker ``w``'s process (``pass_fds``) with
    ``environment(w)``, call ``spawned(w)`` once it started, then ``serve(finished)``
    until every process ended, and ``close()``. ``first`` is the side (0: base, 1:
    head) whose turn comes first in pair 0; pair ``i`` starts with the other side
    when ``i`` is odd. Turns go round the workers forth and back (serpentine: ``b0 h0
    h1 b1 | b1 h1 h0 b0 | ...``), so within each pair the order is ABBA and across
    pairs every worker's turns are spread evenly over the session: load from
    elsewhere lands on every process alike.
    """

    def __init__(self, first: int = 0, quantum: float = QUANTUM,
                 partner_wait: float = PARTNER_WAIT, start_wait: float = START_WAIT,
                 workers: int = 2, cpu: int | None = None) -> None:
        if workers < 2 or workers % 2:
            raise ValueError(f"workers must be pairs (an even number from 2), got {workers}")
        self.quantum, self.partner_wait, self.start_wait = quantum, partner_wait, start_wait
        self.workers, self.cpu = workers, cpu
        forth = []
        for pair in range(workers // 2):
            lead = first if pair % 2 == 0 else 1 - first
            forth += [2 * pair + lead, 2 * pair + 1 - lead]
        self._cycle = forth + forth[::-1]
        self._requests = [os.pipe() for _ in range(workers)]  # worker writes, we read
        self._grants = [os.pipe() for _ in range(workers)]    # we write, worker reads
        self.turns = [0] * workers                            # turns granted to each
        # This process's copies of each worker's ends, until the worker holds its own.
        self._worker_ends: list[tuple[int, ...]] = [self.worker_fds(w) for w in range(workers)]

    def worker_fds(self, worker: int) -> tuple[int, int]:
        return self._grants[worker][0], self._requests[worker][1]

    def spawned(self, worker: int) -> None:
        """Worker ``worker``'s process holds its ends now (or failed to start): closes
        this process's copies, so its end reads as end of file on its request pipe the
        moment it exits (with the turn held to exit, every other worker waits on that)."""
        for fd in self._worker_ends[worker]:
            try:
                os.close(fd)
            except OSError:
                pass
        self._worker_ends[worker] = ()

    def environment(self, worker: int) -> dict[str, str]:
        read_fd, write_fd = self.worker_fds(worker)
        # ",x": this coordinator grants shared exit holds (TurnClient.hold_to_exit);
        # ",cpu=N": every worker times on CPU N.
        pin = "" if self.cpu is None else f",cpu={self.cpu}"
        return {ENV_VAR: f"{read_fd},{write_fd},{self.quantum},x{pin}"}

    def close(self) -> None:
        """Closes every descriptor (after the workers ended)."""
        for worker in range(self.workers):
            self.spawned(worker)  # the worker's ends, where this process still holds them
            for fd in (self._requests[worker][0], self._grants[worker][1]):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def serve(self, finished: Callable[[int], bool]) -> None:
        """Grants turns until every worker is ``finished(w)`` (its process ended): a
        worker that died holding the turn, or is away, is never waited for long."""
        n = self.workers
        sel = selectors.DefaultSelector()
        for w in range(n):
            sel.register(self._requests[w][0], selectors.EVENT_READ, w)
        state = _Serving(n)
        try:
            while True:
                for w in range(n):
                    if not state.closed[w] and finished(w):
                        state.close(w)
                if all(state.closed):
                    return
                # A process's end shows as end of file on its request pipe once it was
                # spawned(); finished() catches the rest (a child of the worker that
                # inherited its ends and lives on).
                if state.holder is None and any(state.exit_waiting):
                    self._grant_exits(state)
                timeout = 0.1
                if state.holder is None and not state.exiting and any(state.waiting):
                    granted, wait = self._grant_next(state)
                    if granted:
                        continue
                    if wait is not None:
                        timeout = min(timeout, wait)
                for key, _ in sel.select(timeout):
                    if not self._read(state, key.fd, key.data):
                        sel.unregister(key.fd)
        finally:
            sel.close()

    def _grant_exits(self, state: _Serving) -> None:
        """Grants every worker that asked to hold timing off to its end the hold, at once."""
        # Ends before any more timing, all that asked at once. (Holding them back until
        # the last timing turn, to run them all together, was measured: no shorter, 2.82
        # against 2.63 s a session, medians of 5.)
        for w in range(self.workers):
            if state.exit_waiting[w]:
                state.exit_waiting[w] = False
                state.exiting.add(w)
                self._grant(state, w)

    def _grant_next(self, state: _Serving) -> tuple[bool, float | None]:
        """Grants the turn to the next waiting worker: (whether one got it, else seconds
        worth waiting for one, or None)."""
        grant, wait = self._next(state, time.monotonic())
        if grant is None:
            return False, wait
        state.waiting[grant], state.holder = False, grant
        self.turns[grant] += 1
        self._grant(state, grant)
        return True, None

    def _read(self, state: _Serving, fd: int, w: int) -> bool:
        """Takes in what worker ``w`` wrote: ``a`` (asks for the turn), ``r`` (gives it
        back), ``x`` (asks to hold timing off to its end). False: its pipe closed."""
        data = os.read(fd, 64)
        if not data:
            state.close(w)
            return False
        for byte in data:
            if byte == ord("x"):
                state.exit_waiting[w] = True
            elif byte == ord("a"):
                state.waiting[w] = True
                if state.arrived[w] is None:
                    state.arrived[w] = time.monotonic()
            elif byte == ord("r") and state.holder == w:
                state.holder, state.released[w] = None, time.monotonic()
        return True

    def _grant(self, state: _Serving, w: int) -> None:
        try:
            os.write(self._grants[w][1], b"g")
        except OSError:  # it died between asking and the grant
            state.close(w)

    def _next(self, state: _Serving, now: float) -> tuple[int | None, float | None]:
        """(the worker to grant, or None; else seconds worth waiting, or None)."""
        first_arrival = min(a for a in state.arrived if a is not None)
        if now < first_arrival + self.start_wait and any(
                state.arrived[w] is None and not state.ending(w) for w in range(self.workers)):
            return None, first_arrival + self.start_wait - now  # not everyone started
        for step in range(len(self._cycle)):
            w = self._cycle[(state.position + step) % len(self._cycle)]
            if state.closed[w]:
                continue
            if state.waiting[w]:
                state.position = (state.position + step + 1) % len(self._cycle)
                return w, None
            # Away (between blocks or benchmarks): worth waiting for a moment so the
            # order holds, then passed over until it asks again.
            until = state.released[w] + self.partner_wait
            if now < until:
                return None, until - now
        return None, None


class _Serving:
    """The coordinator's view of its workers while serving."""

    def __init__(self, n: int) -> None:
        self.waiting, self.closed = [False] * n, [False] * n
        self.arrived: list[float | None] = [None] * n  # when each first asked
        self.released = [-1e9] * n                      # when each last gave a turn back
        self.holder: int | None = None
        self.position = 0                               # where in the cycle turns go next
        self.exit_waiting = [False] * n                 # asked to hold timing off to its end
        self.exiting: set[int] = set()                  # holding it: no one times

    def ending(self, w: int) -> bool:
        """Whether worker ``w`` will time no more (ended, or asked to hold its end)."""
        return self.closed[w] or self.exit_waiting[w] or w in self.exiting

    def close(self, w: int) -> None:
        self.closed[w], self.waiting[w], self.exit_waiting[w] = True, False, False
        self.exiting.discard(w)
        if self.holder == w:
            self.holder = None
