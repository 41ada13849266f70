"""Noise-targeted stopping: measure until the median is known to a target precision.

torch's ``adaptive_autorange`` stops when IQR / median falls under a
threshold: a test of the *spread* of the times, which more samples never
shrink. On a machine whose runs vary by 3%, a 1% threshold is never met and
it runs to its time limit; on a quiet one it stops after 4 blocks with no
usable error bar. ``converge`` instead stops when the *confidence interval
of the median* (order statistic, see ``opbench.stats``) is narrower than
``target`` (relative half-width), which more samples do shrink, roughly as
1/sqrt(n). Like nvbench, it also requires a minimum number of samples and of
measured time, gives up at a maximum time, and exits early on a plateau: when
quadrupling the samples (from at least 50) has not narrowed the interval at
all (iid noise would halve it), the noise is not the kind more samples fix (drift, two
modes), and measuring longer would waste time.

The Measurement says what happened in ``info``: ``converged`` (bool),
``stop_reason`` ("target", "plateau" or "max_run_time"), ``target``,
``relative_ci`` (achieved), ``confidence``.

Example:
    >>> import opbench
    >>> from opbench.core.stopping import converge
    >>> m = converge(opbench.Timer("sum(range(50))"), target=0.05, min_run_time=0.02)
    >>> m.info["stop_reason"] in ("target", "plateau", "max_run_time")
    True
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Any

from opbench import environment
from opbench._checks import check_count, check_run_times
from opbench._threads import set_torch_threads
from opbench.core.measurement import Measurement
from opbench.errors import attach
from opbench.stats import DEFAULT_CONFIDENCE, check_confidence, relative_half_width

__all__ = ["converge", "sample"]

# Plateau: after this many times more samples, the interval must have narrowed
# to under _PLATEAU_RATIO of its width (iid noise gives 1/sqrt(4) = 0.5; a
# tighter ratio fired by chance on iid noise in 8% of seeded runs at 10% noise).
_PLATEAU_GROWTH = 4
_PLATEAU_RATIO = 1.0
# Widths from fewer samples vary too much by chance to compare (a lucky narrow
# interval at 10 samples would end an iid run early); from 50 on they are stable.
_PLATEAU_MIN_EARLIER = 50


def sample(
    timer: Any,
    *,
    min_run_time: float = 0.2,
    min_samples: int = 10,
    max_run_time: float | None = None,
    block: float | None = None,
) -> Measurement:
    """``blocked_autorange`` with a floor on the number of samples: blocks of torch's
    size (or of about ``block`` seconds each) until at least ``min_run_time`` seconds
    *and* ``min_samples`` blocks were measured, or ``max_run_time`` seconds are spent.

    Blocks of a fixed length (``block``, ``Timer.block_size_for``) make runs compare:
    torch's tenfold search gives blocks from a tenth of a millisecond to tens of
    milliseconds, by the statement's speed and the noise of the search, and on a busy
    machine a long block is always preempted while a short one often is not, so a
    run's fastest blocks would depend on its block size.

    A regression gate needs samples, not only time: a 50 ms statement under
    ``min_run_time=0.2`` gives 4 blocks, too few for any interval, and a gate
    that cannot decide must not pass a 2x slowdown. ``info["min_samples"]``
    records the floor asked for.

    Example:
        >>> import opbench
        >>> m = sample(opbench.Timer("sum(range(50))"), min_run_time=0.01, min_samples=12)
        >>> len(m.times) >= 12
        True

    Raises:
        ValueError: bad times or ``min_samples``.
    """
    check_count("min_samples", min_samples)
    check_run_times(min_run_time, max_run_time if max_run_time is not None else min_run_time)
    number = timer.block_size(min_run_time) if block is None else timer.block_size_for(block)
    times: list[float] = []
    total = 0.0
    with set_torch_threads(timer.task_spec.num_threads):
        while total < min_run_time or len(times) < min_samples:
            t = timer.run(number)
            times.append(t)
            total += t
            if max_run_time is not None and total >= max_run_time:
                break
    m = timer.measurement(number, times)
    m.info["min_samples"] = min_samples
    return m


def converge(
    timer: Any,
    target: float = 0.01,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    min_samples: int = 10,
    min_run_time: float = 0.5,
    max_run_time: float = 15.0,
    plateau: bool = True,
    callback: Callable[[int, float], Any] | None = None,
) -> Measurement:
    """Times blocks until the median's ``confidence`` interval is within +-``target``.

    Args:
        timer: an ``opbench.Timer``.
        target: relative half-width to reach: 0.01 is +-1% of the median.
        confidence: of the interval (default 0.95).
        min_samples: blocks to take at least (also at least what ``confidence`` needs).
        min_run_time: measured seconds to spend at least.
        max_run_time: measured seconds after which to give up (not converged).
        plateau: stop early, not converged, when more samples stop helping.
        callback: ``callback(number, seconds)`` after each block, as in torch.

    Block size: the one ``blocked_autorange(min_run_time)`` would use.

    Raises:
        ValueError: a target outside (0, 1), bad confidence or times.
    """
    if not 0 < target < 1:
        raise ValueError(f"target must be a relative width in (0, 1), e.g. 0.01; got {target!r}")
    check_confidence(confidence)
    check_count("min_samples", min_samples)
    check_run_times(min_run_time, max_run_time)
    environment.check_machine()

    number = timer.block_size(min_run_time)
    times: list[float] = []
    ordered: list[float] = []
    history: list[float] = []  # relative CI after each block, once checks begin
    total = 0.0
    rel = math.inf
    reason = "max_run_time"
    with set_torch_threads(timer.task_spec.num_threads):
        while True:
            t = timer.run(number)
            times.append(t)
            bisect.insort(ordered, t)
            total += t
            if callback:
                callback(number, t)
            # The relative interval is the same on raw block times as per run.
            rel = relative_half_width(ordered, confidence)
            history.append(rel)
            if len(times) >= min_samples and total >= min_run_time:
                if rel <= target:
                    reason = "target"
                    break
                if plateau and _on_plateau(history, min_samples):
                    reason = "plateau"
                    break
            if total >= max_run_time:
                break

    m = timer.measurement(number, times)
    if math.isinf(rel):
        attach(m.info, environment.warn_too_few_samples(len(times), confidence))
    m.info.update({
        "converged": reason == "target",
        "stop_reason": reason,
        "target": target,
        "relative_ci": rel if math.isfinite(rel) else None,
        "confidence": confidence,
    })
    return m


def _on_plateau(history: list[float], min_samples: int) -> bool:
    n = len(history)
    earlier = n // _PLATEAU_GROWTH
    if earlier < max(min_samples, _PLATEAU_MIN_EARLIER):
        return False
    before, now = history[earlier - 1], history[-1]
    return math.isfinite(before) and now > _PLATEAU_RATIO * before
