"""How a Timer takes samples: the measurement primitives under its sampling protocol.

``Timer`` (``opbench.timer``) inherits these: starting a measurement (machine
checks, the first call, counted work, a fresh engine), timing one block with the
scheduler's signals around it, discarding warm-up, torch's block-size search and
measurement loop (kept step for step: parity depends on it), and building the
Measurement. Its public methods (``timeit``, ``blocked_autorange``, ``block_size``,
``run``, ``measurement``, ...) are all on ``Timer``; nothing here is called from
outside the Timer.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn

from opbench import environment
from opbench._threads import set_torch_threads
from opbench.core import disturbance, first_call, work
from opbench.core.measurement import Measurement
from opbench.core.task_spec import TaskSpec
from opbench.engines import Engine, Foreign
from opbench.engines.python import default_timer
from opbench.errors import WarningRecord, recording
from opbench.stats.numerics import f32

__all__ = ["MAX_BLOCK_SIZE", "Sampling"]

# Largest block size torch will try: its C++ timers take an int32 count.
MAX_BLOCK_SIZE = 2147483647
# Clocks that read wall time, as the default does: only their blocks can wait for a CPU.
_WALL_CLOCKS = (time.perf_counter, time.monotonic)


class Sampling:
    """The Timer's private measuring state and primitives (a base class of ``Timer``)."""

    _engine: Engine
    _task_spec: TaskSpec
    _globals: dict[str, Any]
    _info: dict[str, Any]
    _overhead: float | None
    _record_first_call: bool
    _work_pending: bool
    # Warnings about the measurement in progress (opbench.errors.recording).
    _warnings: list[WarningRecord]
    # Whether blocks are judged for disturbance, and the probe of the current measurement.
    _probes: bool
    _probe: disturbance.Probe | None

    def _init_sampling(self, clock: Callable[[], float], record_first_call: bool) -> None:
        """The state before any measurement (``_engine`` set). The scheduler's signals around
        each block (``opbench.core.disturbance``) are taken for a real wall clock only: a
        mock's times have nothing to do with this machine."""
        self._record_first_call = record_first_call
        self._overhead = None
        self._warnings = []
        self._probes = (clock is default_timer or clock in _WALL_CLOCKS) and not isinstance(
            self._engine, Foreign) and self._engine.clock is None
        self._probe = None

    def _result(self, number: int, times: list[float], final: bool = False) -> Measurement:
        """The Measurement so far, the measurement going on (a stopping rule's look), or
        (``final``) the one it ends with, judged for disturbance."""
        number_per_run, raw_times = self._engine.samples(number, list(times))
        info = dict(self._info)
        info.update(self._engine.info())
        if number_per_run != number:  # the engine kept each call, not the blocks
            info["block_size"] = number
        signals = self._probe.record(raw_times) if final and self._probe is not None else None
        if signals is not None:
            info[disturbance.INFO_KEY] = signals
            if disturbance.judge(raw_times, signals).disturbed:
                with recording(self._warnings):
                    disturbance.warn_disturbed(
                        next(iter(self._task_spec.title.splitlines()), "(empty statement)"))
        if self._warnings:
            info["warnings"] = list(self._warnings)
        return Measurement(
            number_per_run=number_per_run,
            raw_times=raw_times,
            task_spec=self._task_spec,
            overhead=self._overhead,
            clock=self._engine.clock,
            info=info,
        )

    # -- the measurement primitives ------------------------------------------

    def _begin_measurement(self) -> None:
        """Starts a measurement: machine checks, the first-call time if asked for
        (before anything warms up), fresh engine state."""
        self._warnings = []
        with recording(self._warnings):
            environment.check_machine()
            if self._record_first_call and first_call.INFO_KEY not in self._info:
                self._info[first_call.INFO_KEY] = first_call.measure_first_call(self)
            if self._work_pending:
                self._work_pending = False
                self._task_spec = work.for_timer(self, self._globals, self._info)
            self._engine.reset()
            self._probe = None
            if self._probes and disturbance.enabled():
                disturbance.check_threads(self._task_spec.num_threads)
                self._probe = disturbance.Probe(self._task_spec.num_threads)

    def _discard_warm_up(self) -> None:
        """Forgets the calls timed so far: they warmed up, they are not samples."""
        self._engine.discard_samples()
        if self._probe is not None:
            self._probe.discard()

    def _timeit(self, number: int) -> float:
        with recording(self._warnings):
            probe = self._probe
            if probe is not None:
                probe.begin()  # outside the engine's clock reads, as is end()
            # Even a C++ clock read takes tens of ns, so no real block takes under
            # 1 ns; the floor also keeps later divisions finite.
            seconds = max(self._engine.timeit(number), 1e-9)
            if probe is not None:
                probe.end(seconds)
            return seconds

    def _warm_up(self, number: int) -> None:
        """One untimed block of ``number // 100`` runs (at least 2), as timeit does."""
        self._timeit(number=max(int(number // 100), 2))
        self._discard_warm_up()

    # -- torch's algorithms (kept step for step: parity depends on it) --------

    def _threaded_measurement_loop(
        self,
        number: int,
        time_hook: Callable[[], float],
        stop_hook: Callable[[list[float]], bool],
        min_run_time: float,
        max_run_time: float | None = None,
        callback: Callable[[int, float], NoReturn] | None = None,
    ) -> list[float]:
        total_time = 0.0
        can_stop = False
        times: list[float] = []
        self._discard_warm_up()  # block-size search calls are not samples
        with set_torch_threads(self._task_spec.num_threads):
            while (total_time < min_run_time) or (not can_stop):
                time_spent = time_hook()
                times.append(time_spent)
                total_time += time_spent
                if callback:
                    callback(number, time_spent)
                can_stop = stop_hook(times)
                if max_run_time and total_time > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time: float) -> int:
        """Grows the block size tenfold until timer overhead is under 0.01% of a block
        (and the block takes at least min_run_time / 1000). Doubles as a warm-up."""
        self._begin_measurement()
        with set_torch_threads(self._task_spec.num_threads):
            self._engine.warm_up()  # a device's cold first call must not size the blocks
            overhead = _median_f32([self._timeit(0) for _ in range(5)])
            number = self._engine.block_unit()
            while True:
                time_taken = self._timeit(number)
                relative_overhead = overhead / time_taken
                if relative_overhead <= 1e-4 and time_taken >= min_run_time / 1000:
                    break
                if time_taken > min_run_time:
                    break
                if number * 10 > MAX_BLOCK_SIZE:
                    break
                number *= 10
        return number


def _median_f32(values: list[float]) -> float:
    """``torch.tensor(values).median().item()``: float32 values, the lower middle one."""
    ordered = sorted(f32(v) for v in values)
    return ordered[(len(ordered) - 1) // 2]
