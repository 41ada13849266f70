"""The rows of tools/gpu-check: opbench's CUDA timing beside its peers, and its behaviour.

Every row is written to ``OUT/<group>.jsonl`` the moment it is measured
(flushed and fsynced), so a run killed at its time limit keeps every row it
had; ``table OUT`` prints the table from those files alone.

    python3 tools/gpu_check.py rows kernels OUT [--fake] [--quick]
    python3 tools/gpu_check.py rows behaviour OUT [--fake] [--quick]
    python3 tools/gpu_check.py rows fault OUT [--fake]
    python3 tools/gpu_check.py table OUT

Groups:
  kernels    per kernel (add_ 1K and 64 MiB fp32, copy_ 1 GiB, bf16 mm 256 / 4096 / 8192,
             a triton vector add), every method once a round, the order reversed every
             other round, over several rounds (the machine drifts): the profiler's
             per-kernel mean and its span (the calls queued behind torch.cuda._sleep, so
             back to back: throughput), torch.cuda.Event blocks and per-iteration, triton
             do_bench (cold, median) and do_bench_cudagraph (median, not its default mean),
             torch.utils.benchmark, and opbench events, graph, per-iteration and cold
             per-iteration (through opbench.Timer, so the block-size search runs too).
             Each method's row is the median of its rounds (a row per round as well).
             Judged, like against like, within 5% from 10 us up and 20% below: opbench
             events against the profiler's span (back-to-back throughput against
             back-to-back throughput) and opbench graph against do_bench_cudagraph (graph
             replays against graph replays, medians both). Shown: per-iteration against
             the span, cold per-iteration against do_bench, and every opbench figure's
             ratio to the span (``span_ratio``), all from the same rounds.
  behaviour  a never-launched kernel through Timer, graph-mode wall time, clocks under a
             long GEMM (and every window's verdict), a 64-kernel statement, a random-number
             op's launches counted, CuPy work on the legacy stream timed where it runs, a
             timer freed inside a held block, per-iteration against events for a 3 us
             kernel, torch.cuda.stream(s) and current_device left alone, a statement that
             synchronizes.
  fault      opbench used before ``import torch``, and a kernel fault in a subprocess
             (opbench's CudaError, the sticky error named, not torch's AcceleratorError).

``--fake`` stands the fake driver of tests/fake_cuda in for the GPU (CI runs the
script that way), with its hardware defaults (a jittered timer, launch gaps,
clocks that ramp): opbench's rows are measured on it, and so are the peers the
fake can stand in for (the profiler, from the fake's kernel log; event pairs
around unheld calls, as torch.cuda.Event makes them; graph replays timed one
event pair each, as do_bench_cudagraph does), each such row marked ``emulated``;
the peers that need torch or triton on a GPU are written with ``"skipped"`` and
the reason.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
Fn = Callable[[], Any]
Measure = Callable[[], float]
# Expected on hardware (issue 24, issue 39): opbench events and graph within 5% of the
# profiler's back-to-back span for kernels of 10 us and more, within 20% below.
TOLERANCE, SHORT_KERNEL_S, SHORT_TOLERANCE = 0.05, 10e-6, 0.20
PEERS = ("profiler kernel mean", "profiler kernel span", "torch.cuda.Event blocks",
         "torch.cuda.Event per-iteration", "triton do_bench (cold)", "triton do_bench_cudagraph",
         "torch.utils.benchmark")
# opbench's methods: (mode, cache), what each is set beside, and whether that is judged.
OPBENCH = (("events", "warm", "profiler kernel span", True),
           ("graph", "warm", "triton do_bench_cudagraph", True),
           ("per_iteration", "warm", "profiler kernel span", False),
           ("per_iteration", "cold", "triton do_bench (cold)", False))


class Rows:
    """Appends rows to ``OUT/<group>.jsonl`` as they come, each flushed to disk."""

    def __init__(self, out: Path, group: str) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.group = group
        self._file = open(out / f"{group}.jsonl", "a", encoding="utf-8")

    def add(self, case: str, method: str, seconds: float | None = None, **fields: Any) -> None:
        row = {"group": self.group, "case": case, "method": method, "per_call_s": seconds, **fields}
        self._file.write(json.dumps(row, default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        shown = "" if seconds is None else f"{seconds * 1e6:.3f} us"
        print(f"[{self.group}] {case} | {method} | {shown} | {fields}", flush=True)

    @contextlib.contextmanager
    def attempt(self, case: str, method: str) -> Iterator[None]:
        """A row that failed is a row too: its error, not a missing line."""
        try:
            yield
        except Exception as e:
            self.add(case, method, error=f"{type(e).__name__}: {e}"[:500])


def method_name(mode: str, cache: str) -> str:
    """``opbench events``, ``opbench per_iteration cold``."""
    return f"opbench {mode}" + (" cold" if cache == "cold" else "")


# -- the device: a GPU through torch, or the fake driver -----------------------------------


class Gpu:
    """Kernels and the peers' ways of timing them, on a real GPU through torch."""

    fake = False
    emulated: tuple[str, ...] = ()  # peers stood in for (none: these are the real ones)

    def __init__(self, quick: bool) -> None:
        import torch

        self.torch, self.quick = torch, quick

    def kernels(self) -> Iterator[tuple[str, Callable[[], Fn]]]:
        """Each kernel and what makes its statement (a kernel that cannot be made is an error
        row, not the end of the step); its tensors are freed once the caller moves on."""
        torch = self.torch
        yield "add_ 1K fp32", lambda: _add(torch.zeros(1024, device="cuda"))
        yield "add_ 64 MiB fp32", lambda: _add(torch.zeros(16 * 2**20, device="cuda"))
        yield "copy_ 1 GiB fp32", lambda: _copy(torch.empty(2**28, device="cuda").uniform_())  # 1 GiB
        for n in (256, 4096) if self.quick else (256, 4096, 8192):
            yield f"mm bf16 {n}", lambda n=n: _mm(torch, n)
        yield "triton add 16M fp32", _triton_add

    def peers(self, fn: Fn) -> dict[str, Measure | str]:
        """Each peer's way of timing ``fn`` once (seconds per call), or why it cannot."""
        torch = self.torch
        n = 50 if self.quick else 200
        return {
            "profiler kernel mean": lambda: _profiler(torch, fn, n)[0],
            "profiler kernel span": lambda: _profiler(torch, fn, n, queued=True)[1],
            "torch.cuda.Event blocks": lambda: _median([_events_block(torch, fn, n) for _ in range(3)]),
            "torch.cuda.Event per-iteration": lambda: _median(_events_each(torch, fn, n)),
            "triton do_bench (cold)": lambda: _do_bench(fn, graph=False),
            "triton do_bench_cudagraph": lambda: _do_bench(fn, graph=True),
            "torch.utils.benchmark": lambda: _tub(fn, 0.05 if self.quick else 0.1),
        }

    def behaviour(self, rows: Rows) -> None:
        _gpu_behaviour(self.torch, rows, self.quick)


