"""CUDA device time: events around the statement's GPU work, not a host clock.

torch.utils.benchmark synchronizes the device and reads a host clock, so the
launch overhead and the synchronize itself are in every figure. ``DeviceTimer``
brackets the calls with CUDA events recorded from opbench's native loop
(``opbench._C``), so the figure is what the GPU spent between them:

* ``mode="events"``: one event pair around each block of ``number`` calls.
  Blocks are queued behind a host-released wait (the *launch hold*, as
  nvbench's blocking kernel) so the GPU runs them back to back even when
  launching takes longer than the kernel.
* ``mode="per_iteration"``: an event pair around every call, a true per-call
  distribution (``per_call_times``).
* ``mode="graph"``: the ``number`` calls are captured once into a CUDA graph
  (``torch.cuda.CUDAGraph``) and replayed between two events: kernel time
  without launch overhead.

``cache="cold"`` writes a buffer twice the device's L2 size before every call,
outside the timed window (the events are recorded after the flush), so each
call starts with a cold L2. The flush has to sit between calls, so cold mode
always times per call, whatever the mode; ``timeit`` returns the sum.

The CUDA driver (``libcuda.so.1``) and NVML (``libnvidia-ml.so.1``) are loaded
at first use: importing this module needs neither, nor torch. Errors name the
missing piece (``opbench._C.CudaError``).

Example (on a machine with an NVIDIA GPU):
    >>> import torch, opbench.cuda
    >>> x = torch.randn(4096, 4096, device="cuda")  # doctest: +SKIP
    >>> t = opbench.cuda.DeviceTimer(lambda: x @ x, mode="events")  # doctest: +SKIP
    >>> seconds = t.timeit(10) / 10  # device seconds per matmul  # doctest: +SKIP
    >>> t.metadata()["clock"]  # doctest: +SKIP
    'cuda-events (warm L2)'
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from opbench import _C
from opbench.errors import ThrottleWarning, warn

__all__ = ["CudaError", "DeviceTimer", "Event", "MODES", "CACHES"]

CudaError = _C.CudaError

MODES = ("events", "per_iteration", "graph")
CACHES = ("warm", "cold")

# Used when the driver reports no L2 size (0): larger than any L2 shipped so
# far (H100/H200: 50 MiB, B200: 126 MiB), as triton's do_bench does.
_FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024
_MIB = 1024 * 1024
# A clock this much lower at the end than at the start means the GPU slowed
# down while being measured (power or thermal limits), not boost jitter.
_THROTTLE_TOLERANCE = 0.05
_CLOCK_NAMES = {"events": "cuda-events", "per_iteration": "cuda-events per-iteration", "graph": "cuda-graph"}


def _flush_buffer_bytes(l2_bytes: int) -> int:
    """Bytes to write before a cold-cache call: twice the L2, whole MiB.

    One L2's worth is not enough: replacement is not strict LRU and the large
    parts split the L2 in two halves that may each hold a copy of a line, so
    twice the capacity is what reliably evicts the statement's data.

    >>> _flush_buffer_bytes(50 * 1024 * 1024) // (1024 * 1024)
    100
    >>> _flush_buffer_bytes(0) // (1024 * 1024)  # unknown L2
    256
    """
    if l2_bytes <= 0:
        return _FALLBACK_FLUSH_BYTES
    return -(-2 * l2_bytes // _MIB) * _MIB


def _clock_name(mode: str, cache: str) -> str:
    """What Measurement text shows as the clock, e.g. ``cuda-events (cold L2)``."""
    return f"{_CLOCK_NAMES[mode]} ({cache} L2)"


def _clocks_dropped(start: tuple[int, int] | None, end: tuple[int, int] | None,
                    tolerance: float = _THROTTLE_TOLERANCE) -> bool | None:
    """True when the SM or memory clock (MHz) at ``end`` is below ``start`` by more than ``tolerance``.

    None when either reading is missing. A rise is not throttling: an idle GPU
    starts at low clocks and boosts once work arrives.

    >>> _clocks_dropped((1980, 2619), (1600, 2619))
    True
    >>> _clocks_dropped((1000, 2619), (1980, 2619))
    False
    """
    if start is None or end is None:
        return None
    return any(e < s * (1.0 - tolerance) for s, e in zip(start, end))


def _validate(mode: str, cache: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown device timing mode {mode!r}; valid: {', '.join(map(repr, MODES))}")
    if cache not in CACHES:
        raise ValueError(f"unknown L2 cache mode {cache!r}; valid: {', '.join(map(repr, CACHES))}")


def _torch_cuda() -> Any | None:
    """torch.cuda when the program already imported torch and it sees a GPU, else None.

    Never imports torch itself: a statement that does not use torch (CuPy,
    triton alone) should not pay for it.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda


def _require_torch(what: str) -> Any:
    try:
        import torch
    except ImportError as e:
        raise ImportError(f"{what} needs torch (torch.cuda.CUDAGraph captures the statement): "
                          "install torch") from e
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what} needs torch with CUDA; this torch ({torch.__version__}) "
                           "sees no CUDA device")
    return torch


def _stream_handle(stream: Any) -> int | None:
    """An int CUstream from None (resolved later), an int, or a torch stream."""
    if stream is None or isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if not isinstance(handle, int):
        raise TypeError(f"stream must be None, an int CUstream handle or a torch.cuda.Stream, "
                        f"got {type(stream).__name__}")
    return handle


def _default_device() -> int:
    tc = _torch_cuda()
    return tc.current_device() if tc is not None else 0


class DeviceTimer:
    """Times a zero-argument callable by GPU time, with the ``timeit(number)`` protocol.

    Args:
        fn: the statement, called with no arguments (any setup already run).
        mode: ``"events"`` (a pair per block), ``"per_iteration"`` (a pair per
            call) or ``"graph"`` (replay of a captured CUDA graph; needs torch).
        cache: ``"warm"``, or ``"cold"`` to flush the L2 before each call
            (outside the timed window; cold mode times per call).
        stream: the stream the events are recorded on, as an int handle or a
            torch stream; default torch's current stream at each ``timeit``
            (the legacy default stream, 0, when torch is not in use). The
            statement must launch its work there. Graph mode replays on
            torch's current stream, so it takes no ``stream``.
        device: CUDA device index; default torch's current device, else 0.
        launch_hold: queue each block behind a host-released wait so the GPU
            runs it back to back (default). False times exactly what
            ``torch.cuda.Event`` pairs would, launch gaps included.

    Raises:
        ValueError: unknown ``mode`` or ``cache``, or ``stream`` with graph mode.
        ImportError: graph mode without torch.
        opbench._C.CudaError: no NVIDIA driver, no GPU, or a driver failure.

    Example:
        >>> t = DeviceTimer(lambda: y.add_(1), mode="per_iteration", cache="cold")  # doctest: +SKIP
        >>> t.per_call_times(100)[:2]  # doctest: +SKIP
        [2.1e-06, 2.0e-06]
    """

    def __init__(self, fn: Callable[[], Any], *, mode: str = "events", cache: str = "warm",
                 stream: Any = None, device: int | None = None, launch_hold: bool = True) -> None:
        _validate(mode, cache)
        if not callable(fn):
            raise TypeError(f"fn must be a zero-argument callable, got {type(fn).__name__}")
        self._fn = fn
        self.mode = mode
        self.cache = cache
        self._stream = _stream_handle(stream)
        if mode == "graph":
            if self._stream is not None:
                raise ValueError("graph mode replays on torch's current stream; pass stream=None "
                                 "and select the stream with torch.cuda.stream(...)")
            _require_torch("device_timing='graph'")
        self._ctx = _C.CudaContext(_default_device() if device is None else device)
        if not launch_hold:
            self._ctx.hold = False
        self._info: dict[str, Any] = self._ctx.info()
        if cache == "cold":
            self._ctx.set_flush_bytes(_flush_buffer_bytes(self._info["l2_cache_bytes"]))
        self._graphs: dict[int, Any] = {}
        self._clocks_start: tuple[int, int] | None = None
        self._clocks_end: tuple[int, int] | None = None
        self._warned_throttle = False
        self.last_per_call_times: list[float] = []

    # -- timing ---------------------------------------------------------------

    def timeit(self, number: int) -> float:
        """Device seconds for ``number`` calls (0 allowed)."""
        if number < 0:
            raise ValueError(f"number must be >= 0, got {number}")
        if self.cache == "cold" or self.mode == "per_iteration":
            return sum(self.per_call_times(number))
        if self.mode == "graph":
            if number == 0:
                return 0.0
            return sum(self._run(self._graph(number), 1, per_call=False))
        return sum(self._run(self._fn, number, per_call=False))

    def per_call_times(self, number: int) -> list[float]:
        """Device seconds of each of ``number`` calls, each between its own event pair.

        In graph mode each call is a replay of a one-call graph.
        """
        if number < 0:
            raise ValueError(f"number must be >= 0, got {number}")
        fn = self._graph(1) if self.mode == "graph" and number else self._fn
        self.last_per_call_times = self._run(fn, number, per_call=True)
        return self.last_per_call_times

    def _run(self, fn: Callable[[], Any], number: int, *, per_call: bool) -> list[float]:
        stream = self._stream
        if stream is None:
            tc = _torch_cuda()
            stream = tc.current_stream().cuda_stream if tc is not None else 0
        if number and self._clocks_start is None:
            self._clocks_start = self._ctx.clocks()
        times = self._ctx.run(fn, number, stream, per_call=per_call, flush=self.cache == "cold")
        if number:
            self._clocks_end = self._ctx.clocks()
            self._check_throttle()
        return times

    def _graph(self, calls: int) -> Callable[[], Any]:
        """``replay`` of a graph capturing ``calls`` calls; captured once per count."""
        graph = self._graphs.get(calls)
        if graph is None:
            torch = _require_torch("device_timing='graph'")
            if not self._graphs:
                # Capture needs the statement's lazy initialisation (cuBLAS
                # handles, allocator pools) done, on a side stream as torch
                # documents for graph capture.
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        self._fn()
                torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(calls):
                    self._fn()
            # Keep the one-call graph and the latest; each holds a memory pool.
            self._graphs = {k: v for k, v in self._graphs.items() if k == 1}
            self._graphs[calls] = graph
        return graph.replay

    def _check_throttle(self) -> None:
        if self._warned_throttle or not _clocks_dropped(self._clocks_start, self._clocks_end):
            return
        self._warned_throttle = True
        (sm0, mem0), (sm1, mem1) = self._clocks_start, self._clocks_end  # type: ignore[misc]
        warn(
            ThrottleWarning,
            f"GPU clocks dropped during the measurement (SM {sm0} -> {sm1} MHz, memory "
            f"{mem0} -> {mem1} MHz): the device is throttling (power or thermal limit), so "
            "later blocks ran slower; lock clocks (nvidia-smi -lgc) or cool down and rerun",
            stacklevel=3)

    # -- reporting --------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """Facts about the device and the measurement, for ``Measurement.info``."""
        start, end = self._clocks_start, self._clocks_end
        info: dict[str, Any] = {
            "clock": _clock_name(self.mode, self.cache),
            "device_timing": self.mode,
            "l2_cache": self.cache,
            "device": self._info["name"],
            "device_index": self._info["index"],
            "driver_version": self._info["driver_version"],
            "cuda_driver_version": _version_text(self._info["cuda_driver_version"]),
            "l2_cache_bytes": self._info["l2_cache_bytes"],
            "flush_buffer_bytes": self._ctx.flush_bytes if self.cache == "cold" else 0,
            "launch_hold": self._ctx.hold,
            "sm_clock_mhz_start": start[0] if start else None,
            "sm_clock_mhz_end": end[0] if end else None,
            "mem_clock_mhz_start": start[1] if start else None,
            "mem_clock_mhz_end": end[1] if end else None,
            "throttled": _clocks_dropped(start, end),
        }
        if start is None or end is None:
            info["clock_problem"] = self._ctx.clock_problem or "no timed calls yet"
        return info


