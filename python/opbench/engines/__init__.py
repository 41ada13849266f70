"""Engines: the ways opbench runs a statement ``number`` times between two clock reads.

``opbench.Timer`` owns what torch's Timer owns (the arguments, the block-size
search, warm-up and stopping rules, the Measurement); an engine owns one way of
running code, one file each:

* ``engines/python.py``: Python strings (timeit's template) and callables (the
  native loop for C callables, an unrolled loop for Python functions);
* ``engines/cpp.py``: C++ statements, compiled into a cached shared library;
* ``engines/cuda.py``: device time of a Python statement's GPU work (CUDA events).

The protocol is ``timeit.Timer``'s, the one torch's own tests inject mocks
through (``Timer._timer_cls``)::

    engine = EngineClass(stmt=..., setup=..., timer=..., globals=..., **extras)
    engine.timeit(number)  # seconds for `number` runs, setup excluded; number >= 0

``Engine`` adds optional hooks, each with a do-nothing default, so a new engine
writes only what it needs and Timer never asks what kind of engine it has. A
plain ``timeit.Timer``-like object (a mock) is wrapped in ``Foreign``.

Engines: ``python`` (Python statements), ``cpp/`` (C++ statements: ``engine``, and the
toolchain ``opbench.engines.cpp`` is: ``build``, ``pch``, ``extension``), ``cuda/`` (device time:
``opbench.engines.cuda``'s timers and events, and ``engine``).

Floor: engines; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).

Example:
    >>> class Fixed(Engine):
    ...     def timeit(self, number):
    ...         return 0.5 * number
    >>> Fixed().timeit(10), Fixed().samples(10, [5.0]), Fixed().clock
    (5.0, (10, [5.0]), None)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Engine", "Foreign", "as_engine"]


class Engine:
    """Base of the engines; ``timeit`` is the only method an engine must define."""

    #: What the Measurement's text names as its clock; None is torch's default
    #: (the host clock after an accelerator synchronize).
    clock: str | None = None

    def timeit(self, number: int) -> float:
        """Seconds taken by ``number`` runs of the statement (0: the harness alone)."""
        raise NotImplementedError

    def prepare(self) -> None:
        """One-time work that is part of no call (compiling C++), done now rather than
        inside the first timed call. Timer calls it before timing a first call."""

    def reset(self) -> None:
        """The start of a measurement: drop state a previous one left (a C++ setup
        frame, per-call logs)."""

    def finish(self) -> None:
        """The end of a measurement: release what it held (a C++ setup frame, whose
        guards must not outlive the measurement on the caller's thread)."""

    def discard_samples(self) -> None:
        """Forget per-call records taken so far (they were warm-up, not samples)."""

    def warm_up(self) -> None:
        """Before a block-size search: make every later call a warm one (a device
        engine runs its cold first call here), so block sizes come from warm calls."""

    def block_unit(self) -> int:
        """Block sizes are multiples of this many calls (a CUDA graph's replay)."""
        return 1

    def samples(self, number: int, times: list[float]) -> tuple[int, list[float]]:
        """What a Measurement of these blocks holds, as ``(number_per_run, raw_times)``.

        The blocks themselves by default; an engine that timed every call alone
        returns those calls (``number_per_run == 1``): the true distribution.
        """
        return number, times

    def info(self) -> dict[str, Any]:
        """Facts about the measurement for ``Measurement.info`` (device, clocks, ...)."""
        return {}

    def as_callable(self) -> Callable[[], Any]:
        """The statement as a zero-argument callable, setup already run, for code that
        drives the calls itself (profilers, device timers)."""
        raise ValueError(
            f"{type(self).__name__} cannot hand out its statement as a Python callable "
            "(cProfile and device timing need a Python statement or callable)"
        )


class Foreign(Engine):
    """Any object with ``timeit(number) -> seconds`` (timeit.Timer, a mock), as an Engine."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def timeit(self, number: int) -> float:
        return float(self.inner.timeit(number))


def as_engine(runner: Any) -> Engine:
    """``runner`` itself when it is an Engine, else wrapped in ``Foreign``."""
    return runner if isinstance(runner, Engine) else Foreign(runner)
