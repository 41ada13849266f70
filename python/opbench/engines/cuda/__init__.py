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

``cache="cold"`` reads a buffer twice the device's L2 size before every call,
outside the timed window (the events are recorded after the flush), with a
small kernel the driver compiles from PTX: the L2 is left full of clean lines,
and the statement's own dirty lines are written back during the flush, so each
timed call starts from a clean, cold L2. (Writing the buffer instead, as
triton's ``zero_`` does, leaves dirty lines whose write-back lands in the next
timed call.) Where the read kernel cannot load, the buffer is written and
``info["l2_flush"]`` says so. The flush has to sit between calls, so cold mode
always times per call, whatever the mode; ``timeit`` returns the sum.

What a real GPU does that a naive loop trips over, and what happens here:

* Kernels load lazily on their first launch (CUDA >= 12.2), and loading waits
  for the queued work, which behind the hold never runs. So the first call of
  every statement (and the first replay of every graph) runs alone, unheld and
  synchronized, before any held block. ``timeit(1)`` as the very first call
  times that call: ``Timer(record_first_call=True)`` reports the cold call.
  ``warm_up()`` runs it (and counts the statement's launches) so that a
  block-size search sees warm calls only.
* The launch queue is counted in launches: one warm call is captured once
  (``cuStreamBeginCapture``, nothing runs) to count what it queues, and held
  blocks are sized in launches (``info["launches_per_call"]``).
* The clocks: NVML changes its readings on a millisecond scale and the clock
  ramps up from idle over milliseconds, so a reading right after a short block
  is released sees an idle or ramping GPU. Clocks are read by a *clock probe*
  instead, off the timed path, about once a second: the statement is run
  unheld for up to 0.1 s while NVML is read every 5 ms, until two readings
  agree. A reading under ``THROTTLE_THRESHOLD`` of the maximum (75%,
  nvbench's default) marks the windows timed since the last probe as
  throttled and warns (``ThrottleWarning``); a clock held down by the power
  limit alone (NVML's SwPowerCap, as a large GEMM does) is reported as
  ``power_capped``, not as throttling.
* The context: each call into the driver pushes the device's primary context
  and pops it afterwards, and the default stream is torch's current stream of
  the timer's own device, so ``DeviceTimer(device=1)`` neither changes torch's
  current device nor records on device 0's stream.
* The legacy default stream: holding it would also hold every blocking stream
  of the context (pin-memory threads, CuPy). When torch's current stream is
  the legacy stream, the statement runs on a private non-blocking stream
  (``torch.cuda.stream``) that waits for the legacy stream before and is
  waited for after; ``info["stream"]`` says which.
* Per-call windows put an event record between every two kernels, which
  serialises them: they read above block timing by about the record cost.
  Per-iteration mode measures that offset on the device once and reports it
  (``info["per_iteration_offset_s"]``), as nvbench reports its own overheads.

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

import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from opbench import _C
from opbench.errors import GraphCaptureError, ResolutionWarning, ThrottleWarning, warn

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
# The clock probe: at most once a second, up to 0.1 s, NVML read every 5 ms.
_PROBE_EVERY_S = 1.0
_PROBE_MAX_S = 0.1
_PROBE_SPACING_S = 0.005
_PROBE_MAX_CALLS = 100_000
# Per-iteration offset: per-call windows against one block of this many calls.
_OFFSET_CALLS = 32
# NVML clocks-event ("throttle") reason bits, nvml.h.
_REASONS = {
    0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
    0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting",
}
_GPU_IDLE = 0x1
_SW_POWER_CAP = 0x4


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


def _power_capped_only(reasons: int) -> bool:
    """True when NVML's only reason for a lower clock is the power limit (SwPowerCap).

    >>> _power_capped_only(0x4), _power_capped_only(0x4 | 0x40), _power_capped_only(0)
    (True, False, False)
    """
    return reasons > 0 and reasons & ~_GPU_IDLE == _SW_POWER_CAP


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
        raise CudaError(f"{what} needs torch with CUDA; this torch ({torch.__version__}) "
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


def _device_index(device: Any) -> int:
    """0 from ``0``, ``"cuda:0"``, ``"cuda"`` (the current device) or a torch.device.

    >>> _device_index(1), _device_index("cuda:2")
    (1, 2)
    """
    if isinstance(device, bool):
        raise TypeError(f"device must be an int, 'cuda:N' or a torch.device, got {device!r}")
    if isinstance(device, int):
        return device
    text = str(device)
    kind, _, index = text.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise ValueError(f"device must be a CUDA device (an int, 'cuda:N' or a torch.device), got {text!r}")
    return int(index) if index else _default_device()


def _cuda_devices_in(values: Any) -> set[int]:
    """Indices of the CUDA tensors among ``values`` (and inside lists, tuples and dicts, one level)."""
    found: set[int] = set()
    for value in values:
        inner = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) \
            else ()
        for v in (value, *inner):
            if getattr(v, "is_cuda", False) is True:
                index = getattr(getattr(v, "device", None), "index", None)
                found.add(index if isinstance(index, int) else _default_device())
    return found


def _choose_device(device: Any, globals: dict[str, Any] | None) -> tuple[int, str]:
    """The device to time on and where it came from: ``device`` when given, else the
    CUDA tensors in ``globals``, else torch's current device."""
    if device is not None:
        return _device_index(device), "device argument"
    found = _cuda_devices_in((globals or {}).values())
    if len(found) > 1:
        raise ValueError(f"the statement's globals hold CUDA tensors on devices {sorted(found)}: "
                         "pass device=... to say which device's stream to time")
    if found:
        return found.pop(), "CUDA tensors in globals"
    return _default_device(), "current device"


def _current_stream(device: int) -> int:
    """torch's current stream on ``device``, else the legacy default stream (0)."""
    tc = _torch_cuda()
    return tc.current_stream(device).cuda_stream if tc is not None else 0


class _TorchGraphs:
    """CUDA graph capture through torch (its allocator must own the graph's memory).

    The capture stream is made on the timer's device (``torch.cuda.graph``
    otherwise makes one on whichever device captures first), and every graph
    of this timer (the 1-call and the K-call one) shares one memory pool.
    """

    def __init__(self, device: int) -> None:
        torch = self._torch = _require_torch("device_timing='graph'")
        self._device = device
        try:
            with torch.cuda.device(device):
                self._stream = torch.cuda.Stream()
            self._pool = torch.cuda.graph_pool_handle()
        except RuntimeError as e:
            raise CudaError(f"graph mode could not set up capture on CUDA device {device}: {e}") from e
        self._graphs: list[Any] = []  # alive as long as their replays may be called

    def prepare(self, fn: Callable[[], Any]) -> None:
        """Lazy initialisation (cuBLAS handles, allocator pools) done before capture,
        on the capture stream, as torch documents for graph capture."""
        torch = self._torch
        with torch.cuda.device(self._device):
            side = self._stream
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    fn()
            torch.cuda.current_stream().wait_stream(side)

    def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], Any]:
        """``replay`` of a graph of ``calls`` calls of ``fn``."""
        torch = self._torch
        try:
            with torch.cuda.device(self._device):
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self._pool, stream=self._stream):
                    for _ in range(calls):
                        fn()
        except RuntimeError as e:
            raise GraphCaptureError(
                f"graph mode could not capture the statement into a CUDA graph: {e}. A statement that "
                "synchronizes (.item(), .cpu(), torch.cuda.synchronize(), a blocking copy) cannot be "
                "captured: time it with device_timing='events'") from e
        self._graphs.append(graph)
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
            ``timeit`` (a private non-blocking stream when that is the legacy
            default stream; the legacy stream, 0, when torch is not in use).
            The statement must launch its work there. Graph mode replays on
            torch's current stream, so it takes no ``stream``.
        device: CUDA device (index, ``"cuda:N"`` or torch.device); default the
            device of the CUDA tensors in ``globals``, else torch's current
            device, else 0.
        launch_hold: queue each block behind a host-released wait so the GPU
            runs it back to back (default). False times exactly what
            ``torch.cuda.Event`` pairs would, launch gaps included.
        globals: the statement's globals, to find its device (``Timer`` passes them).

    Raises:
        ValueError: unknown ``mode`` or ``cache``, ``stream`` with graph mode, or
            globals with CUDA tensors on several devices and no ``device``.
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
                 stream: Any = None, device: Any = None, launch_hold: bool = True,
                 globals: dict[str, Any] | None = None) -> None:
        _validate(mode, cache)
        if not callable(fn):
            raise TypeError(f"fn must be a zero-argument callable, got {type(fn).__name__}")
        self._fn = fn
        self.mode = mode
        self.cache = cache
        self._stream = _stream_handle(stream)
        self._device, self._device_source = _choose_device(device, globals)
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
        self._private_stream: Any = None  # instead of a held legacy stream (torch only)
        self._stream_note = "given by the caller" if self._stream is not None else None
        self._launches: int | None = None
        self._launches_counted = False
        self._quantum: float | None = None
        self._quantum_known = False
        self._resolution_limited = False
        self.check_resolution = True  # off while a caller sizes blocks (not samples)
        self._offset: float | None = None
        self._clock_reading: tuple[int, int, int] | None = None
        self._clock_settled: bool | None = None
        self._busy_sm: list[int] = []
        self._busy_mem: list[int] = []
        self._reasons = 0
        self._throttled_windows = 0
        self._power_capped_windows = 0
        self._windows = 0
        self._unprobed_windows = 0
        self._last_probe: float | None = None
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
        if self.mode == "per_iteration" and self.cache == "warm" and number and self._offset is None:
            self._offset = self._per_iteration_offset()
        return self.last_per_call_times

    def warm_up(self) -> None:
        """Runs the statement's cold first call (unheld), counts its launches and,
        in graph mode, captures the graph: afterwards every call is a warm one,
        so a block size chosen from ``timeit`` is chosen from warm calls."""
        if self.mode == "graph":
            self.graph_calls()
        else:
            self._run(self._fn, 0, per_call=False)

    def graph_calls(self) -> int:
        """Calls in one replay of the graph (graph mode; captures it on first use).
        A block of calls in graph mode is best a whole number of replays."""
        if self.mode != "graph":
            return 1
        if self._replay is None:
            estimate = self._run(self._fn, _GRAPH_ESTIMATE_CALLS, per_call=False)
            self._graph_calls = _graph_calls(sum(estimate) / _GRAPH_ESTIMATE_CALLS)
            self._replay = self._capture(self._graph_calls)
        return self._graph_calls or 1

    def _graph_time(self, number: int) -> float:
        """``number`` calls as ``ceil(number / K)`` replays of the K-call graph, one window."""
        calls = self.graph_calls()
        assert self._replay is not None
        replays = -(-number // calls)
        # Held like any block: no launch gap between the record and the replay.
        total = sum(self._run(self._replay, replays, per_call=False))
        return total * number / (replays * calls)

    def _capture(self, calls: int) -> Callable[[], Any]:
        """A graph of ``calls`` calls, captured once per size (never per block size)."""
        if not self._graphs_prepared:
            self._graphs.prepare(self._fn)
            self._graphs_prepared = True
        return self._graphs.capture(self._fn, calls)

    def _timing_stream(self) -> tuple[int, Any]:
        """The stream to record on, and the torch stream to run the statement on (or None).

        torch's current stream, unless it is the legacy default stream: holding
        that would hold every blocking stream of the context, so the statement
        runs on a private non-blocking stream instead.
        """
        if self._stream is not None:
            return self._stream, None
        tc = _torch_cuda()
        if tc is None:
            self._stream_note = "legacy default stream (torch is not in use)"
            return 0, None
        current = tc.current_stream(self._device)
        if current.cuda_stream != 0:
            self._stream_note = "torch's current stream"
            return current.cuda_stream, None
        if self._private_stream is None:
            self._private_stream = tc.Stream(device=self._device)
        self._stream_note = ("private non-blocking stream (torch's current stream is the legacy default "
                             "stream, which a held wait would block for every blocking stream)")
        return self._private_stream.cuda_stream, current

    def _on_stream(self, work: Callable[[int], Any]) -> Any:
        """``work(stream)`` with the statement launching on the timing stream."""
        stream, legacy = self._timing_stream()
        if legacy is None:
            return work(stream)
        tc = _torch_cuda()
        assert tc is not None  # a legacy stream to replace comes from torch
        private = self._private_stream
        private.wait_stream(legacy)  # the statement's inputs, queued on the legacy stream
        try:
            with tc.stream(private):
                return work(stream)
        finally:
            legacy.wait_stream(private)  # and what comes after sees its results

    def _run(self, fn: Callable[[], Any], number: int, *, per_call: bool,
             hold: bool = True) -> list[float]:
        return list(self._on_stream(lambda stream: self._run_on(stream, fn, number, per_call, hold)))

    def _run_on(self, stream: int, fn: Callable[[], Any], number: int, per_call: bool,
                hold: bool) -> list[float]:
        if not self._quantum_known:
            self._quantum = self._ctx.event_quantum(stream)
            self._quantum_known = True
        flush = self.cache == "cold"
        times: list[float] = []
        if fn not in self._warmed:
            # The first call loads kernels (and a graph's first replay uploads
            # it), which waits for queued work: never behind the hold.
            first = self._ctx.run(fn, 1, stream, per_call=True, flush=flush, hold=False)
            self._warmed.append(fn)
            if fn is self._fn and self.mode != "graph" and not self._launches_counted:
                # Once, warm: what one call queues, so held blocks are sized in launches.
                self._launches = self._ctx.count_launches(fn, stream)
                self._launches_counted = True
                if self._launches is None and self._ctx.launch_count_problem.startswith(
                        ("the statement cannot run under stream capture", "capturing one call failed")):
                    self._clear_capture_error(fn, stream)
            if number == 1 and fn is self._fn:
                times = first  # the statement's first call is what was asked for
        if number == 0:
            return []
        if not times:
            times = self._ctx.run(fn, number, stream, per_call=per_call, flush=flush, hold=hold)
        self._unprobed_windows += len(times)
        self._maybe_probe_clocks(fn, stream, times, number)
        self._check_resolution(times)
        return times

    def _clear_capture_error(self, fn: Callable[[], Any], stream: int) -> None:
        """One untimed call after a failed capture: the CUDA runtime keeps the error
        the capture left as its "last error", and torch raises it at the next
        launch check, which also clears it. Raised here, it is out of the way."""
        with contextlib.suppress(Exception):
            self._ctx.run(fn, 1, stream, per_call=True, flush=False, hold=False)

    def _per_iteration_offset(self) -> float:
        """How much a per-call window reads above the same call timed in a block:
        the event records between kernels serialise them. Measured once, warm."""
        n = _OFFSET_CALLS

        def measure(stream: int) -> float:
            block = sum(self._ctx.run(self._fn, n, stream, per_call=False, flush=False, hold=True))
            calls = sum(self._ctx.run(self._fn, n, stream, per_call=True, flush=False, hold=True))
            return (calls - block) / n

        return float(self._on_stream(measure))

    # -- clocks -----------------------------------------------------------------

    def _maybe_probe_clocks(self, fn: Callable[[], Any], stream: int, times: list[float],
                            number: int) -> None:
        """A clock probe, off the timed path, at most once a second (see the module doc)."""
        now = time.monotonic()
        if self._last_probe is not None and now - self._last_probe < _PROBE_EVERY_S:
            return
        self._last_probe = now
        per_call = sum(times) / number if number else 0.0
        calls = _PROBE_MAX_CALLS if per_call <= 0 else int(min(_PROBE_MAX_CALLS, _PROBE_MAX_S / per_call + 1))
        reading = self._ctx.clock_probe(fn, stream, max(1, calls), _PROBE_SPACING_S, _PROBE_MAX_S)
        windows, self._unprobed_windows = self._unprobed_windows, 0
        if reading is None:
            return
        sm, mem, reasons, settled = reading
        self._clock_settled = bool(settled)
        self._note_clock(sm, mem, reasons, windows)

    def _note_clock(self, sm: int, mem: int, reasons: int, windows: int) -> None:
        max_sm = self._info.get("sm_clock_max_mhz")
        self._busy_sm.append(sm)
        self._busy_mem.append(mem)
        self._windows += windows
        if reasons > 0:
            self._reasons |= reasons
        if reasons > 0 and reasons & _SW_POWER_CAP:
            self._power_capped_windows += windows
        if not _throttled(sm, max_sm) or _power_capped_only(reasons):
            return  # the power limit alone is the GPU at work, not throttling
        self._throttled_windows += windows
        reason_text = ", ".join(_reason_names(reasons)) if reasons > 0 else "none reported"
        warn(ThrottleWarning,
             f"GPU {self._info['name']} is throttling: its SM clock was {sm} MHz while running "
             f"the statement, under {THROTTLE_THRESHOLD:.0%} of its maximum {max_sm} MHz "
             f"(NVML reasons: {reason_text}); the affected windows are counted in "
             "Measurement.info['throttled_windows']. Lock clocks (nvidia-smi -lgc), "
             "check power and cooling, and rerun",
             once=f"opbench.engines.cuda.throttle.{self._device}", stacklevel=5)

    def _check_resolution(self, times: list[float]) -> None:
        """Warns when the median timed window (a call's or a block's) is under 20 event quanta."""
        quantum = self._quantum
        if quantum is None or not times or not self.check_resolution:
            return
        median = statistics.median(times)
        if median >= _MIN_QUANTA * quantum * (1 - 1e-6):  # float32 milliseconds
            return
        self._resolution_limited = True
        per_call = self.mode == "per_iteration" or self.cache == "cold"
        what = "per-call window" if per_call else "timed window"
        warn(ResolutionWarning,
             f"the median {what}, {_us(median)}, is {median / quantum:.1f} steps of this "
             f"GPU's event timer ({_us(quantum)} each; under {_MIN_QUANTA}): the figures "
             "measure the timer's resolution as much as the statement. Time more calls per "
             "window: device_timing='events' or 'graph' (with l2_cache='warm'), or a larger number",
             once="opbench.engines.cuda.event_quantum", stacklevel=5)

    # -- reporting --------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """Facts about the device and the measurement, for ``Measurement.info``."""
        sm, mem = self._busy_sm, self._busy_mem
        max_sm = self._info.get("sm_clock_max_mhz")
        throttled: bool | None = None
        power_capped: bool | None = None
        if sm and max_sm:
            throttled = self._throttled_windows > 0
        if sm:
            power_capped = bool(self._reasons & _SW_POWER_CAP)
        info: dict[str, Any] = {
            "clock": _clock_name(self.mode, self.cache),
            "device_timing": self.mode,
            "l2_cache": self.cache,
            "device": self._info["name"],
            "device_index": self._info["index"],
            "device_source": self._device_source,
            "driver_version": self._info["driver_version"],
            "cuda_driver_version": _version_text(self._info["cuda_driver_version"]),
            "module_loading": self._info["module_loading"],
            "stream": self._stream_note,
            "l2_cache_bytes": self._info["l2_cache_bytes"],
            "flush_buffer_bytes": self._ctx.flush_bytes if self.cache == "cold" else 0,
            "l2_flush": self._ctx.flush_method if self.cache == "cold" else None,
            "launch_hold": self._ctx.hold,
            "launch_hold_off_reason": self._ctx.hold_problem or None,
            "launches_per_call": self._launches,
            "event_quantum_s": self._quantum,
            "resolution_limited": self._resolution_limited,
            "sm_clock_mhz": int(statistics.median(sm)) if sm else None,
            "sm_clock_mhz_lowest": min(sm) if sm else None,
            "sm_clock_mhz_max": max_sm,
            "mem_clock_mhz": int(statistics.median(mem)) if mem else None,
            "clock_settled": self._clock_settled,
            "throttle_threshold": THROTTLE_THRESHOLD,
            "throttled": throttled,
            "throttled_windows": self._throttled_windows,
            "throttle_reasons": _reason_names(self._reasons),
            "power_capped": power_capped,
        }
        if self._launches is None and self._launches_counted:
            info["launch_count_problem"] = self._ctx.launch_count_problem
        if self.mode == "per_iteration":
            info["per_iteration_offset_s"] = self._offset
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
