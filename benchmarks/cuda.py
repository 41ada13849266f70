"""CUDA device timing: opbench against torch's and triton's ways, side by side in one run.

Prints one table. The bars:
  1. large matmul: opbench's event time agrees with torch.cuda.Event timing
     around the same calls                            (bar: within 3%)
  2. tiny elementwise kernel: opbench's device time is below
     torch.utils.benchmark's synchronize-and-host-clock figure, and close to
     the kernel time torch.profiler reports           (bar: <= 1.5x profiler + 1 us)
  3. bandwidth-bound copy that fits in L2: cold-cache time above warm-cache
     time                                             (bar: cold > warm)
  4. triton.testing.do_bench, where triton is installed: its figure next to
     opbench's cold per-call median (do_bench flushes the cache too); shown, no bar.

Needs an NVIDIA GPU and torch with CUDA; without one it prints
"skipped: no CUDA device" and exits 0. Exits 1 when a bar is missed.

    python benchmarks/cuda.py          # ~1 min on an H100-class GPU
    python benchmarks/cuda.py --quick  # seconds: smaller sizes, fewer repeats
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable


def no_cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no GPU"
    try:
        import opbench.cuda as oc

        oc.Event()  # loads libcuda through opbench's own binding
    except Exception as e:  # noqa: BLE001 - any failure here means: no usable device
        return str(e)
    return None


def median_per_call(time_block: Callable[[int], float], number: int, repeats: int) -> float:
    """Median over `repeats` blocks of seconds per call."""
    return statistics.median(time_block(number) / number for _ in range(repeats))


def torch_events_block(fn: Callable[[], object]) -> Callable[[int], float]:
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


def torch_benchmark_median(fn: Callable[[], object], min_run_time: float) -> float:
    import torch.utils.benchmark as tub

    return tub.Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time).median


def profiler_kernel_time(fn: Callable[[], object], number: int) -> float:
    """Mean GPU kernel time per call that torch.profiler records (seconds)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(number):
            fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    return sum(e.time_range.elapsed_us() for e in kernels) * 1e-6 / number


