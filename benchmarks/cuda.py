"""CUDA device timing: opbench against torch's and triton's ways, side by side in one run.

Prints one table (per-call times in microseconds) and exits 1 when a bar is missed:

  tiny add_      opbench's held time vs the profiler's kernel span ((last end - first
                 start) / N, the N kernels queued behind torch.cuda._sleep so they run
                 back to back)                               bar: within 10% + 0.5 us
                 graph mode, per-iteration, no hold, opbench.Timer, torch.utils.benchmark,
                 torch.cuda.Event and triton's do_bench beside it (shown)
  lazy load      a kernel never launched before, timed first: no stall, hold still on
  8 kernels      a statement queueing 8 kernels per call: no stall, hold still on
  cold copy      1x, 2x, 4x the L2 size: opbench cold per-call vs do_bench (shown)
  1 GiB copy     cold equals warm                            bar: within 3%, 0.1-10 TB/s
  matmul         opbench events vs torch.cuda.Event          bar: within 3%
  clocks         SM clock under load vs maximum, throttle flag and reasons

Needs an NVIDIA GPU and torch with CUDA (triton optional); without one it prints
"skipped: ..." and exits 0. About a minute on an H100/H200; --quick: seconds.

    python benchmarks/cuda.py
    python benchmarks/cuda.py --quick
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

Fn = Callable[[], Any]
# The launch hold's watchdog (CudaContext.watchdog_s): each stall costs at least this long.
WATCHDOG_S = 2.0


def no_cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no GPU"
    try:
        import opbench.engines.cuda as oc

        oc.Event()  # loads libcuda through opbench's own binding
    except Exception as e:
        return str(e)
    return None


class Table:
    """Rows of (case, method, seconds per call, comparison, check); bars that fail are kept."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, float | None, str, str]] = []
        self.failed: list[str] = []

    def add(self, case: str, method: str, seconds: float | None, vs: str = "", check: str = "") -> None:
        self.rows.append((case, method, seconds, vs, check))

    def bar(self, ok: bool, what: str) -> str:
        if not ok:
            self.failed.append(what)
        return "PASS" if ok else "FAIL"

    def print(self) -> None:
        w = [max(len(r[0]) for r in self.rows), max(len(r[1]) for r in self.rows),
             max(len(r[3]) for r in self.rows)]
        print(f"{'case':<{w[0]}}  {'method':<{w[1]}}  {'per call':>12}  {'vs':<{w[2]}}  check")
        for case, method, seconds, vs, check in self.rows:
            cell = "" if seconds is None else f"{seconds * 1e6:9.3f} us"
            print(f"{case:<{w[0]}}  {method:<{w[1]}}  {cell:>12}  {vs:<{w[2]}}  {check}")


def median_per_call(block: Callable[[int], float], number: int, repeats: int) -> float:
    """Median over `repeats` blocks of seconds per call."""
    return statistics.median(block(number) / number for _ in range(repeats))


def torch_events_block(fn: Fn) -> Callable[[int], float]:
    """Seconds for `number` calls between two torch.cuda.Event records (launch gaps included)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def block(number: int) -> float:
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3

    return block


def profiler_span(fn: Fn, number: int) -> float:
    """(last kernel end - first kernel start) / number, the calls queued behind a
    torch.cuda._sleep kernel so that the GPU runs them back to back."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(40_000_000)  # ~20 ms of spinning: longer than queueing the calls
        for _ in range(number):
            fn()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA
                      and "spin" not in e.name and "sleep" not in e.name),
                     key=lambda e: e.time_range.start)
    if len(kernels) < number:
        raise RuntimeError(f"the profiler saw {len(kernels)} kernels for {number} calls")
    return (kernels[-1].time_range.end - kernels[0].time_range.start) * 1e-6 / number


def triton_do_bench(fn: Fn) -> float | None:
    try:
        from triton.testing import do_bench  # type: ignore[import-not-found]
    except ImportError:
        return None
    return float(do_bench(fn, warmup=25, rep=100, return_mode="median")) * 1e-3