class FakeGpu:
    """The fake driver in the GPU's place, with its hardware defaults: kernels of fixed
    device time; the profiler (the fake's kernel log) and torch.cuda.Event pairs as peers."""

    fake = True
    emulated = ("profiler kernel mean", "profiler kernel span", "torch.cuda.Event blocks",
                "triton do_bench_cudagraph")
    # Device time of each kernel, about an H200's.
    KERNELS = (("add_ 1K fp32", 0.002), ("add_ 64 MiB fp32", 0.03), ("copy_ 1 GiB fp32", 0.45),
               ("mm bf16 256", 0.005), ("mm bf16 4096", 0.15), ("mm bf16 8192", 1.1),
               ("triton add 16M fp32", 0.03))

    def __init__(self, quick: bool) -> None:
        sys.path.insert(0, str(ROOT / "tests"))
        import fake_cuda

        self.fc = fake_cuda
        self.fake_cuda = fake_cuda.FakeCuda(fake_cuda.library())
        self.fake_cuda.defaults = {"launch_ns": 3000}  # a torch op's host time, about
        self.fake_cuda.configure()
        self.quick = quick
        # torch.cuda on the fake, its current stream one of its own (graph mode captures through it)
        self.torch_cuda = fake_cuda.FakeTorchCuda(self.fake_cuda, {0: self.fake_cuda.stream(0)})
        _use_fake_torch(self.torch_cuda)

    def kernels(self) -> Iterator[tuple[str, Callable[[], Fn]]]:
        for case, ms in self.KERNELS[:3] if self.quick else self.KERNELS:
            yield case, lambda ms=ms: self.torch_cuda.kernel(ms)

    def peers(self, fn: Fn) -> dict[str, Measure | str]:
        n = 50 if self.quick else 200
        found: dict[str, Measure | str] = {name: "needs torch on a GPU (fake driver)" for name in PEERS}
        # Both from the one queued run: the fake's clocks ramp with real time, so a run of
        # its own (gaps at a busy host's pace) would run the kernels at other clocks.
        found["profiler kernel mean"] = lambda: self._profiler(fn, n, queued=True)[0]
        found["profiler kernel span"] = lambda: self._profiler(fn, n, queued=True)[1]
        found["torch.cuda.Event blocks"] = lambda: _median([self._events_block(fn, n) for _ in range(3)])
        found["triton do_bench_cudagraph"] = lambda: self._cudagraph(fn)
        return found

    def _cudagraph(self, fn: Fn) -> float:
        """do_bench_cudagraph's way: a graph of the calls in about 20 ms, each of 10 replays
        between its own event pair, the median replay over its calls."""
        from opbench import _C
        from opbench.engines.cuda.graphs import graph_calls

        tc, fake = self.torch_cuda, self.fake_cuda
        stream = tc.streams[0]
        ctx = _C.CudaContext(0)
        start, end = ctx.event(), ctx.event()
        fake.set_current(0)
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        calls = graph_calls(float(start.elapsed_time(end)) * 1e-3)
        graph = tc.CUDAGraph()
        with tc.graph(graph, stream=tc.Stream()):
            for _ in range(calls):
                fn()
        graph.replay()  # the upload
        times = []
        for _ in range(10):
            start.record(stream)
            graph.replay()
            end.record(stream)
            end.synchronize()
            times.append(float(start.elapsed_time(end)) * 1e-3 / calls)
        return _median(times)

    def _profiler(self, fn: Fn, n: int, queued: bool = False) -> tuple[float, float]:
        """(kernel time per call, (last end - first start) / n) from the fake's kernel log;
        queued: behind a 50 ms kernel (as torch.cuda._sleep), so back to back."""
        fake, stream = self.fake_cuda, self.torch_cuda.streams[0]
        fake.set_current(0)
        fn()
        fake.synchronize(stream)
        fake.kernel_log()
        if queued:
            fake.launch(50.0, stream=stream)
        for _ in range(n):
            fn()
        fake.synchronize(stream)
        kernels = fake.kernel_log()[1 if queued else 0:]
        busy = sum(e - s for s, e in kernels) * 1e-9 / n
        span = (kernels[-1][1] - kernels[0][0]) * 1e-9 / n
        return busy, span

    def _events_block(self, fn: Fn, n: int) -> float:
        """An event pair around ``n`` unheld calls, as torch.cuda.Event records them."""
        from opbench import _C

        stream = self.torch_cuda.streams[0]
        ctx = _C.CudaContext(0)
        start, end = ctx.event(), ctx.event()
        self.fake_cuda.set_current(0)
        start.record(stream)
        for _ in range(n):
            fn()
        end.record(stream)
        end.synchronize()
        return float(start.elapsed_time(end)) * 1e-3 / n

    def behaviour(self, rows: Rows) -> None:
        _fake_behaviour(self, rows)


