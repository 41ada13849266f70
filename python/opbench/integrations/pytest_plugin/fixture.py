"""The ``opbench`` fixture: times code inside a test and records the result for the
session (timed, or counted in instruction or memory mode).

When a timed result stands: a measurement the gate would call a regression is measured
again, and all measurements are pooled (``confirmed``); a benchmark's own threshold
(``threshold_of``)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from opbench.integrations.pytest_plugin.options import METHODS
from opbench.integrations.pytest_plugin.state import State, state_of


class BenchmarkFixture:
    """The ``opbench`` fixture: call it to time code; see ``__call__``."""

    def __init__(self, node: pytest.Item, state: State) -> None:
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
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
        if mode not in (None, "memory"):
            raise ValueError(f"mode must be None (the session's) or 'memory', got {mode!r}")
        from opbench.timer import Timer

        state = self._state
        own = threshold_of(self._threshold if threshold is None else threshold)
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
                    with on_fastest_cpu(timer.task_spec.num_threads):
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
        return confirmed(self._state, result, measure, threshold)

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


# Re-measurements of a benchmark that looks like a regression, before the gate decides.
_CONFIRMATIONS = 2


def confirmed(state: State, result: Any, measure: Callable[[], Any],
              threshold: float) -> Any:
    """``result``, or all its measurements pooled when the gate would call it a
    regression and it was measured again.

    A burst of load from another process during one measurement reads as a
    slowdown; a real regression is there in every measurement. So a benchmark
    the gate would fail is measured again (up to _CONFIRMATIONS times, while the
    pooled measurements still look like a regression) and every measurement is
    pooled into the result, each with equal weight (``pooled``): keeping the
    fastest would bias the gate toward passing. ``info["remeasured"]`` says how
    many were pooled, and the report lists them.
    """
    if state.baseline is None:
        return result
    from opbench import gate
    from opbench.core import identity

    key = identity.key(result)
    baseline = [r for r in state.baseline.all() if identity.key(r) == key]
    taken = [result]
    while baseline and len(taken) <= _CONFIRMATIONS:
        row = gate.compare(baseline, [pooled(taken)], threshold=threshold,
                           metric=state.gate_on).rows
        if not row or row[0].status not in ("regression", "possible regression"):
            break
        taken.append(measure())
    if len(taken) == 1:
        return result
    result = pooled(taken)
    result.info["remeasured"] = {"measurements": len(taken), "how": "pooled",
                                 "why": "looked slower than the baseline"}
    return result


def pooled(measurements: list[Any]) -> Any:
    """One Measurement of ``measurements`` (same statement) pooled with equal weight: each
    gives as many per-run times as the smallest has blocks (evenly spaced order
    statistics), so a measurement of many small blocks cannot outvote the others."""
    if len(measurements) == 1:
        return measurements[0]
    from opbench.core.measurement import Measurement

    n = min(len(m.times) for m in measurements)
    times = []
    for m in measurements:
        ordered = sorted(m.times)
        step = (len(ordered) - 1) / max(n - 1, 1)
        times += [ordered[round(i * step)] for i in range(n)]
    first = measurements[0]
    return Measurement(1, times, first.task_spec, metadata=first.metadata,
                       overhead=first.overhead, clock=first.clock, info=dict(first.info))


def threshold_of(value: Any) -> float | None:
    """A per-benchmark threshold ('10%' or 0.1) as a fraction; None when not given."""
    if value is None:
        return None
    from opbench.integrations.cli import UsageError, parse_fraction

    try:
        return parse_fraction(str(value), "threshold")
    except UsageError as e:
        raise ValueError(str(e)) from None


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
def on_fastest_cpu(threads: int) -> Iterator[None]:
    """The measuring thread on the allowed CPU that runs fastest now, while a
    single-threaded benchmark is timed.

    On a shared machine the CPUs are not alike, and not for long: one whose hardware
    sibling another tenant keeps busy runs code markedly slower, for a while, then the
    other way round (docs/busy-machine.md), and a thread the scheduler moves between them
    reads one or the other by chance, for each benchmark of each run: a history of such
    runs steps up and down with no change of code. The fastest CPU is the one free of that load
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
    from opbench.revisions.turns import TakingTurns

    return TakingTurns(timer, turns)


@pytest.fixture
def opbench(request: pytest.FixtureRequest) -> BenchmarkFixture:
    """Times code inside a test: ``opbench(fn_or_stmt, ...)`` returns the Measurement."""
    state = state_of(request.config)
    assert state is not None  # made by pytest_configure, before any test runs
    return BenchmarkFixture(request.node, state)
