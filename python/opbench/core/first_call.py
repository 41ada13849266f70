"""The cold first call of a Timer's statement, timed apart from the steady state.

The first call pays for everything lazy: ``torch.compile``'s tracing and code
generation, kernel selection, allocator growth, import-time caches. Warm-up
hides it from ``timeit`` and ``blocked_autorange`` (rightly: it is not the
per-call cost), yet it is often what a user feels. ``measure_first_call``
times exactly one call, with setup run first and untimed, and must be called
on a fresh Timer, before anything else runs the statement.

Example:
    >>> import opbench
    >>> t = opbench.Timer("sum(range(100))")
    >>> measure_first_call(t) > 0
    True
"""
from __future__ import annotations

from typing import Any

__all__ = ["INFO_KEY", "measure_first_call"]

# Where Timer(record_first_call=True) stores the figure in Measurement.info.
INFO_KEY = "first_call_s"


def measure_first_call(timer: Any) -> float:
    """Seconds taken by one call of ``timer``'s statement, setup excluded.

    Uses the Timer's own engine (``timer.run(1)``: the native loop for a
    callable, the timing template for a string, the device clock with
    ``device_timing``), so the figure is comparable with the Timer's
    steady-state times, in the Timer's thread setting. The engine's one-time
    work (compiling a C++ statement) is done first and excluded: it is not
    part of any call.

    Raises:
        TypeError: ``timer`` is not an opbench Timer.
    """
    if not hasattr(timer, "engine") or not hasattr(timer, "run"):
        raise TypeError(f"measure_first_call needs an opbench.Timer, got {type(timer).__name__}")
    # A C++ statement is built lazily by its first timeit; build it now.
    timer.engine.prepare()
    # In the Timer's thread setting (run applies it): torch.compile guards on the
    # thread count, so a first call under another setting would compile again.
    return float(timer.run(1))
