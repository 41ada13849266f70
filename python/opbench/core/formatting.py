"""How a figure prints in opbench's reports, by its kind: one function for the gate's
table, the history, bisect's progress lines and the pytest summary.

The kinds are a gate row's (``opbench.gate.Row.kind``) and a history series':
``"time"`` (seconds), ``"instructions"`` (per run), the memory kinds
(``"allocations"`` per call, ``"bytes"``) and the throughput kinds
(``"byte_rate"`` / ``"flop_rate"``: seconds per byte / FLOP, printed as a rate).

Example:
    >>> format_value(1.23e-5, "time"), format_value(41_234.4, "instructions")
    ('12.3 us', '41,234 instr')
    >>> format_value(2.5, "allocations"), format_value(4096, "bytes")
    ('2.50 allocs', '4.00 KiB')
    >>> format_value(1e-9, "byte_rate")
    '1 GB/s'
"""
from __future__ import annotations

from opbench.core.measurement import select_unit
from opbench.core.memory import KINDS as MEMORY_KINDS
from opbench.core.memory import format_bytes, format_count

__all__ = ["format_value"]

_RATE_UNITS = {"byte_rate": "GB/s", "flop_rate": "GFLOP/s"}


def format_value(value: float, kind: str) -> str:
    """``12.3 us`` for a time in seconds, ``41,200 instr`` for an instruction count,
    ``5 allocs`` / ``4.00 KiB`` for memory per call, ``12.5 GB/s`` for a throughput
    kind (``value``: seconds per byte or FLOP)."""
    if kind == "instructions":
        return f"{value:,.0f} instr"
    if kind in MEMORY_KINDS:
        return f"{format_count(value)} allocs" if kind == "allocations" else format_bytes(value)
    if kind in _RATE_UNITS:
        return f"{1 / value / 1e9:.4g} {_RATE_UNITS[kind]}"
    unit, scale = select_unit(value)
    return f"{value / scale:.4g} {unit}"