def _use_fake_torch(cuda: Any) -> None:
    """opbench's CUDA engine sees ``cuda`` as torch.cuda for the rest of this process."""
    import types

    from opbench.engines.cuda import devices

    torch = types.SimpleNamespace(cuda=cuda, __version__="fake")
    devices.torch_cuda = lambda: cuda  # type: ignore[assignment]
    devices.require_torch = lambda what: torch  # type: ignore[assignment]


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _add(x: Any) -> Fn:
    return lambda: x.add_(1.0)


def _copy(src: Any) -> Fn:
    dst = src.new_empty(src.shape)
    return lambda: dst.copy_(src)


def _mm(torch: Any, n: int) -> Fn:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return lambda: torch.mm(a, b)


# -- the peers (real GPU) -----------------------------------------------------------------


def _profiler(torch: Any, fn: Fn, n: int, queued: bool = False) -> tuple[float, float]:
    """(kernel time per call, (last end - first start) / n) from torch.profiler. Queued:
    the calls wait behind torch.cuda._sleep, so the GPU runs them back to back."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        if queued:
            torch.cuda._sleep(50_000_000)
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA
               and "sleep" not in e.name and "spin" not in e.name]
    if not kernels:
        raise RuntimeError("the profiler saw no kernels")
    busy = sum(e.time_range.end - e.time_range.start for e in kernels) * 1e-6 / n
    span = (max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels)) * 1e-6 / n
    return busy, span


def _events_block(torch: Any, fn: Fn, n: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) * 1e-3 / n


def _events_each(torch: Any, fn: Fn, n: int) -> list[float]:
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [float(s.elapsed_time(e)) * 1e-3 for s, e in pairs]


def _do_bench(fn: Fn, graph: bool) -> float:
    from triton.testing import do_bench, do_bench_cudagraph

    # The median, as opbench reports: do_bench_cudagraph's default is the mean.
    ms = do_bench_cudagraph(fn, rep=100, return_mode="median") if graph else \
        do_bench(fn, warmup=25, rep=100, return_mode="median")
    return float(ms) * 1e-3


def _tub(fn: Fn, min_run_time: float) -> float:
    import torch.utils.benchmark as tub

    return float(tub.Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time).median)


def _triton_add() -> Fn:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        total = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, total, mask=mask)

    n = 16 * 2**20
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    return lambda: add_kernel[grid](x, y, out, n, BLOCK=1024)


# -- the groups ------------------------------------------------------------------------------


def _opbench(fn: Fn, mode: str, cache: str, min_run_time: float) -> tuple[float, float, dict[str, Any]]:
    """(median per call, wall seconds, info) of opbench.Timer with device timing."""
    import opbench

    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = opbench.Timer(fn, device_timing=mode, l2_cache=cache).blocked_autorange(min_run_time=min_run_time)
    info = dict(m.info)
    info["warnings"] = sorted({w.category.__name__ for w in caught})
    return float(m.median), time.monotonic() - start, info


def rounds(methods: dict[str, Measure], count: int, rows: Rows, case: str
           ) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Every method once a round, the order reversed every other round, ``count`` rounds;
    each measurement written as a row of its own. Returns the figures by method, and the
    error of each method that failed (it is not tried again)."""
    figures: dict[str, list[float]] = {name: [] for name in methods}
    failed: dict[str, str] = {}
    names = list(methods)
    for r in range(count):
        for name in names if r % 2 == 0 else reversed(names):
            if name in failed:
                continue
            try:
                seconds = methods[name]()
            except Exception as e:
                failed[name] = f"{type(e).__name__}: {e}"[:500]
                continue
            figures[name].append(seconds)
            rows.add(case, name, seconds, round=r)
    return figures, failed