def copy_statement(nbytes: int) -> Fn:
    """``dst.copy_(src)`` over two fresh fp32 buffers of ``nbytes`` each."""
    import torch

    src = torch.empty(nbytes // 4, device="cuda").uniform_()
    dst = torch.empty_like(src)

    def copy() -> None:
        dst.copy_(src)

    return copy


def ratio(a: float, b: float | None, what: str) -> str:
    return "" if not b else f"{a / b:.3f}x {what}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args()
    reason = no_cuda_reason()
    if reason is not None:
        print(f"skipped: no CUDA device ({reason}); this benchmark needs an NVIDIA GPU and torch with CUDA")
        return 0

    import torch
    import torch.utils.benchmark as tub

    import opbench
    import opbench.engines.cuda as oc
    from opbench.errors import LaunchHoldWarning

    quick = args.quick
    repeats = 3 if quick else 11
    table = Table()
    start_wall = time.monotonic()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = props.L2_cache_size

    # -- a kernel never launched before: lazy loading, first, before anything else
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LaunchHoldWarning)
        y = torch.rand(4096, device="cuda")
        lazy = oc.DeviceTimer(lambda: torch.special.i1e(y))
        t0 = time.monotonic()
        first = lazy.timeit(1)
        then = lazy.timeit(1000) / 1000
        wall = time.monotonic() - t0
    stalled = any(issubclass(w.category, LaunchHoldWarning) for w in caught)
    held = lazy.metadata()["launch_hold"]
    table.add("lazy load (special.i1e)", "first call", first)
    table.add("lazy load (special.i1e)", "then, held", then, f"wall {wall:.2f} s, hold {held}",
              table.bar(held and not stalled and wall < WATCHDOG_S, "lazy load keeps the hold"))

    # -- tiny elementwise kernel: launch-bound
    x = torch.zeros(1024, device="cuda")

    def tiny() -> None:
        x.add_(1.0)

    n = 200 if quick else 500
    span = statistics.median(profiler_span(tiny, n) for _ in range(3 if quick else 5))
    held_t = oc.DeviceTimer(tiny)
    held_m = median_per_call(held_t.timeit, n, repeats)
    graph_m = median_per_call(oc.DeviceTimer(tiny, mode="graph").timeit, n, repeats)
    per_it = statistics.median(oc.DeviceTimer(tiny, mode="per_iteration").per_call_times(n))
    unheld = median_per_call(oc.DeviceTimer(tiny, launch_hold=False).timeit, n, repeats)
    timer_m = opbench.Timer(tiny, device_timing="events").blocked_autorange(min_run_time=0.05).median
    tub_m = tub.Timer("fn()", globals={"fn": tiny}).blocked_autorange(
        min_run_time=0.05 if quick else 0.3).median
    ev_m = median_per_call(torch_events_block(tiny), n, repeats)
    case = "tiny add_ 1024 fp32"
    table.add(case, "profiler kernel span", span)
    table.add(case, "opbench events (held)", held_m, ratio(held_m, span, "span"),
              table.bar(abs(held_m - span) <= 0.1 * span + 0.5e-6, "tiny kernel vs profiler span"))
    table.add(case, "opbench graph", graph_m, ratio(graph_m, span, "span"))
    table.add(case, "opbench per_iteration", per_it, ratio(per_it, span, "span"))
    table.add(case, "opbench events, no hold", unheld, ratio(unheld, span, "span"))
    table.add(case, "opbench.Timer(device_timing)", timer_m, ratio(timer_m, span, "span"))
    table.add(case, "torch.utils.benchmark", tub_m, ratio(tub_m, span, "span"))
    table.add(case, "torch.cuda.Event", ev_m, ratio(ev_m, span, "span"))
    tri = triton_do_bench(tiny)
    table.add(case, "triton do_bench", tri, ratio(tri, span, "span") if tri else "triton not installed")

    # -- 8 kernels per call: 32 held calls queue 256 kernels, under the launch queue
    def eight() -> None:
        for _ in range(8):
            x.add_(1.0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LaunchHoldWarning)
        t8 = oc.DeviceTimer(eight)
        t0 = time.monotonic()
        eight_m = t8.timeit(2000) / 2000
        wall = time.monotonic() - t0
    stalled = any(issubclass(w.category, LaunchHoldWarning) for w in caught)
    table.add("8 x add_ per call", "opbench events (held)", eight_m,
              f"{eight_m / held_m:.2f}x tiny, wall {wall:.2f} s",
              table.bar(t8.metadata()["launch_hold"] and not stalled and wall < WATCHDOG_S,
                        "8 kernels per call, no stall"))

    # -- cold-cache copies of 1x, 2x, 4x the L2, against do_bench (which flushes too)
    for k in (1, 2, 4):
        copy = copy_statement(k * l2)
        cold = statistics.median(oc.DeviceTimer(copy, mode="per_iteration", cache="cold")
                                 .per_call_times(50 if quick else 200))
        tri = None if quick else triton_do_bench(copy)
        case = f"cold copy_ {k}x L2 ({k * l2 / 2**20:.0f} MiB)"
        table.add(case, "opbench cold per-call", cold)
        table.add(case, "triton do_bench", tri, ratio(cold, tri, "do_bench (opbench/do_bench)") if tri else
                  "skipped (--quick or no triton)")
        del copy  # frees its buffers

    # -- 1 GiB copy: far beyond L2, so cold must equal warm
    gib = (256 if quick else 1024) * 2**20
    big = copy_statement(gib)
    calls = 10 if quick else 50
    warm = statistics.median(oc.DeviceTimer(big, mode="per_iteration").per_call_times(calls))
    cold = statistics.median(oc.DeviceTimer(big, mode="per_iteration", cache="cold").per_call_times(calls))
    bandwidth = 2 * gib / cold  # read + write
    case = f"copy_ {gib / 2**30:.2f} GiB"
    table.add(case, "opbench warm", warm)
    table.add(case, "opbench cold", cold, f"{cold / warm:.3f}x warm, {bandwidth / 1e12:.2f} TB/s",
              table.bar(abs(cold / warm - 1) <= 0.03 and 0.1e12 < bandwidth < 10e12, "1 GiB cold = warm"))
    del big

    # -- large matmul: two event implementations around the same calls, interleaved
    size = 4096 if quick else 8192
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)

    def matmul() -> None:
        torch.mm(a, b)

    ours_t = oc.DeviceTimer(matmul)
    theirs = torch_events_block(matmul)
    calls = 5 if quick else 20
    ours_t.timeit(calls)
    theirs(calls)  # both warm
    ours, ref = [], []
    for _ in range(repeats):
        ours.append(ours_t.timeit(calls) / calls)
        ref.append(theirs(calls) / calls)
    ours_m, ref_m = statistics.median(ours), statistics.median(ref)
    case = f"matmul {size}x{size} bf16"
    table.add(case, "torch.cuda.Event", ref_m)
    table.add(case, "opbench events", ours_m, ratio(ours_m, ref_m, "torch.cuda.Event"),
              table.bar(abs(ours_m / ref_m - 1) <= 0.03, "matmul vs torch.cuda.Event"))

    meta = ours_t.metadata()
    quantum = meta["event_quantum_s"]
    print(f"device: {meta['device']}  driver {meta['driver_version']} (CUDA {meta['cuda_driver_version']})  "
          f"L2 {meta['l2_cache_bytes'] / 2**20:.0f} MiB  module loading: {meta['module_loading']}  "
          f"event quantum: {'unknown' if quantum is None else f'{quantum * 1e9:.0f} ns'}  "
          f"hold: {meta['launch_hold']} {meta['launch_hold_off_reason'] or ''}")
    table.print()
    print(f"clocks under load (matmul): SM {meta['sm_clock_mhz']} MHz (lowest {meta['sm_clock_mhz_lowest']}, "
          f"max {meta['sm_clock_mhz_max']}), memory {meta['mem_clock_mhz']} MHz; throttled: "
          f"{meta['throttled']} ({meta['throttled_windows']} windows, reasons: "
          f"{', '.join(meta['throttle_reasons']) or 'none'})")
    print(f"total {time.monotonic() - start_wall:.0f} s")
    if table.failed:
        print(f"FAILED: {', '.join(table.failed)}")
        return 1
    print("all bars met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
