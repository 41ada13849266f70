"""CUDA device time: events around the statement's GPU work, not a host clock.

torch.utils.benchmark synchronizes the device and reads a host clock, so the
launch overhead and the synchronize itself are in every figure. ``DeviceTimer``
brackets the calls with CUDA events recorded from opbench's native loop
(``opbench._C``), so the figure is what the GPU spent between them:

* ``mode="events"``: one event pair around each block of calls. Blocks are
  queued behind a host-released wait (the *launch hold*, as nvbench's
  blocking kernel) so the GPU runs them back to back even when launching
  takes longer than the kernel. Held blocks are kept to a few dozen launches
  (a launch queue holds about a thousand commands; a host queueing more
  blocks), so a timed window of ``number`` calls is the sum of several blocks.
* ``mode="per_iteration"``: an event pair around every call, a true per-call
  distribution (``per_call_times``). Event timestamps come in steps (the
  *event quantum*, about 0.5 us): a kernel of a few microseconds measures the
  step as much as itself, and opbench warns (``ResolutionWarning``) when the
  median call is under 20 steps.
* ``mode="graph"``: the statement captured once into a CUDA graph of K calls
  (at most 1,000, chosen by time as triton's ``do_bench_cudagraph`` does:
  about 20 ms per replay), replayed ``ceil(number / K)`` times inside one
  timed window: kernel time without launch overhead.

``cache="cold"`` writes a buffer twice the device's L2 size before every call,
outside the timed window (the events are recorded after the flush), so each
call starts with a cold L2. The flush has to sit between calls, so cold mode
always times per call, whatever the mode; ``timeit`` returns the sum.

What a real GPU does that a naive loop trips over, and what happens here:

* Kernels load lazily on their first launch (CUDA >= 12.2), and loading waits
  for the queued work, which behind the hold never runs. So the first call of
  every statement (and the first replay of every graph) runs alone, unheld and
  synchronized, before any held block. ``timeit(1)`` as the very first call
  times that call: ``Timer(record_first_call=True)`` reports the cold call.
* The clocks: NVML's SM clock is sampled while each block runs (after the
  hold is released, before waiting) and compared with the device's maximum;
  a sample under ``THROTTLE_THRESHOLD`` of it (75%, nvbench's default) marks
  its windows as throttled, with NVML's reasons, and warns
  (``ThrottleWarning``). Clocks read before or after the work would show an
  idle GPU.
* The context: each call into the driver pushes the device's primary context
  and pops it afterwards, and the default stream is torch's current stream of
  the timer's own device, so ``DeviceTimer(device=1)`` neither changes torch's
  current device nor records on device 0's stream.

The CUDA driver (``libcuda.so.1``) and NVML (``libnvidia-ml.so.1``) are loaded
at first use: importing this module needs neither, nor torch. Errors name the
missing piece (``opbench.errors.CudaError``). Device timing has not yet been
validated on hardware: its tests run against a fake driver (tests/fake_cuda).

Example (on a machine with an NVIDIA GPU):
    >>> import torch, opbench.engines.cuda
    >>> x = torch.randn(4096, 4096, device="cuda")  # doctest: +SKIP
    >>> t = opbench.engines.cuda.DeviceTimer(lambda: x @ x, mode="events")  # doctest: +SKIP
    >>> seconds = t.timeit(10) / 10  # device seconds per matmul  # doctest: +SKIP
    >>> t.metadata()["clock"]  # doctest: +SKIP
    'cuda-events (warm L2)'
"""
from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from typing import Any

from opbench import _C
from opbench.errors import ResolutionWarning, ThrottleWarning, warn

__all__ = ["CACHES", "MODES", "THROTTLE_THRESHOLD", "CudaError", "DeviceTimer", "Event"]

CudaError = _C.CudaError

MODES = ("events", "per_iteration", "graph")
CACHES = ("warm", "cold")

#: A block is throttled when the SM clock sampled while it ran is below this
#: fraction of the device's maximum SM clock (nvbench's default threshold).
THROTTLE_THRESHOLD = 0.75

# Used when the driver reports no L2 size (0): larger than any L2 shipped so
# far (H100/H200: 50 MiB, B200: 126 MiB), as triton's do_bench does.
_FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024
_MIB = 1024 * 1024
_CLOCK_NAMES = {"events": "cuda-events", "per_iteration": "cuda-events per-iteration", "graph": "cuda-graph"}
# Per-call windows shorter than this many event quanta measure the quantum.
_MIN_QUANTA = 20
# Graph mode: calls per graph as triton's do_bench_cudagraph picks them (a
# replay of about 20 ms), at most 1,000 (capture time and memory grow with it).
_GRAPH_REPLAY_S = 0.020
_GRAPH_MAX_CALLS = 1000
_GRAPH_ESTIMATE_CALLS = 5
# NVML clocks-event ("throttle") reason bits, nvml.h.
_REASONS = {
    0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
    0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting",
}
_GPU_IDLE = 0x1


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