def kernels_group(device: Any, rows: Rows) -> None:
    mrt = 0.05 if device.quick else 0.1
    count = 2 if device.quick else 3
    for case, make in device.kernels():
        try:
            fn = make()
        except ImportError as e:  # triton is not installed: nothing of opbench's to check
            rows.add(case, "making the statement", skipped=str(e))
            continue
        except Exception as e:
            rows.add(case, "making the statement", error=f"{type(e).__name__}: {e}"[:500])
            continue
        peers = device.peers(fn)
        infos: dict[str, tuple[float, dict[str, Any]]] = {}

        def ours(mode: str, cache: str, fn: Fn = fn, infos: dict[str, Any] = infos) -> float:
            seconds, wall, info = _opbench(fn, mode, cache, mrt)
            infos[method_name(mode, cache)] = (wall, info)
            return seconds

        methods: dict[str, Measure] = {name: m for name, m in peers.items() if not isinstance(m, str)}
        for mode, cache, _, _ in OPBENCH:
            methods[method_name(mode, cache)] = lambda mode=mode, cache=cache: ours(mode, cache)
        figures, failed = rounds(methods, count, rows, case)
        found = {name: _median(values) for name, values in figures.items() if values}
        for name in PEERS:
            why = peers.get(name)
            if isinstance(why, str):
                rows.add(case, name, skipped=why)
            elif name in found:
                rows.add(case, name, found[name], rounds=len(figures[name]),
                         **({"emulated": "on the fake driver"} if name in device.emulated else {}))
            else:
                rows.add(case, name, error=failed.get(name, "not measured"))
        span = found.get("profiler kernel span")
        short = span is not None and span < SHORT_KERNEL_S
        for mode, cache, vs, judged in OPBENCH:
            method = method_name(mode, cache)
            if method not in found:
                rows.add(case, method, error=failed.get(method, "not measured"))
                continue
            seconds, ref = found[method], found.get(vs)
            check: dict[str, Any] = {"ratio": round(seconds / ref, 4)} if ref else {}
            if span:
                check["span_ratio"] = round(seconds / span, 4)
            if ref and judged:
                tolerance = SHORT_TOLERANCE if short else TOLERANCE
                check.update(ok=abs(seconds / ref - 1) <= tolerance, tolerance=tolerance)
            wall, info = infos[method]
            rows.add(case, method, seconds, vs=vs, rounds=len(figures[method]), wall_s=round(wall, 3),
                     **check, **_facts(info))


