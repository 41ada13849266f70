"""CUDA events from opbench's own driver binding, for code that brackets its own regions.

``Event`` mirrors ``torch.cuda.Event``'s timing subset without torch: it is
recorded on torch's current stream of its device when torch is in use, else on
the legacy default stream.

Example (on a machine with an NVIDIA GPU):
    >>> start, end = Event(), Event()  # doctest: +SKIP
    >>> start.record(); run_kernel(); end.record(); end.synchronize()  # doctest: +SKIP
    >>> ms = start.elapsed_time(end)  # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

from opbench import _C
from opbench.engines.cuda import devices

__all__ = ["Event"]


class Event:
    """A CUDA event: ``record(stream)``, ``synchronize()``, ``query()``,
    ``elapsed_time(end)`` in milliseconds, as ``torch.cuda.Event``'s."""

    def __init__(self, device: int | None = None) -> None:
        self._device = devices.default_device() if device is None else device
        ctx = _C.CudaContext(self._device)
        self._event = ctx.event()

    def record(self, stream: Any = None) -> None:
        """Record on ``stream`` (default: torch's current stream of the event's device,
        else the legacy default stream)."""
        handle = devices.stream_handle(stream)
        self._event.record(devices.current_stream(self._device) if handle is None else handle)

    def synchronize(self) -> None:
        """Wait until the work recorded before this event has finished."""
        self._event.synchronize()

    def query(self) -> bool:
        """True when the work recorded before this event has finished."""
        return bool(self._event.query())

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds from this event to ``end`` (both recorded and finished)."""
        return float(self._event.elapsed_time(end._event))