def _version_text(version: int) -> str:
    """cuDriverGetVersion's 12040 as ``"12.4"``."""
    return f"{version // 1000}.{version % 1000 // 10}"


class Event:
    """A CUDA event from opbench's native driver binding (no torch needed).

    Mirrors ``torch.cuda.Event``'s timing subset: ``record(stream)``,
    ``synchronize()``, ``query()``, ``elapsed_time(end)`` in milliseconds.

    Example:
        >>> start, end = Event(), Event()  # doctest: +SKIP
        >>> start.record(); run_kernel(); end.record(); end.synchronize()  # doctest: +SKIP
        >>> ms = start.elapsed_time(end)  # doctest: +SKIP
    """

    def __init__(self, device: int | None = None) -> None:
        ctx = _C.CudaContext(_default_device() if device is None else device)
        self._event = ctx.event()

    def record(self, stream: Any = None) -> None:
        """Record on ``stream`` (default: torch's current stream, else the legacy default)."""
        handle = _stream_handle(stream)
        if handle is None:
            tc = _torch_cuda()
            handle = tc.current_stream().cuda_stream if tc is not None else 0
        self._event.record(handle)

    def synchronize(self) -> None:
        """Wait until the work recorded before this event has finished."""
        self._event.synchronize()

    def query(self) -> bool:
        """True when the work recorded before this event has finished."""
        return self._event.query()

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds from this event to ``end`` (both recorded and finished)."""
        return self._event.elapsed_time(end._event)
