"""The ``opbench`` fixture: times code inside a test and records the result for the
session (timed, confirmed by ``policy``, or counted in instruction mode)."""
from __future__ import annotations

import os
from collections.abc import Callable
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
            per run).

        Example::

            def test_sum(opbench):
                m = opbench("sum(xs)", setup="xs = list(range(1000))", min_run_time=0.05)
                assert m.median > 0
        """
        if method not in _METHODS:
            raise ValueError(f"method must be one of {', '.join(_METHODS)}; got {method!r}")
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
            if state.mode == "instructions":
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
                    return self._time(timed, method, min_run_time, max_run_time, min_samples,
                                      method_kwargs or {})

                try:
                    result = self._confirmed(measure(), measure,
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
            from opbench.core.stopping import sample

            return sample(timer, min_run_time=min_run_time,
                          min_samples=state.min_samples if min_samples is None else min_samples,
                          max_run_time=state.max_time if max_run_time is None else max_run_time)
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


def _taking_turns(timer: Any, turns: Any) -> Any:
    from opbench.gate.turns import TakingTurns

    return TakingTurns(timer, turns)


@pytest.fixture
def opbench(request: pytest.FixtureRequest) -> BenchmarkFixture:
    """Times code inside a test: ``opbench(fn_or_stmt, ...)`` returns the Measurement."""
    return BenchmarkFixture(request.node, request.config.stash[_STATE])