def triton_do_bench(fn: Callable[[], object]) -> float | None:
    try:
        from triton.testing import do_bench
    except ImportError:
        return None
    return do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args()
    reason = no_cuda_reason()
    if reason is not None:
        print(f"skipped: no CUDA device ({reason})")
        return 0

    import torch

    import opbench.cuda as oc

    repeats = 3 if args.quick else 15
    rows: list[tuple[str, str, float, str, str]] = []
    failed: list[str] = []

    def row(case: str, method: str, seconds: float, ref: str = "", check: str = "") -> None:
        rows.append((case, method, seconds, ref, check))

    def verdict(ok: bool, what: str) -> str:
        if not ok:
            failed.append(what)
        return "PASS" if ok else "FAIL"

    # 1. Large matmul: same calls, two event implementations, interleaved so
    #    clock drift hits both alike.
    n = 4096 if args.quick else 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    matmul = lambda: torch.mm(a, b)  # noqa: E731
    for _ in range(5):
        matmul()
    ours_t = oc.DeviceTimer(matmul)
    theirs = torch_events_block(matmul)
    calls = 5 if args.quick else 20
    ours, ref = [], []
    for _ in range(repeats):
        ours.append(ours_t.timeit(calls) / calls)
        ref.append(theirs(calls) / calls)
    ours_m, ref_m = statistics.median(ours), statistics.median(ref)
    case = f"matmul {n}x{n} bf16"
    row(case, "torch.cuda.Event", ref_m)
    row(case, "opbench events", ours_m, f"{ours_m / ref_m:.3f}x torch.cuda.Event",
        verdict(abs(ours_m / ref_m - 1) <= 0.03, "matmul agreement"))
    meta = ours_t.metadata()

    # 2. Tiny elementwise kernel: launch-bound, so the host clock mostly sees launches.
    x = torch.zeros(1024, device="cuda")
    tiny = lambda: x.add_(1.0)  # noqa: E731
    calls = 200 if args.quick else 2000
    prof = profiler_kernel_time(tiny, calls)
    tub = torch_benchmark_median(tiny, 0.05 if args.quick else 0.5)
    ours_m = median_per_call(oc.DeviceTimer(tiny).timeit, calls, repeats)
    unheld = median_per_call(oc.DeviceTimer(tiny, launch_hold=False).timeit, calls, repeats)
    graph_m = median_per_call(oc.DeviceTimer(tiny, mode="graph").timeit, calls, repeats)
    per_it = statistics.median(oc.DeviceTimer(tiny, mode="per_iteration").per_call_times(calls))
    case = "add_ 1024 fp32"
    row(case, "torch.profiler kernel", prof)
    row(case, "torch.utils.benchmark", tub, f"{tub / prof:.2f}x profiler")
    row(case, "opbench events", ours_m, f"{ours_m / prof:.2f}x profiler, {ours_m / tub:.2f}x t.u.b",
        verdict(ours_m < tub and ours_m <= 1.5 * prof + 1e-6, "tiny kernel"))
    row(case, "opbench events, no hold", unheld, f"{unheld / prof:.2f}x profiler (launch gaps)")
    row(case, "opbench per_iteration", per_it, f"{per_it / prof:.2f}x profiler")
    row(case, "opbench graph", graph_m, f"{graph_m / prof:.2f}x profiler")

    # 3. Bandwidth-bound copy small enough to stay in L2 when warm.
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    elems = max(l2 // 4 // 4, 1 << 16)  # two buffers, together half the L2
    src = torch.randn(elems, device="cuda")
    dst = torch.empty_like(src)
    copy = lambda: dst.copy_(src)  # noqa: E731
    calls = 50 if args.quick else 500
    warm = statistics.median(oc.DeviceTimer(copy, mode="per_iteration").per_call_times(calls))
    cold_t = oc.DeviceTimer(copy, mode="per_iteration", cache="cold")
    cold = statistics.median(cold_t.per_call_times(calls))
    case = f"copy_ {elems * 4 / 2**20:.0f} MiB fp32"
    row(case, "opbench warm L2", warm)
    row(case, "opbench cold L2", cold, f"{cold / warm:.2f}x warm", verdict(cold > warm, "cold > warm"))

    # 4. triton's do_bench (cold cache, per-call events, median).
    if not args.quick:
        for case, fn in ((f"matmul {n}x{n} bf16", matmul), (f"copy_ {elems * 4 / 2**20:.0f} MiB fp32", copy)):
            tri = triton_do_bench(fn)
            if tri is None:
                row(case, "triton do_bench", float("nan"), "triton not installed")
                continue
            ours_cold = statistics.median(
                oc.DeviceTimer(fn, mode="per_iteration", cache="cold").per_call_times(20 if fn is matmul else calls))
            row(case, "opbench cold per-call", ours_cold)
            row(case, "triton do_bench", tri, f"{tri / ours_cold:.2f}x opbench cold")

    print(f"device: {meta['device']}  driver {meta['driver_version']} (CUDA {meta['cuda_driver_version']})  "
          f"L2 {meta['l2_cache_bytes'] / 2**20:.0f} MiB  launch hold: {meta['launch_hold']}")
    print(f"clocks SM {meta['sm_clock_mhz_start']} -> {meta['sm_clock_mhz_end']} MHz, memory "
          f"{meta['mem_clock_mhz_start']} -> {meta['mem_clock_mhz_end']} MHz, throttled: {meta['throttled']}")
    widths = (max(len(r[0]) for r in rows), max(len(r[1]) for r in rows), 12, max(len(r[3]) for r in rows))
    print(f"{'case':<{widths[0]}}  {'method':<{widths[1]}}  {'per call':>{widths[2]}}  "
          f"{'ratio':<{widths[3]}}  check")
    for case, method, seconds, ratio, check in rows:
        print(f"{case:<{widths[0]}}  {method:<{widths[1]}}  {seconds * 1e6:>9.3f} us  {ratio:<{widths[3]}}  {check}")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    print("all bars met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