def _facts(info: dict[str, Any]) -> dict[str, Any]:
    keys = ("launch_hold", "launches_per_call", "launch_count_problem", "graph_calls",
            "per_iteration_offset_s", "l2_flush", "stream", "sm_clock_mhz", "throttled", "judged_windows",
            "unjudged_windows", "power_capped", "warnings", "block_size")
    return {k: info[k] for k in keys if info.get(k) is not None}


def _timer(statement: Fn, mode: str = "events") -> Any:
    import opbench

    return opbench.Timer(statement, device_timing=mode)


def _timed_row(rows: Rows, case: str, method: str, run: Callable[[], Any],
               check: Callable[[Any, float], dict[str, Any]]) -> None:
    """A behaviour row: ``run()`` under a wall clock, warnings recorded; ``check(result, wall)``
    gives the row's fields (``ok`` among them when it is judged)."""
    with rows.attempt(case, method):
        start = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run()
        wall = time.monotonic() - start
        fields = check(result, wall)
        seconds = fields.pop("seconds", getattr(result, "median", None))
        rows.add(case, method, seconds, wall_s=round(wall, 3),
                 warnings=sorted({w.category.__name__ for w in caught}), **fields)


def _gpu_behaviour(torch: Any, rows: Rows, quick: bool) -> None:
    import opbench
    import opbench.engines.cuda as oc

    y = torch.rand(4096, device="cuda")
    _timed_row(rows, "never-launched kernel (special.i1e)", "Timer events",
               lambda: _timer(lambda: torch.special.i1e(y)).blocked_autorange(min_run_time=0.2),
               lambda m, wall: {"number": m.number_per_run, "launch_hold": m.info["launch_hold"],
                                "ok": m.number_per_run > 1 and m.info["launch_hold"] and wall < 2.0})
    x = torch.zeros(1024, device="cuda")
    _timed_row(rows, "graph-mode wall time (add_ 1K)", "Timer graph min_run_time=0.2",
               lambda: _timer(lambda: x.add_(1.0), "graph").blocked_autorange(min_run_time=0.2),
               lambda m, wall: {"number": m.number_per_run, "graph_calls": m.info.get("graph_calls"),
                                "ok": wall < 2.0})
    n = 4096 if quick else 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    _timed_row(rows, f"clocks under a long GEMM (mm bf16 {n})", "Timer events",
               lambda: _timer(lambda: torch.mm(a, a)).blocked_autorange(min_run_time=0.5 if quick else 2.0),
               lambda m, wall: {k: m.info.get(k) for k in (
                   "sm_clock_mhz", "sm_clock_mhz_lowest", "sm_clock_mhz_max", "mem_clock_mhz",
                   "clock_settled", "throttled", "judged_windows", "unjudged_windows", "unjudged_reason",
                   "power_capped", "throttle_reasons", "clock_problem")}
               | {"ok": m.info.get("unjudged_windows") == 0 or m.info.get("clock_problem") is not None})

    def sixty_four() -> None:
        for _ in range(64):
            x.add_(1.0)

    _sixty_four_row(rows, sixty_four)
    with torch.cuda.stream(torch.cuda.Stream()):
        _timed_row(rows, "random-number op (torch.randn) on torch's stream", "Timer events",
                   lambda: _timer(lambda: torch.randn(4096, device="cuda")).timeit(1000),
                   lambda m, wall: {"launches_per_call": m.info.get("launches_per_call"),
                                    "problem": m.info.get("launch_count_problem"),
                                    "ok": (m.info.get("launches_per_call") or 0) >= 1})
    _cupy_row(rows)
    _freed_timer_row(rows, lambda: x.add_(1.0), lambda: oc.DeviceTimer(lambda: x.mul_(1.0), cache="cold"))
    _per_iteration_row(rows, lambda: x.add_(1.0))
    with rows.attempt("torch.cuda.stream(s), current_device", "Timer events inside"):
        s = torch.cuda.Stream()
        device = torch.cuda.current_device()
        with torch.cuda.stream(s):
            m = opbench.Timer(lambda: x.add_(1.0), device_timing="events").timeit(1000)
            left_alone = torch.cuda.current_stream() == s and torch.cuda.current_device() == device
        rows.add("torch.cuda.stream(s), current_device", "Timer events inside", m.median,
                 stream=m.info.get("stream"), left_alone=left_alone, ok=left_alone)
    with rows.attempt("legacy current stream", "Timer events"):
        m = opbench.Timer(lambda: x.add_(1.0), device_timing="events").timeit(1000)
        rows.add("legacy current stream", "Timer events", m.median, stream=m.info.get("stream"),
                 ok=str(m.info.get("stream", "")).startswith("private non-blocking stream"))
    _sync_row(rows, lambda: x.sum().item())


