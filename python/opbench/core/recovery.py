"""Recovery: measure disturbed results again, within a time budget.

A figure the busy machine pushed up (``opbench.core.disturbance``) is flagged
wherever it is shown; where the code that made it can run again, opbench can
do better and measure it again once the machine is quieter. ``remeasure``
goes over the disturbed results in rounds, at the end of a table (so a burst
of other work has time to pass), waiting briefly before each try for the
CPUs the result needs to be free, until every result is clean or the budget is
spent. A new figure replaces the old one when it is clean, or when both are
disturbed and it is lower (a busy machine only ever adds time). Each result
measured again says how often in ``info["disturbance"]["remeasured"]``.

The command line, the demo and the pytest plugin recover by default, with a
budget of as much time again as the first measurement took; the Python API
behaves as torch's does unless asked (``run_all(..., recover=True)``).

Example:
    >>> from opbench import Measurement, TaskSpec
    >>> busy = {"waits": [0.9] * 6, "threads": 2, "cpus": 2}
    >>> first = [Measurement(1, [9e-3] * 6, TaskSpec("f()", "pass"), info={"disturbance": busy})]
    >>> again = Measurement(1, [1e-3] * 6, TaskSpec("f()", "pass"),
    ...                     info={"disturbance": {**busy, "waits": [0.0] * 6}})
    >>> [m.median for m in remeasure(first, lambda i: again, budget=1.0, quiet_wait=0)]
    [0.001]
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from opbench import environment
from opbench.core.disturbance import INFO_KEY, SLOW_LIMIT, slowdown_now

__all__ = ["QUIET_WAIT_S", "recovered", "remeasure", "wait_until_free"]

#: How long to wait, at most, for CPUs to come free before a try.
QUIET_WAIT_S = 0.5
_POLL_S = 0.1


def wait_until_free(threads: int, timeout: float) -> bool:
    """Waits up to ``timeout`` seconds until other processes leave ``threads`` CPUs free
    (judged over ``0.1`` s windows of ``/proc/stat``) and this core runs at full speed
    (``disturbance.slowdown_now`` within ``SLOW_LIMIT``: free CPUs are not enough where
    a hidden hyperthread sibling is busy); True when both hold."""
    deadline = time.monotonic() + timeout
    previous = environment.cpu_snapshot()
    cpus = environment.allowed_cpus()
    while True:
        if previous is None:  # no /proc/stat: the core's speed alone
            if slowdown_now() <= SLOW_LIMIT:
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
        now = environment.cpu_snapshot() if previous is not None else None
        if now is not None and previous is not None:
            elapsed = now.wall - previous.wall
            others = max(0.0, ((now.busy - previous.busy) - (now.own - previous.own)) / elapsed) \
                if elapsed > 0 else math.inf
            if cpus - others >= min(threads, cpus) - 0.25 and slowdown_now() <= SLOW_LIMIT:
                return True
            previous = now


def _disturbed(result: Any) -> bool:
    return bool(getattr(result, "disturbed", False))


def _better(old: Any, new: Any) -> Any:
    if not _disturbed(new):
        return new
    return new if new.median < old.median else old


def remeasure(
    results: Sequence[Any],
    measure: Callable[[int], Any],
    *,
    budget: float,
    quiet_wait: float = QUIET_WAIT_S,
) -> list[Any]:
    """``results`` with each disturbed one measured again by ``measure(i)`` while the
    ``budget`` (seconds of wall time, waiting included) lasts.

    Args:
        results: Measurements (anything else is kept as it is).
        measure: a new result for ``results[i]``.
        budget: seconds to spend at most; 0 measures nothing again.
        quiet_wait: seconds to wait, at most, before each try, for the CPUs the
            result asked for to be free.
    """
    if not 0 <= budget < math.inf:
        raise ValueError(f"budget must be a finite number of seconds >= 0, got {budget!r}")
    out = list(results)
    attempts = [0] * len(out)
    deadline = time.monotonic() + budget
    while True:
        todo = [i for i, r in enumerate(out) if _disturbed(r)]
        if not todo:
            break
        for i in todo:
            left = deadline - time.monotonic()
            if left <= 0:
                return _counted(out, attempts)
            if quiet_wait > 0:
                wait_until_free(out[i].task_spec.num_threads, min(quiet_wait, left))
            attempts[i] += 1
            out[i] = _better(out[i], measure(i))
    return _counted(out, attempts)


def recovered(measure: Callable[[], Any], *, budget: float | None = None,
              quiet_wait: float = QUIET_WAIT_S) -> Any:
    """``measure()``, measured again while disturbed, within ``budget`` seconds (default:
    as long again as the first measurement took): one result, as the command line's
    ``timeit`` and the pytest fixture take it.

    Example:
        >>> import opbench
        >>> recovered(lambda: opbench.Timer("pass").timeit(100)).number_per_run
        100
    """
    started = time.monotonic()
    first = measure()
    spent = time.monotonic() - started
    return remeasure([first], lambda i: measure(), budget=spent if budget is None else budget,
                     quiet_wait=quiet_wait)[0]


def _counted(results: list[Any], attempts: list[int]) -> list[Any]:
    for r, n in zip(results, attempts):
        record = getattr(r, "info", {}).get(INFO_KEY) if n else None
        if isinstance(record, dict):
            record["remeasured"] = n
    return results
