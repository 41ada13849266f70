"""Recovery: measure disturbed results again, within a time budget.

A figure the busy machine pushed up (``opbench.core.disturbance``) is flagged
wherever it is shown; where the code that made it can run again, opbench can
do better and measure it again once the machine is quieter. ``remeasure``
goes over the disturbed results in rounds, at the end of a table (so a burst
of other work has time to pass), waiting up to a second before each try for
the CPUs the result needs to be free (unless the try before came out clean: the
machine is quiet now), until every result is clean or the budget is spent. A
new figure replaces the old one when it is clean, or when both are disturbed
and it is lower (a busy machine only ever adds time). Each result measured
again says how often in ``info["disturbance"]["remeasured"]``.

The command line, the demo and the pytest plugin recover by default, with a
budget of three quarters as much time again as the first measurement took
(``default_budget``): a first pass on a busy machine takes a little longer
than on a quiet one, and the whole stays within twice a quiet table's time.
The Python API behaves as torch's does unless asked
(``run_all(..., recover=True)``).

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
from opbench.core.disturbance import INFO_KEY, SLOW_LIMIT, slowdown_now, speed_ns

__all__ = ["BUDGET_SHARE", "QUIET_WAIT_S", "default_budget", "recovered", "remeasure",
           "wait_for_speed", "wait_until_free"]

#: How long to wait, at most, for CPUs to come free before a try: a burst of other
#: work (a compile step, a test process) of about a second passes; one that lasts
#: longer is measured through, and the lower of the disturbed figures kept.
QUIET_WAIT_S = 1.0
_POLL_S = 0.1
#: The default budget, as a share of the time the first measurement took.
BUDGET_SHARE = 0.75


def default_budget(spent: float) -> float:
    """The seconds recovery may take after a first measurement that took ``spent``.

    >>> default_budget(8.0)
    6.0
    """
    return BUDGET_SHARE * spent


def wait_until_free(threads: int, timeout: float) -> bool:
    """Waits up to ``timeout`` seconds until other processes leave ``threads`` CPUs free
    (judged over ``0.1`` s windows of ``/proc/stat``) and this core runs at full speed
    (``disturbance.slowdown_now`` within ``SLOW_LIMIT``: free CPUs are not enough where
    a hidden hyperthread sibling is busy); True when both hold."""
    deadline = time.monotonic() + timeout
    cpus = environment.allowed_cpus()
    previous = environment.cpu_snapshot()
    if previous is None and slowdown_now() <= SLOW_LIMIT:  # no /proc/stat: the speed alone
        return True
    while time.monotonic() < deadline:
        time.sleep(_POLL_S)
        now = environment.cpu_snapshot()
        if _others_leave(threads, cpus, previous, now) and slowdown_now() <= SLOW_LIMIT:
            return True
        previous = now
    return False


def wait_for_speed(full_speed_ns: float, limit: float, timeout: float) -> bool:
    """Waits up to ``timeout`` seconds until this core runs the speed probe within ``limit``
    times ``full_speed_ns`` (a full speed other processes recorded: a history's, where
    this process's own best may be a slowed core's); True when it does. Before a run is
    started again because its core was slowed (``opbench.revisions.backfill``'s make-up
    runs): another tenant's work on a core comes and goes over seconds."""
    deadline = time.monotonic() + timeout
    while speed_ns() > limit * full_speed_ns:
        if time.monotonic() >= deadline:
            return False
        time.sleep(_SPEED_POLL_S)
    return True


# How often wait_for_speed reads the probe (2 us of work a read).
_SPEED_POLL_S = 0.02


def _others_leave(threads: int, cpus: int, previous: Any, now: Any) -> bool:
    """Whether other processes left ``threads`` of ``cpus`` free between two CPU
    snapshots; True where either is missing (no ``/proc/stat``: no evidence they did not)."""
    if previous is None or now is None:
        return True
    elapsed = now.wall - previous.wall
    if elapsed <= 0:
        return False
    others = max(0.0, ((now.busy - previous.busy) - (now.own - previous.own)) / elapsed)
    return cpus - others >= min(threads, cpus) - 0.25


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
    # A try that came out clean is the best sign the machine is quiet now: the next
    # one goes at once, while the quiet lasts; the CPUs are checked after a disturbed try.
    quiet_now = False
    while True:
        todo = [i for i, r in enumerate(out) if _disturbed(r)]
        if not todo:
            break
        for i in todo:
            left = deadline - time.monotonic()
            if left <= 0:
                return _counted(out, attempts)
            if quiet_wait > 0 and not quiet_now:
                wait_until_free(out[i].task_spec.num_threads, min(quiet_wait, left))
            attempts[i] += 1
            fresh = measure(i)
            quiet_now = not _disturbed(fresh)
            out[i] = _better(out[i], fresh)
    return _counted(out, attempts)


def recovered(measure: Callable[[], Any], *, budget: float | None = None,
              quiet_wait: float = QUIET_WAIT_S) -> Any:
    """``measure()``, measured again while disturbed, within ``budget`` seconds (default:
    ``default_budget`` of the time the first measurement took): one result, as the command line's
    ``timeit`` and the pytest fixture take it.

    Example:
        >>> import opbench
        >>> recovered(lambda: opbench.Timer("pass").timeit(100)).number_per_run
        100
    """
    started = time.monotonic()
    first = measure()
    spent = time.monotonic() - started
    return remeasure([first], lambda i: measure(),
                     budget=default_budget(spent) if budget is None else budget,
                     quiet_wait=quiet_wait)[0]


def _counted(results: list[Any], attempts: list[int]) -> list[Any]:
    for r, n in zip(results, attempts):
        record = getattr(r, "info", {}).get(INFO_KEY) if n else None
        if isinstance(record, dict):
            record["remeasured"] = n
    return results