def _cupy_row(rows: Rows) -> None:
    """CuPy's kernels go on the legacy stream whatever torch's current stream is: with torch
    in use they were timed on the private stream that only torch's launches follow (about 0)."""
    try:
        import cupy
    except ImportError:
        rows.add("CuPy work on the legacy stream", "Timer events", skipped="cupy is not installed")
        return
    import opbench

    z = cupy.zeros(1 << 22, dtype=cupy.float32)
    _timed_row(rows, "CuPy work on the legacy stream", "Timer events",
               lambda: opbench.Timer(lambda: z.__iadd__(1), device_timing="events").blocked_autorange(
                   min_run_time=0.1),
               lambda m, wall: {"stream": m.info.get("stream"), "ok": m.median > 1e-6})


def _freed_timer_row(rows: Rows, statement: Fn, make_timer: Callable[[], Any]) -> None:
    """A DeviceTimer dropped inside another's held block: its frees wait for no hold (the
    2 s watchdog was waited out), and blocks are not made smaller for the process."""
    import opbench.engines.cuda as oc

    other = [make_timer()]
    other[0].timeit(1)
    calls = itertools.count()

    def dropping() -> None:
        if next(calls) == 10:
            other.clear()
        statement()

    t = oc.DeviceTimer(dropping)
    _timed_row(rows, "a timer freed inside a held block", "DeviceTimer events", lambda: t.timeit(64) / 64,
               lambda s, wall: {"seconds": s, "hold_chunk": t._ctx.hold_chunk, "ok": wall < 1.0})


def _per_iteration_row(rows: Rows, statement: Fn) -> None:
    """Per-iteration's figures against events' for a short kernel: the estimator and the
    subtracted record offset bring them together (the raw median was up to half a step off)."""
    import opbench

    def both() -> tuple[float, float, dict[str, Any]]:
        per_call = opbench.Timer(statement, device_timing="per_iteration").timeit(2000)
        events = opbench.Timer(statement, device_timing="events").timeit(2000)
        return per_call.median, events.median, per_call.info

    _timed_row(rows, "per-iteration against events (add_ 1K)", "Timer per_iteration", both,
               lambda r, wall: {"seconds": r[0], "events_s": r[1], "ratio": round(r[0] / r[1], 4),
                                "offset_s": r[2].get("per_iteration_offset_s"),
                                "quantum_s": r[2].get("event_quantum_s"), "ok": abs(r[0] / r[1] - 1) <= 0.1})


def _sixty_four_row(rows: Rows, statement: Fn) -> None:

    _timed_row(rows, "64 kernels per call", "Timer events",
               lambda: _timer(statement).blocked_autorange(min_run_time=0.2),
               lambda m, wall: {"launches_per_call": m.info.get("launches_per_call"),
                                "launch_hold": m.info["launch_hold"],
                                "ok": m.info["launch_hold"] and wall < 2.0})


def _sync_row(rows: Rows, statement: Fn) -> None:
    import opbench

    _timed_row(rows, "a statement that synchronizes", "Timer events",
               lambda: opbench.Timer(statement, device_timing="events").timeit(20),
               lambda m, wall: {"launch_hold": m.info["launch_hold"],
                                "reason": m.info.get("launch_hold_off_reason")})