def _graph_calls(seconds_per_call: float) -> int:
    """Calls captured in one graph: a replay of about 20 ms, 1 to 1,000 calls.

    >>> _graph_calls(2e-6), _graph_calls(1e-3), _graph_calls(0.5), _graph_calls(0.0)
    (1000, 20, 1, 1000)
    """
    if seconds_per_call <= 0:
        return _GRAPH_MAX_CALLS
    # The epsilon keeps an exact ratio (0.02 / 2e-5) from flooring one call short.
    return max(1, min(_GRAPH_MAX_CALLS, int(_GRAPH_REPLAY_S / seconds_per_call * (1 + 1e-9))))


def _reason_names(mask: int) -> list[str]:
    """NVML clocks-event reason bits as names (unknown bits in hex).

    >>> _reason_names(0x4 | 0x40), _reason_names(0x1000)
    (['SwPowerCap', 'HwThermalSlowdown'], ['0x1000'])
    """
    names = [name for bit, name in _REASONS.items() if mask & bit]
    rest = mask & ~sum(_REASONS)
    return names + ([hex(rest)] if rest else [])


def _throttled(sm_mhz: int, max_mhz: int | None, threshold: float = THROTTLE_THRESHOLD) -> bool | None:
    """True when ``sm_mhz`` (sampled under load) is below ``threshold`` of the maximum.

    >>> _throttled(1200, 1980), _throttled(1755, 1980), _throttled(1200, None)
    (True, False, None)
    """
    if not max_mhz:
        return None
    return sm_mhz < threshold * max_mhz


def _us(seconds: float) -> str:
    """``1.5 us``: microseconds with up to 3 significant figures."""
    return f"{seconds * 1e6:.3g} us"


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


def _current_stream(device: int) -> int:
    """torch's current stream on ``device``, else the legacy default stream (0)."""
    tc = _torch_cuda()
    return tc.current_stream(device).cuda_stream if tc is not None else 0


class _TorchGraphs:
    """CUDA graph capture through torch (its allocator must own the graph's memory)."""

    def __init__(self, device: int) -> None:
        self._torch = _require_torch("device_timing='graph'")
        self._device = device

    def prepare(self, fn: Callable[[], Any]) -> None:
        """Lazy initialisation (cuBLAS handles, allocator pools) done before capture,
        on a side stream as torch documents for graph capture."""
        torch = self._torch
        with torch.cuda.device(self._device):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    fn()
            torch.cuda.current_stream().wait_stream(side)

    def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], Any]:
        """``replay`` of a graph of ``calls`` calls of ``fn``."""
        torch = self._torch
        with torch.cuda.device(self._device):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(calls):
                    fn()
        return graph.replay


