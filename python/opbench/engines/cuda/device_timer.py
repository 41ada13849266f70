"""CUDA device timing: ``DeviceTimer`` times a statement's GPU work with CUDA events.

Events are recorded from opbench's native loop (``opbench._C``) around blocks
of calls, around every call, or around replays of a CUDA graph (see the
package's docstring for the modes, the launch hold and what a real GPU does to
such a loop). This module drives them: which stream to record on, the
statement's cold first call, counting its launches, the per-call estimator
(``opbench.engines.cuda.quantum``), the clock probe and its verdicts
(``opbench.engines.cuda.clocks``), graphs (``opbench.engines.cuda.graphs``) and
the facts for ``Measurement.info``.

Where the statement's work runs: the events go on torch's current stream of the
timer's device (a private non-blocking stream when that is the legacy default
stream, which a held wait would block for every blocking stream), the legacy
stream when torch is not in use, or ``stream=``. One warm call is captured to
count its launches; a call that launched nothing there did its work elsewhere
(CuPy, numba or a raw launch on the legacy stream), and is never timed as about
zero: on the private stream, the statement is timed on the legacy stream instead
(where such work runs), and on a stream torch or the caller chose, it is refused
with an error naming the stream.

Example (on a machine with an NVIDIA GPU):
    >>> t = DeviceTimer(lambda: y.add_(1), mode="per_iteration", cache="cold")  # doctest: +SKIP
    >>> t.per_call_times(100)[:2]  # doctest: +SKIP
    [2.1e-06, 2.0e-06]
    >>> _flush_buffer_bytes(50 * 1024 * 1024) // (1024 * 1024)
    100
"""
from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from opbench import _C
from opbench.engines.cuda import devices, graphs
from opbench.engines.cuda.clocks import THROTTLE_THRESHOLD, ClockLog, Reading, reason_names
from opbench.engines.cuda.quantum import MIN_QUANTA, per_call_figures
from opbench.errors import CudaError, ResolutionWarning, ThrottleWarning, warn

__all__ = ["CACHES", "MODES", "DeviceTimer"]

MODES = ("events", "per_iteration", "graph")
CACHES = ("warm", "cold")

# Used when the driver reports no L2 size (0): larger than any L2 shipped so
# far (H100/H200: 50 MiB, B200: 126 MiB), as triton's do_bench does.
_FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024
_MIB = 1024 * 1024
_CLOCK_NAMES = {"events": "cuda-events", "per_iteration": "cuda-events per-iteration", "graph": "cuda-graph"}
_GRAPH_ESTIMATE_CALLS = 5
# The clock probe: up to 0.1 s, NVML read every 5 ms.
_PROBE_MAX_S = 0.1
_PROBE_SPACING_S = 0.005
_PROBE_MAX_CALLS = 100_000
# Per-call offset: per-call windows against one block of this many calls.
_OFFSET_CALLS = 32
# What count_launches says of a call that launched nothing on the timed stream.
_NOTHING_LAUNCHED = "one call launched nothing on the timed stream"
_CAPTURE_FAILED = ("the statement cannot run under stream capture", "capturing one call failed")