def _fake_behaviour(device: FakeGpu, rows: Rows) -> None:
    import opbench
    import opbench.engines.cuda as oc

    fake, tc = device.fake_cuda, device.torch_cuda
    fake.set(load_device_ns=5_000_000)
    _timed_row(rows, "never-launched kernel", "Timer events",
               lambda: opbench.Timer(tc.kernel(0.003, kernel=5), device_timing="events").blocked_autorange(
                   min_run_time=0.05),
               lambda m, wall: {"number": m.number_per_run, "launch_hold": m.info["launch_hold"],
                                "ok": m.number_per_run > 1 and m.info["launch_hold"]})
    launches = fake.stat("graph_launches")
    _timed_row(rows, "graph-mode wall time", "Timer graph min_run_time=0.2",
               lambda: _timer(tc.kernel(0.002), "graph").blocked_autorange(min_run_time=0.2),
               # 0.2 s of 2 ms replays: about 100, and a few for warm-up and the clock probe
               lambda m, wall: {"number": m.number_per_run, "replays": fake.stat("graph_launches") - launches,
                                "ok": fake.stat("graph_launches") - launches < 200})
    fake.set(sm_clock_busy=1500, busy_reasons=0x4)
    _timed_row(rows, "clocks under a long GEMM", "Timer events",
               lambda: _timer(tc.kernel(1.0)).timeit(100),
               lambda m, wall: {k: m.info.get(k) for k in ("sm_clock_mhz", "clock_settled", "throttled",
                                                            "judged_windows", "unjudged_windows",
                                                            "power_capped")}
               | {"ok": m.info.get("power_capped") is True and m.info.get("throttled") is False})
    fake.set(sm_clock_busy=1980, busy_reasons=0)
    _sixty_four_row(rows, tc.kernel(0.001, per_call=64))
    _timed_row(rows, "random-number op on torch's stream", "Timer events",
               lambda: opbench.Timer(tc.random(0.002), device_timing="events").timeit(1000),
               lambda m, wall: {"launches_per_call": m.info.get("launches_per_call"),
                                "ok": m.info.get("launches_per_call") == 1})
    _timed_row(rows, "work on the legacy stream, torch's current stream the legacy one", "Timer events",
               lambda: _on_legacy_torch(tc, lambda: _timer(fake.kernel(0.01)).timeit(1000)),
               lambda m, wall: {"stream": m.info.get("stream"), "ok": m.median > 5e-6})
    _freed_timer_row(rows, tc.kernel(0.01), lambda: oc.DeviceTimer(tc.kernel(0.01), cache="cold"))
    _per_iteration_row(rows, tc.kernel(0.0022))
    rows.add("torch.cuda.stream(s), current_device", "Timer events inside", skipped="needs torch on a GPU")

    def sync_then_kernel() -> None:
        fake.synchronize(tc.streams[0])
        tc.kernel(0.01)()

    _sync_row(rows, sync_then_kernel)


def _on_legacy_torch(tc: Any, run: Callable[[], Any]) -> Any:
    """``run()`` with torch's current stream the legacy one."""
    before, tc.streams[0] = tc.streams[0], 0
    try:
        return run()
    finally:
        tc.streams[0] = before


_FAULT_CODE = {
    False: ("import torch, opbench.engines.cuda as oc\n"
            "x = torch.zeros(4, device='cuda'); i = torch.tensor([1 << 40], device='cuda')\n"
            "t = oc.DeviceTimer(lambda: x.index_add_(0, i, x[:1]))\n"),
    # torch's current stream the legacy one, so the statement runs on a private stream,
    # which the legacy stream is made to wait for afterwards, through torch
    True: ("import sys, itertools; sys.path.insert(0, {tests!r})\n"
           "from fake_cuda import FakeCuda, FakeTorchCuda, library\n"
           "import opbench.engines.cuda as oc\n"
           "fake = FakeCuda(library()); fake.configure()\n"
           "sys.path.insert(0, {tools!r}); import gpu_check\n"
           "tc = FakeTorchCuda(fake); gpu_check._use_fake_torch(tc); calls = itertools.count()\n"
           "t = oc.DeviceTimer(tc.kernel(0.1, fault=lambda: 700 if next(calls) == 3 else 0))\n"),
}
_BEFORE_TORCH = {
    False: ("import sys, opbench, opbench.engines.cuda as oc\n"
            "assert 'torch' not in sys.modules\n"
            "e = oc.Event(); e.record(); e.synchronize()\n"
            "import torch\n"
            "x = torch.zeros(1024, device='cuda')\n"
            "m = opbench.Timer(lambda: x.add_(1.0), device_timing='events').timeit(100)\n"
            "print('ok', m.median)\n"),
    True: ("import sys; sys.path.insert(0, {tests!r})\n"
           "import opbench, opbench.engines.cuda as oc\n"
           "assert 'torch' not in sys.modules\n"
           "from fake_cuda import FakeCuda, library\n"
           "fake = FakeCuda(library()); fake.configure()\n"
           "m = opbench.Timer(fake.kernel(0.01), device_timing='events').timeit(100)\n"
           "print('ok', m.median)\n"),
}