class DeviceTimer:
    """Times a zero-argument callable by GPU time, with the ``timeit(number)`` protocol.

    Args:
        fn: the statement, called with no arguments (any setup already run).
        mode: ``"events"`` (a pair per block), ``"per_iteration"`` (a pair per
            call) or ``"graph"`` (replays of a captured CUDA graph; needs torch).
        cache: ``"warm"``, or ``"cold"`` to flush the L2 before each call
            (outside the timed window; cold mode times per call).
        stream: the stream the events are recorded on, as an int handle or a
            torch stream; default torch's current stream of ``device`` at each
            ``timeit`` (the legacy default stream, 0, when torch is not in use).
            The statement must launch its work there. Graph mode replays on
            torch's current stream, so it takes no ``stream``.
        device: CUDA device index; default torch's current device, else 0.
        launch_hold: queue each block behind a host-released wait so the GPU
            runs it back to back (default). False times exactly what
            ``torch.cuda.Event`` pairs would, launch gaps included.

    Raises:
        ValueError: unknown ``mode`` or ``cache``, or ``stream`` with graph mode.
        ImportError: graph mode without torch.
        opbench.errors.CudaError: no NVIDIA driver, no GPU, or a driver failure.

    Example:
        >>> t = DeviceTimer(lambda: y.add_(1), mode="per_iteration", cache="cold")  # doctest: +SKIP
        >>> t.per_call_times(100)[:2]  # doctest: +SKIP
        [2.1e-06, 2.0e-06]
    """

    # How graph mode captures; tests substitute a fake.
    _graphs_cls: Callable[[int], Any] = _TorchGraphs

    def __init__(self, fn: Callable[[], Any], *, mode: str = "events", cache: str = "warm",
                 stream: Any = None, device: int | None = None, launch_hold: bool = True) -> None:
        _validate(mode, cache)
        if not callable(fn):
            raise TypeError(f"fn must be a zero-argument callable, got {type(fn).__name__}")
        self._fn = fn
        self.mode = mode
        self.cache = cache
        self._stream = _stream_handle(stream)
        self._device = _default_device() if device is None else device
        self._graphs: Any = None
        self._graphs_prepared = False
        if mode == "graph":
            if self._stream is not None:
                raise ValueError("graph mode replays on torch's current stream; pass stream=None "
                                 "and select the stream with torch.cuda.stream(...)")
            self._graphs = type(self)._graphs_cls(self._device)
        self._ctx = _C.CudaContext(self._device)
        if not launch_hold:
            self._ctx.hold = False
        self._info: dict[str, Any] = self._ctx.info()
        if cache == "cold":
            self._ctx.set_flush_bytes(_flush_buffer_bytes(self._info["l2_cache_bytes"]))
        self._warmed: list[Callable[[], Any]] = []  # callables whose first call has run
        self._replay: Callable[[], Any] | None = None  # the K-call graph (graph mode)
        self._graph_calls: int | None = None
        self._one_call_replay: Callable[[], Any] | None = None
        self._quantum: float | None = None
        self._quantum_known = False
        self._resolution_limited = False
        self._busy_sm: list[int] = []
        self._busy_mem: list[int] = []
        self._reasons = 0
        self._throttled_windows = 0
        self._windows = 0
        self.last_per_call_times: list[float] = []

    # -- timing ---------------------------------------------------------------

    def timeit(self, number: int) -> float:
        """Device seconds for ``number`` calls (0 allowed)."""
        if number < 0:
            raise ValueError(f"number must be >= 0, got {number}")
        if number == 0:
            return 0.0
        if self.cache == "cold" or self.mode == "per_iteration":
            return sum(self.per_call_times(number))
        if self.mode == "graph":
            return self._graph_time(number)
        return sum(self._run(self._fn, number, per_call=False))

    def per_call_times(self, number: int) -> list[float]:
        """Device seconds of each of ``number`` calls, each between its own event pair.

        In graph mode each call is a replay of a one-call graph.
        """
        if number < 0:
            raise ValueError(f"number must be >= 0, got {number}")
        fn = self._fn
        if self.mode == "graph" and number:
            if self._one_call_replay is None:
                self._one_call_replay = self._capture(1)
            fn = self._one_call_replay
        self.last_per_call_times = self._run(fn, number, per_call=True)
        return self.last_per_call_times

    def _graph_time(self, number: int) -> float:
        """``number`` calls as ``ceil(number / K)`` replays of the K-call graph, one window."""
        if self._replay is None:
            estimate = self._run(self._fn, _GRAPH_ESTIMATE_CALLS, per_call=False)
            self._graph_calls = _graph_calls(sum(estimate) / _GRAPH_ESTIMATE_CALLS)
            self._replay = self._capture(self._graph_calls)
        calls = self._graph_calls or 1
        replays = -(-number // calls)
        # Replays are long and cheap to launch: no hold, one window around all.
        total = sum(self._run(self._replay, replays, per_call=False, hold=False))
        return total * number / (replays * calls)

    def _capture(self, calls: int) -> Callable[[], Any]:
        """A graph of ``calls`` calls, captured once per size (never per block size)."""
        if not self._graphs_prepared:
            self._graphs.prepare(self._fn)
            self._graphs_prepared = True
        return self._graphs.capture(self._fn, calls)

    def _run(self, fn: Callable[[], Any], number: int, *, per_call: bool,
             hold: bool = True) -> list[float]:
        if number == 0:
            return []
        stream = self._stream if self._stream is not None else _current_stream(self._device)
        if not self._quantum_known:
            self._quantum = self._ctx.event_quantum(stream)
            self._quantum_known = True
        flush = self.cache == "cold"
        times: list[float] = []
        if fn not in self._warmed:
            # The first call loads kernels (and a graph's first replay uploads
            # it), which waits for queued work: never behind the hold.
            first = self._ctx.run(fn, 1, stream, per_call=True, flush=flush, hold=False)
            self._ctx.take_clock_samples()  # not a measured window
            self._warmed.append(fn)
            if number == 1 and fn is self._fn:
                times = first  # the statement's first call is what was asked for
        if not times:
            times = self._ctx.run(fn, number, stream, per_call=per_call, flush=flush, hold=hold)
        self._note_clocks()
        if per_call:
            self._check_resolution(times)
        return times

    def _note_clocks(self) -> None:
        max_sm = self._info.get("sm_clock_max_mhz")
        for sm, mem, reasons, windows in self._ctx.take_clock_samples():
            if reasons >= 0 and reasons & _GPU_IDLE:
                continue  # the block had already finished: not a reading under load
            self._busy_sm.append(sm)
            self._busy_mem.append(mem)
            self._windows += windows
            if reasons > 0:
                self._reasons |= reasons
            if _throttled(sm, max_sm):
                self._throttled_windows += windows
                reason_text = ", ".join(_reason_names(reasons)) if reasons > 0 else "none reported"
                warn(ThrottleWarning,
                     f"GPU {self._info['name']} is throttling: its SM clock was {sm} MHz while running "
                     f"the statement, under {THROTTLE_THRESHOLD:.0%} of its maximum {max_sm} MHz "
                     f"(NVML reasons: {reason_text}); the affected windows are counted in "
                     "Measurement.info['throttled_windows']. Lock clocks (nvidia-smi -lgc), "
                     "check power and cooling, and rerun",
                     once=f"opbench.engines.cuda.throttle.{self._device}", stacklevel=4)

    def _check_resolution(self, times: list[float]) -> None:
        quantum = self._quantum
        if quantum is None or not times:
            return
        median = statistics.median(times)
        if median >= _MIN_QUANTA * quantum * (1 - 1e-6):  # float32 milliseconds
            return
        self._resolution_limited = True
        warn(ResolutionWarning,
             f"the median per-call window, {_us(median)}, is {median / quantum:.1f} steps of this "
             f"GPU's event timer ({_us(quantum)} each; under {_MIN_QUANTA}): per-call figures "
             "measure the timer's resolution as much as the statement. Time blocks of calls "
             "instead: device_timing='events' or 'graph' (with l2_cache='warm')",
             once="opbench.engines.cuda.event_quantum", stacklevel=4)

    # -- reporting --------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """Facts about the device and the measurement, for ``Measurement.info``."""
        sm, mem = self._busy_sm, self._busy_mem
        max_sm = self._info.get("sm_clock_max_mhz")
        throttled: bool | None = None
        if sm and max_sm:
            throttled = self._throttled_windows > 0
        info: dict[str, Any] = {
            "clock": _clock_name(self.mode, self.cache),
            "device_timing": self.mode,
            "l2_cache": self.cache,
            "device": self._info["name"],
            "device_index": self._info["index"],
            "driver_version": self._info["driver_version"],
            "cuda_driver_version": _version_text(self._info["cuda_driver_version"]),
            "module_loading": self._info["module_loading"],
            "l2_cache_bytes": self._info["l2_cache_bytes"],
            "flush_buffer_bytes": self._ctx.flush_bytes if self.cache == "cold" else 0,
            "launch_hold": self._ctx.hold,
            "launch_hold_off_reason": self._ctx.hold_problem or None,
            "event_quantum_s": self._quantum,
            "resolution_limited": self._resolution_limited,
            "sm_clock_mhz": int(statistics.median(sm)) if sm else None,
            "sm_clock_mhz_lowest": min(sm) if sm else None,
            "sm_clock_mhz_max": max_sm,
            "mem_clock_mhz": int(statistics.median(mem)) if mem else None,
            "throttle_threshold": THROTTLE_THRESHOLD,
            "throttled": throttled,
            "throttled_windows": self._throttled_windows,
            "throttle_reasons": _reason_names(self._reasons),
        }
        if self.mode == "graph":
            info["graph_calls"] = self._graph_calls
        if not sm:
            info["clock_problem"] = self._ctx.clock_problem or "no clock reading under load yet"
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
        self._device = _default_device() if device is None else device
        ctx = _C.CudaContext(self._device)
        self._event = ctx.event()

    def record(self, stream: Any = None) -> None:
        """Record on ``stream`` (default: torch's current stream of the event's device,
        else the legacy default stream)."""
        handle = _stream_handle(stream)
        self._event.record(_current_stream(self._device) if handle is None else handle)

    def synchronize(self) -> None:
        """Wait until the work recorded before this event has finished."""
        self._event.synchronize()

    def query(self) -> bool:
        """True when the work recorded before this event has finished."""
        return self._event.query()

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds from this event to ``end`` (both recorded and finished)."""
        return self._event.elapsed_time(end._event)