def _flush_buffer_bytes(l2_bytes: int) -> int:
    """Bytes to read before a cold-cache call: twice the L2, whole MiB.

    One L2's worth is not enough: replacement is not strict LRU and the large
    parts split the L2 in two halves that may each hold a copy of a line, so
    twice the capacity is what reliably evicts the statement's data.

    >>> _flush_buffer_bytes(0) // (1024 * 1024)  # unknown L2
    256
    """
    if l2_bytes <= 0:
        return _FALLBACK_FLUSH_BYTES
    return -(-2 * l2_bytes // _MIB) * _MIB


def _clock_name(mode: str, cache: str) -> str:
    """What Measurement text shows as the clock, e.g. ``cuda-events (cold L2)``.

    >>> _clock_name("per_iteration", "warm")
    'cuda-events per-iteration (warm L2)'
    """
    return f"{_CLOCK_NAMES[mode]} ({cache} L2)"


def _us(seconds: float) -> str:
    """``1.5 us``: microseconds with up to 3 significant figures."""
    return f"{seconds * 1e6:.3g} us"


def _version_text(version: int) -> str:
    """cuDriverGetVersion's 12040 as ``"12.4"``.

    >>> _version_text(13000)
    '13.0'
    """
    return f"{version // 1000}.{version % 1000 // 10}"


def _validate(mode: str, cache: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown device timing mode {mode!r}; valid: {', '.join(map(repr, MODES))}")
    if cache not in CACHES:
        raise ValueError(f"unknown L2 cache mode {cache!r}; valid: {', '.join(map(repr, CACHES))}")


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
        opbench.errors.CudaError: no NVIDIA driver, no GPU, a driver failure, or
            a statement whose work does not run on the stream it must be timed on.

    Example:
        >>> t = DeviceTimer(lambda: y.add_(1), mode="per_iteration", cache="cold")  # doctest: +SKIP
        >>> t.per_call_times(100)[:2]  # doctest: +SKIP
        [2.1e-06, 2.0e-06]
    """

    # How graph mode captures; tests may substitute another.
    _graphs_cls: Callable[[int], Any] = graphs.TorchGraphs

    def __init__(self, fn: Callable[[], Any], *, mode: str = "events", cache: str = "warm",
                 stream: Any = None, device: Any = None, launch_hold: bool = True,
                 globals: dict[str, Any] | None = None) -> None:
        _validate(mode, cache)
        if not callable(fn):
            raise TypeError(f"fn must be a zero-argument callable, got {type(fn).__name__}")
        self._fn = fn
        self.mode = mode
        self.cache = cache
        self._stream = devices.stream_handle(stream)
        self._device, self._device_source = devices.choose_device(device, globals)
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
        self._on_legacy = False  # the statement's work runs on the legacy stream, not torch's
        self._stream_note = "given by the caller" if self._stream is not None else None
        self._launches: int | None = None
        self._launches_counted = False
        self._quantum: float | None = None
        self._quantum_known = False
        self._resolution_limited = False
        self.check_resolution = True  # off while a caller sizes blocks (not samples)
        self._offsets: dict[int, float] = {}  # per callable (by id) timed per call
        self._per_call_fn: Callable[[], Any] = fn  # what per_call_times times
        self._clocks = ClockLog(self._info.get("sm_clock_max_mhz"))
        self.last_per_call_times: list[float] = []
        self.last_windows: list[float] = []  # the raw per-call event windows behind them

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
        """Device seconds of each of ``number`` calls, each between its own event pair:
        the windows dequantised (``opbench.engines.cuda.quantum``) and less the offset
        that a per-call window reads above the same calls timed as one block.

        In graph mode each call is a replay of a one-call graph. The raw windows are
        ``last_windows``.
        """
        if number < 0:
            raise ValueError(f"number must be >= 0, got {number}")
        fn = self._fn
        if self.mode == "graph" and number:
            if self._one_call_replay is None:
                self._one_call_replay = self._capture(1)
            fn = self._one_call_replay
        self._per_call_fn = fn
        self.last_windows = self._run(fn, number, per_call=True)
        offset = self._per_call_offset(fn) if number else None
        self.last_per_call_times = per_call_figures(self.last_windows, self._quantum, offset)
        return self.last_per_call_times

    def warm_up(self) -> None:
        """Runs the statement's cold first call (unheld), counts its launches and,
        in graph mode, captures the graph: afterwards every call is a warm one,
        so a block size chosen from ``timeit`` is chosen from warm calls."""
        if self.mode == "graph":
            self.graph_calls()
        else:
            self._run(self._fn, 0, per_call=False)

    def begin_samples(self) -> None:
        """What follows are samples (a block-size search came before): their windows
        are checked for the timer's resolution and judged by a clock reading of their own."""
        self.check_resolution = True
        self._clocks.begin_samples()

    def graph_calls(self) -> int:
        """Calls in one replay of the graph (graph mode; captures it on first use).
        A block of calls in graph mode is best a whole number of replays."""
        if self.mode != "graph":
            return 1
        if self._replay is None:
            # How long a call takes, to size the graph: no sample, so no verdicts.
            estimate = self._run(self._fn, _GRAPH_ESTIMATE_CALLS, per_call=False, sample=False)
            self._graph_calls = graphs.graph_calls(sum(estimate) / _GRAPH_ESTIMATE_CALLS)
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
        return self._graphs.capture(self._fn, calls)  # type: ignore[no-any-return]

    # -- streams ----------------------------------------------------------------

    def _timing_stream(self) -> tuple[int, Any]:
        """The stream to record on, and the torch stream to run the statement on (or None).

        torch's current stream, unless it is the legacy default stream: holding
        that would hold every blocking stream of the context, so the statement
        runs on a private non-blocking stream instead.
        """
        if self._stream is not None:
            return self._stream, None
        if self._on_legacy:
            return 0, None
        tc = devices.torch_cuda()
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
        tc = devices.torch_cuda()
        assert tc is not None  # a legacy stream to replace comes from torch
        private = self._private_stream
        private.wait_stream(legacy)  # the statement's inputs, queued on the legacy stream
        try:
            with tc.stream(private):
                result = work(stream)
        except BaseException:
            # A kernel fault leaves the context sticky, and torch's own error from this
            # wait would replace opbench's, which says where the fault surfaced.
            with contextlib.suppress(Exception):
                legacy.wait_stream(private)
            raise
        legacy.wait_stream(private)  # and what comes after sees its results
        return result

    # -- the loop ---------------------------------------------------------------

    def _run(self, fn: Callable[[], Any], number: int, *, per_call: bool, hold: bool = True,
             sample: bool = True) -> list[float]:
        """Event windows of ``number`` calls of ``fn``; ``sample``: they are samples (their
        resolution is checked and the clock judges them), not opbench's own runs."""
        return list(self._on_stream(lambda stream: self._run_on(stream, fn, number, per_call, hold, sample)))

    def _run_on(self, stream: int, fn: Callable[[], Any], number: int, per_call: bool,
                hold: bool, sample: bool) -> list[float]:
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
                counted_on = stream
                stream = self._count_launches(fn, stream)
                if stream != counted_on:
                    first = []  # timed where the work does not run: worthless
            if number == 1 and fn is self._fn:
                times = first  # the statement's first call is what was asked for
        if number == 0:
            return []
        if not times:
            times = self._ctx.run(fn, number, stream, per_call=per_call, flush=flush, hold=hold)
        if sample:
            self._judge_clocks(fn, stream, times, number)
            self._check_resolution(times)
        return times

    def _count_launches(self, fn: Callable[[], Any], stream: int) -> int:
        """Counts one warm call's launches (held blocks are sized by them); the stream to
        time on from now on: the legacy stream when the statement's work runs there."""
        tc = devices.torch_cuda()
        if tc is not None and self._stream is None and stream != 0:
            with tc.device(self._device):  # torch captures its current device's current stream
                self._launches = graphs.count_launches(tc, self._ctx, fn, stream)
        else:
            self._launches = self._ctx.count_launches(fn, stream)
        self._launches_counted = True
        problem = self._ctx.launch_count_problem
        if self._launches is None and problem.startswith(_CAPTURE_FAILED):
            self._clear_capture_error(fn, stream)
        if self._launches is None and problem != _NOTHING_LAUNCHED:
            # Uncounted, held blocks are sized by a call's host time, which bounds its
            # launches: one more call, warm, unheld and untimed, to measure it.
            self._ctx.run(fn, 1, stream, per_call=False, flush=False, hold=False)
        if self._launches is not None or problem != _NOTHING_LAUNCHED:
            return stream
        if self._private_stream is not None and stream == self._private_stream.cuda_stream:
            self._on_legacy = True
            self._launches = self._ctx.count_launches(fn, 0)  # None: the legacy stream cannot be captured
            self._stream_note = (
                "legacy default stream: the statement launched nothing on the private stream that torch's "
                "launches follow (its work is not torch's: CuPy, numba or a raw launch on stream 0), so it "
                "is timed where that work runs")
            return 0
        where = "the stream given by the caller" if self._stream is not None else "torch's current stream"
        raise CudaError(
            f"the statement launched no GPU work on the timed stream ({where}, handle {stream:#x}), so "
            "events there would time nothing: its work runs on another stream (CuPy's, numba's or another "
            "library's current stream). Launch it on the timed stream (torch.cuda.stream(...) with that "
            "library's external stream), or pass stream=<the handle its work runs on>")

    def _clear_capture_error(self, fn: Callable[[], Any], stream: int) -> None:
        """One untimed call after a failed capture: the CUDA runtime keeps the error
        the capture left as its "last error", and torch raises it at the next
        launch check, which also clears it. Raised here, it is out of the way."""
        with contextlib.suppress(Exception):
            self._ctx.run(fn, 1, stream, per_call=True, flush=False, hold=False)

    def _per_call_offset(self, fn: Callable[[], Any]) -> float:
        """How much a per-call window of ``fn`` reads above the same call timed in a
        block: the event records between kernels serialise them (the record before
        a kernel delays its launch). Measured once per callable, warm, no flush."""
        key = id(fn)
        if key not in self._offsets:
            n = _OFFSET_CALLS

            def measure(stream: int) -> float:
                block = sum(self._ctx.run(fn, n, stream, per_call=False, flush=False, hold=True))
                calls = sum(self._ctx.run(fn, n, stream, per_call=True, flush=False, hold=True))
                return max(0.0, (calls - block) / n)

            self._offsets[key] = float(self._on_stream(measure))
        return self._offsets[key]

    # -- clocks and resolution ------------------------------------------------------

    def _judge_clocks(self, fn: Callable[[], Any], stream: int, times: list[float], number: int) -> None:
        """Judges the windows just timed by a clock reading (a probe, off the timed path,
        when the latest is from before these samples or over a second old)."""
        clocks = self._clocks
        if clocks.probe_due(time.monotonic()):
            per_call = sum(times) / number if number else 0.0
            calls = _PROBE_MAX_CALLS if per_call <= 0 else \
                int(min(_PROBE_MAX_CALLS, _PROBE_MAX_S / per_call + 1))
            raw = self._ctx.clock_probe(fn, stream, max(1, calls), _PROBE_SPACING_S, _PROBE_MAX_S, per_call)
            clocks.note(None if raw is None else Reading(*raw), time.monotonic())
        if clocks.judge(len(times), self._ctx.clock_problem or "no clock reading") != "throttled":
            return
        reading = clocks.last
        assert reading is not None
        max_sm = self._info.get("sm_clock_max_mhz")
        reasons = ", ".join(reason_names(reading.reasons)) if reading.reasons > 0 else "none reported"
        warn(ThrottleWarning,
             f"GPU {self._info['name']} is throttling: its SM clock was {reading.sm_mhz} MHz while running "
             f"the statement, under {THROTTLE_THRESHOLD:.0%} of its maximum {max_sm} MHz "
             f"(NVML reasons: {reasons}); the affected windows are counted in "
             "Measurement.info['throttled_windows']. Lock clocks (nvidia-smi -lgc), "
             "check power and cooling, and rerun",
             once=f"opbench.engines.cuda.throttle.{self._device}", stacklevel=5)

    def _check_resolution(self, times: list[float]) -> None:
        """Warns when the median timed window (a call's or a block's) is under 20 event quanta."""
        quantum = self._quantum
        if quantum is None or not times or not self.check_resolution:
            return
        median = statistics.median(times)
        if median >= MIN_QUANTA * quantum * (1 - 1e-6):  # float32 milliseconds
            return
        self._resolution_limited = True
        per_call = self.mode == "per_iteration" or self.cache == "cold"
        what = "per-call window" if per_call else "timed window"
        warn(ResolutionWarning,
             f"the median {what}, {_us(median)}, is {median / quantum:.1f} steps of this "
             f"GPU's event timer ({_us(quantum)} each; under {MIN_QUANTA}): the figures "
             "measure the timer's resolution as much as the statement. Time more calls per "
             "window: device_timing='events' or 'graph' (with l2_cache='warm'), or a larger number",
             once="opbench.engines.cuda.event_quantum", stacklevel=5)

    # -- reporting --------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """Facts about the device and the measurement, for ``Measurement.info``."""
        per_call = self.mode == "per_iteration" or self.cache == "cold"
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
            **self._clocks.facts(),
        }
        if self._launches is None and self._launches_counted:
            info["launch_count_problem"] = self._ctx.launch_count_problem
        if per_call:
            info["per_iteration_offset_s"] = self._offsets.get(id(self._per_call_fn))
            info["per_call_estimator"] = (
                "each call's event window, readings on one step of the event timer spread evenly over "
                "one step either side (their median unbiased under quantisation), less "
                "per_iteration_offset_s")
        if self.mode == "graph":
            info["graph_calls"] = self._graph_calls
        if not self._clocks.sm:
            info["clock_problem"] = self._ctx.clock_problem or "no clock reading under load yet"
        return info