def fault_group(device_is_fake: bool, rows: Rows) -> None:
    paths = {"tests": str(ROOT / "tests"), "tools": str(ROOT / "tools")}
    with rows.attempt("opbench before import torch", "subprocess"):
        out = subprocess.run([sys.executable, "-c", _BEFORE_TORCH[device_is_fake].format(**paths)],
                             capture_output=True, text=True, timeout=120, check=False)
        words = out.stdout.split()
        seconds = float(words[1]) if words[:1] == ["ok"] else None
        rows.add("opbench before import torch", "subprocess", seconds, ok=out.returncode == 0,
                 stderr=out.stderr[-300:])
    code = _FAULT_CODE[device_is_fake].format(**paths) + (
        "try:\n    t.timeit(5)\n"
        "except oc.CudaError as e:\n    print(e.function, e.code, 'sticky' in str(e))\n")
    with rows.attempt("kernel fault in a subprocess", "DeviceTimer events"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             check=False)
        words = out.stdout.split()
        rows.add("kernel fault in a subprocess", "DeviceTimer events", None, reported=" ".join(words),
                 ok=len(words) == 3 and words[2] == "True", stderr=out.stderr[-300:])


# -- the table ---------------------------------------------------------------------------------


def table(out: Path) -> int:
    """Prints every row of OUT/*.jsonl (a method's rounds only where its summary row is
    missing: a run killed mid-kernel); 1 when a row failed its check or errored."""
    found = []
    for path in sorted(out.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a line cut by a kill
                found.append(json.loads(line))
    summarised = {(r["case"], r["method"]) for r in found if "round" not in r}
    rows = [r for r in found if "round" not in r or (r["case"], r["method"]) not in summarised]
    if not rows:
        print(f"no rows in {out}")
        return 1
    width = [max(len(r["case"]) for r in rows), max(len(r["method"]) for r in rows)]
    bad = 0
    print(f"{'case':<{width[0]}}  {'method':<{width[1]}}  {'per call':>13}  {'ratio':>7}  check  notes")
    for r in rows:
        seconds = r.get("per_call_s")
        cell = "" if seconds is None else f"{seconds * 1e6:10.3f} us"
        ratio = "" if r.get("ratio") is None else f"{r['ratio']:.3f}"
        ok = r.get("ok")
        check = "ERROR" if "error" in r else "skip" if "skipped" in r else "" if ok is None else \
            "PASS" if ok else "FAIL"
        bad += check in ("ERROR", "FAIL")
        notes = {k: v for k, v in r.items()
                 if k not in ("group", "case", "method", "per_call_s", "ratio", "ok", "tolerance")}
        print(f"{r['case']:<{width[0]}}  {r['method']:<{width[1]}}  {cell:>13}  {ratio:>7}  {check:<5}  "
              f"{json.dumps(notes, default=str)[:160]}")
    print(f"{len(rows)} rows, {bad} failed or errored")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("rows", help="measure one group of rows")
    r.add_argument("group", choices=("kernels", "behaviour", "fault"))
    r.add_argument("out", type=Path)
    r.add_argument("--fake", action="store_true", help="the fake driver in the GPU's place (CI)")
    r.add_argument("--quick", action="store_true", help="fewer kernels, rounds and shorter runs")
    t = sub.add_parser("table", help="print the table from OUT/*.jsonl")
    t.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "table":
        return table(args.out)
    rows = Rows(args.out, args.group)
    if args.group == "fault":
        fault_group(args.fake, rows)
        return 0
    device = FakeGpu(args.quick) if args.fake else Gpu(args.quick)
    if args.group == "kernels":
        kernels_group(device, rows)
    else:
        device.behaviour(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
