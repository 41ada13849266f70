"""When a benchmark's result stands: a measurement the gate would call a regression is
measured again, and the fastest stands (``confirmed``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opbench.integrations.pytest_plugin.session import _Session

# Re-measurements of a benchmark that looks like a regression, before the gate decides.
_CONFIRMATIONS = 2


def confirmed(state: _Session, result: Any, measure: Callable[[], Any]) -> Any:
    """``result``, or a faster re-measurement when the gate would call it a regression.

    A burst of load from another process during one measurement reads as a
    slowdown; a real regression is there in every measurement. So a benchmark
    the gate would fail is measured again (up to _CONFIRMATIONS times, while it
    still looks like a regression) and the fastest measurement stands;
    ``info["confirmations"]`` says how many were taken.
    """
    if state.baseline is None:
        return result
    from opbench import gate
    from opbench.core import identity

    key = identity.key(result)
    baseline = [r for r in state.baseline.all() if identity.key(r) == key]
    confirmations = 0
    while baseline and confirmations < _CONFIRMATIONS:
        row = gate.compare(baseline, [result], threshold=state.threshold,
                           metric=state.gate_on).rows
        if not row or row[0].status not in ("regression", "possible regression"):
            break
        confirmations += 1
        again = measure()
        result = again if again.median < result.median else result
    if confirmations:
        result.info["confirmations"] = confirmations
    return result
