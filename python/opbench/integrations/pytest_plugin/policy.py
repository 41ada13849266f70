"""When a benchmark's result stands: a measurement the gate would call a regression is
measured again, and all measurements are pooled (``confirmed``); a benchmark's own
threshold (``threshold_of``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opbench.integrations.pytest_plugin.session import _Session

# Re-measurements of a benchmark that looks like a regression, before the gate decides.
_CONFIRMATIONS = 2


def confirmed(state: _Session, result: Any, measure: Callable[[], Any],
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
