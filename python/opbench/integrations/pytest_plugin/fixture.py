"""The ``opbench`` fixture: times code inside a test and records the result for the
session (timed, confirmed by ``policy``, or counted in instruction or memory mode)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from opbench.integrations.pytest_plugin import policy
from opbench.integrations.pytest_plugin.options import _METHODS
from opbench.integrations.pytest_plugin.session import _STATE, _Session


class BenchmarkFixture:
    """The ``opbench`` fixture: call it to time code; see ``__call__``."""

    def __init__(self, node: pytest.Item, state: _Session) -> None:
        self._node_id = node.nodeid
        marker = node.get_closest_marker("opbench")
        self._group = marker.kwargs.get("group") if marker is not None else None
        self._threshold = marker.kwargs.get("threshold") if marker is not None else None
        self._state = state
        self._calls = 0

    def _key(self, name: str | None) -> str:
        from opbench.core.identity import pytest_key

        index, self._calls = self._calls, self._calls + 1
        return pytest_key(self._node_id, name, index)

    def __call__(
        self,
        stmt: str | Callable[[], Any],
        *,
        setup: str | Callable[[], Any] = "pass",
        globals: dict[str, Any] | None = None,
        name: str | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        method: str = "blocked_autorange",
        min_run_time: float | None = None,
        max_run_time: float | None = None,
        min_samples: int | None = None,
        method_kwargs: dict[str, Any] | None = None,
        instruction_number: int | None = None,
        instruction_repeats: int | None = None,
        memory_number: int | None = None,
        memory_repeats: int | None = None,
        mode: str | None = None,
        threshold: float | str | None = None,
        **timer_kwargs: Any,
    ) -> Any:
        """Times ``stmt`` with ``opbench.Timer`` and records the result for the session.

        Args:
            stmt, setup, globals: as for ``opbench.Timer``.
            name: tells this benchmark apart from the test's others; its key is
                ``<node id>::<name>`` (default: the node id, ``#1``, ``#2``... for
                later calls in one test).
            label: defaults to the test's node id (the summary's row).
            sub_label, description: as for ``opbench.Timer``.
            method: ``"blocked_autorange"`` (default: blocks until ``min_run_time``
                seconds and ``min_samples`` blocks), ``"adaptive_autorange"`` or
                ``"converge"``, called with ``min_run_time`` and ``method_kwargs``.
            min_run_time, max_run_time, min_samples: default to the session's
                ``--opbench-min-time``, ``--opbench-max-time``, ``--opbench-min-samples``.
            instruction_number, instruction_repeats: in instruction mode, calls per
                counted loop and loops counted (default: the session's
                ``--opbench-instruction-number`` / ``--opbench-instruction-repeats``).
            memory_number, memory_repeats: in memory mode, calls counted per window and
                windows counted (default: ``--opbench-memory-number`` /
                ``--opbench-memory-repeats``).
            mode: ``"memory"`` counts this benchmark's memory per call instead of timing
                it, whatever the session's mode (``Timer.memory``: outside a
                ``--opbench-mode=memory`` session, in a child process, so the statement
                must pickle); None (default) follows ``--opbench-mode``.
            threshold: the slowdown that fails this benchmark's gate (``"10%"`` or 0.1),
                instead of ``--opbench-fail-above`` (default: the marker's
                ``@pytest.mark.opbench(threshold=...)``); recorded in ``info["threshold"]``,
                which ``opbench compare`` and ``opbench ab`` use too.
            timer_kwargs: more ``opbench.Timer`` arguments (``num_threads``, ``env``,
                ``flops=`` / ``bytes=`` for throughput: a number, a callable of the
                inputs, or ``"count"``; ...).

        Returns:
            The Measurement (under ``--opbench-disable``: of a single call); in
            instruction mode, the InstructionCounts (``.median`` is instructions
            per run); in memory mode, the MemoryCounts (``.allocations``, ``.bytes``,
            ``.peak``, ``.leak`` per call).

        Example::

            def test_sum(opbench):
                m = opbench("sum(xs)", setup="xs = list(range(1000))", min_run_time=0.05)
                assert m.median > 0
        """
        if method not in _METHODS:
            raise ValueError(f"method must be one of {', '.join(_METHODS)}; got {method!r}")
        if mode not in (None, "memory"):
            raise ValueError(f"mode must be None (the session's) or 'memory', got {mode!r}")
        from opbench.timer import Timer

        state = self._state
        own = policy.threshold_of(self._threshold if threshold is None else threshold)
        timer = Timer(stmt, setup, globals=globals, name=self._key(name),
                      label=self._node_id if label is None else label,
                      sub_label=sub_label, description=description, **timer_kwargs)
        if state.disabled:
            # One call through the Timer's own engine: same setup, globals and torch
            # handling as a timed run, and the same kind of result.
            return timer.measurement(1, [timer.run(1)])
        with state.timed():
            if state.mode == "memory" or mode == "memory":
                result = self._memory(
                    timer, state.memory_number if memory_number is None else memory_number,
                    state.memory_repeats if memory_repeats is None else memory_repeats)
            elif state.mode == "instructions":
                result = self._count(
                    timer,
                    state.instruction_number if instruction_number is None else instruction_number,
                    state.instruction_repeats if instruction_repeats is None
                    else instruction_repeats)
            else:
                # In an `opbench ab` round, the base and head processes take turns to time.
                turns = state.turns
                timed = timer if turns is None else _taking_turns(timer, turns)

                def measure() -> Any:
                    if turns is not None:
                        turns.acquire()
                        return self._time(timed, method, min_run_time, max_run_time,
                                          min_samples, method_kwargs or {})
                    with _on_fastest_cpu(timer.task_spec.num_threads):
                        return self._time(timed, method, min_run_time, max_run_time,
                                          min_samples, method_kwargs or {})

                try:
                    first = _recovered(measure) if state.recover else measure()
                    result = self._confirmed(first, measure,
                                             state.threshold if own is None else own)
                finally:
                    if turns is not None:
                        turns.release()
        if self._group is not None:
            result.info["group"] = self._group
        if own is not None:
            result.info["threshold"] = own
        state.results.append(result)
        return result

    def _confirmed(self, result: Any, measure: Callable[[], Any], threshold: float) -> Any:
        return policy.confirmed(self._state, result, measure, threshold)

    def _time(self, timer: Any, method: str, min_run_time: float | None,
              max_run_time: float | None, min_samples: int | None,
              kwargs: dict[str, Any]) -> Any:
        state = self._state
        min_run_time = state.min_time if min_run_time is None else min_run_time
        if method == "blocked_autorange":
            from opbench import _choices
            from opbench.core.stopping import sample

            # Blocks of one length in every run (and in ab's turns): what a run's figure, its
            # 10th percentile, is taken over must not change from run to run.
            return sample(timer, min_run_time=min_run_time,
                          min_samples=state.min_samples if min_samples is None else min_samples,
                          max_run_time=state.max_time if max_run_time is None else max_run_time,
                          block=_choices.BLOCK)
        return getattr(timer, method)(min_run_time=min_run_time, **kwargs)

    def _count(self, timer: Any, number: int, repeats: int) -> Any:
        from opbench._checks import check_count
        from opbench._threads import set_torch_threads
        from opbench.callgrind import in_process

        check_count("instruction_number", number)
        check_count("instruction_repeats", repeats)
        # In the Timer's thread setting, as collect_callgrind counts: torch's pool
        # otherwise runs at the machine's size and its workers' share is counted.
        with set_torch_threads(timer.task_spec.num_threads):
            return in_process.count(timer.engine.as_callable(), number=number,
                                    repeats=repeats, task_spec=timer.task_spec,
                                    out_prefix=os.environ[in_process.OUT_PREFIX_ENV])


    def _memory(self, timer: Any, number: int, repeats: int) -> Any:
        from opbench._checks import check_count

        check_count("memory_number", number)
        check_count("memory_repeats", repeats)
        return timer.memory(number, repeats=repeats)


# CPUs probed at most to pick the fastest (beyond that, the last one is taken as is).
_PROBED_CPUS = 16


def _fastest_cpu(allowed: set[int]) -> int:
    """The allowed CPU the speed probe finds fastest now (opbench._C.cpu_speed_probe_ns: the
    fastest of 20 tries of a fixed 1 us of work, on each in turn); the last on a tie."""
    from opbench import _C

    if len(allowed) > _PROBED_CPUS:
        return max(allowed)
    speeds = {}
    for cpu in sorted(allowed):
        os.sched_setaffinity(0, {cpu})
        speeds[cpu] = int(_C.cpu_speed_probe_ns(20, 1000))
    return min(sorted(allowed, reverse=True), key=speeds.__getitem__)


@contextlib.contextmanager
def _on_fastest_cpu(threads: int) -> Iterator[None]:
    """The measuring thread on the allowed CPU that runs fastest now, while a
    single-threaded benchmark is timed.

    On a shared machine the CPUs are not alike, and not for long: one whose hardware
    sibling another tenant keeps busy runs code up to 2x slower (measured here: the same
    function at 7.5 us on one CPU and 12.3 us on the other, every time for a while; then
    the other way round), and a thread the scheduler moves between them reads one or the
    other by chance, for each benchmark of each run: a history of such runs steps up and
    down by 1.7x with no change of code. The fastest CPU is the one free of that load
    (``opbench ab``'s turns put every process on one CPU instead: there the sides share
    whatever it does). Parallel benchmarks are left to the scheduler (their threads need
    the CPUs)."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):  # no affinity on this system
        allowed = set()
    if threads != 1 or len(allowed) < 2:
        yield
        return
    try:
        os.sched_setaffinity(0, {_fastest_cpu(allowed)})
    except OSError:
        os.sched_setaffinity(0, allowed)
        yield
        return
    try:
        yield
    finally:
        try:
            os.sched_setaffinity(0, allowed)
        except OSError:
            pass


def _recovered(measure: Callable[[], Any]) -> Any:
    """``measure()``, measured again at once while the busy machine disturbs it: later,
    the test's fixtures it may use are gone."""
    from opbench.core.recovery import recovered

    return recovered(measure)


def _taking_turns(timer: Any, turns: Any) -> Any:
    from opbench.gate.turns import TakingTurns

    return TakingTurns(timer, turns)


@pytest.fixture
def opbench(request: pytest.FixtureRequest) -> BenchmarkFixture:
    """Times code inside a test: ``opbench(fn_or_stmt, ...)`` returns the Measurement."""
    return BenchmarkFixture(request.node, request.config.stash[_STATE])
