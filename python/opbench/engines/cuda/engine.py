"""The CUDA engine: a Python statement's GPU work timed by device time, behind
``Timer(..., device_timing=...)``.

The timing itself is ``opbench.engines.cuda.device_timer.DeviceTimer`` (CUDA events recorded from
the native loop, the launch hold, graphs, the cold-L2 flush). This engine fits
it under Timer: it runs the statement that the Python engine prepared (setup
run once), names the clock, puts the device's facts into ``Measurement.info``
and, in the per-call modes (``"per_iteration"``, or any mode with
``l2_cache="cold"``), keeps every call's own time so the Measurement holds the
true per-call distribution (``number_per_run == 1``) rather than block means.

Example (needs an NVIDIA GPU)::

    >>> t = opbench.Timer("y.add_(1)", globals={"y": y_cuda}, device_timing="per_iteration")  # doctest: +SKIP
    >>> t.timeit(100).number_per_run  # doctest: +SKIP
    1
"""
from __future__ import annotations

from typing import Any

from opbench.engines import Engine
from opbench.engines.cuda.device_timer import DeviceTimer

__all__ = ["DeviceEngine"]


class DeviceEngine(Engine):
    """Times ``statement``'s GPU work with a ``DeviceTimer`` in ``mode`` and ``l2_cache``.

    Raises:
        ValueError: ``statement`` cannot be run as a Python callable (C++), or an
            unknown mode or cache setting.
        opbench.CudaError: no driver or GPU.
    """

    def __init__(self, statement: Engine, mode: str, l2_cache: str, device: Any = None,
                 globals: dict[str, Any] | None = None) -> None:
        self._device = DeviceTimer(statement.as_callable(), mode=mode, cache=l2_cache, device=device,
                                   globals=globals)
        # Per-call modes: the Measurement holds each call, not the blocks' sums.
        self._calls: list[float] | None = (
            [] if mode == "per_iteration" or l2_cache == "cold" else None
        )

    @property
    def clock(self) -> str | None:  # type: ignore[override]
        return str(self._device.metadata()["clock"])

    def timeit(self, number: int) -> float:
        elapsed = self._device.timeit(number)
        if self._calls is not None:
            self._calls.extend(self._device.last_per_call_times)
        return elapsed

    def reset(self) -> None:
        self.discard_samples()

    def warm_up(self) -> None:
        """Before a block-size search: the cold first call (and graph capture) out of
        the way, and no resolution warnings for the search's short windows."""
        self._device.warm_up()
        self._device.check_resolution = False

    def block_unit(self) -> int:
        """Graph mode: calls per graph replay, so every block is whole replays."""
        return self._device.graph_calls()

    def discard_samples(self) -> None:
        self._device.begin_samples()  # what follows are samples: checked and judged afresh
        if self._calls is not None:
            self._calls.clear()

    def samples(self, number: int, times: list[float]) -> tuple[int, list[float]]:
        if self._calls:
            return 1, list(self._calls)
        return number, times

    def info(self) -> dict[str, Any]:
        return dict(self._device.metadata())
