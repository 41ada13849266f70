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
             a triton vector add): opbench events, graph, per-iteration and cold
             per-iteration (through opbench.Timer, so the block-size search runs too);
             the profiler's per-kernel mean and span; torch.cuda.Event blocks and
             per-iteration; triton do_bench (cold, per iteration) and do_bench_cudagraph;
             torch.utils.benchmark. Ratios: opbench / profiler mean (events, graph,
             per-iteration), cold per-iteration / do_bench, graph / do_bench_cudagraph.
  behaviour  a never-launched kernel through Timer, graph-mode wall time, clocks under a
             long GEMM, a 64-kernel statement, torch.cuda.stream(s) and current_device left
             alone, a statement that synchronizes.
  fault      opbench used before ``import torch``, and a kernel fault in a subprocess
             (the sticky error named).

``--fake`` stands the fake driver of tests/fake_cuda in for the GPU (CI runs the
script that way): opbench's rows are measured on it, the peers' rows (which
need torch on a GPU) are written with ``"skipped"`` and the reason.
"""
from __future__ import annotations

import argparse
import contextlib
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
# Expected on hardware (issue 24): events and graph within 5% of the profiler's
# per-kernel mean for kernels of 10 us and more; graph within 20% for the 1K add_.
TOLERANCE, SHORT_KERNEL_S, SHORT_TOLERANCE = 0.05, 10e-6, 0.20


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


def _median(values: list[float]) -> float:
    return statistics.median(values)


# -- the device: a GPU through torch, or the fake driver -----------------------------------


class Gpu:
    """Kernels and the peers' ways of timing them, on a real GPU through torch."""

    fake = False

    def __init__(self, quick: bool) -> None:
        import torch

        self.torch, self.quick = torch, quick

    def kernels(self) -> Iterator[tuple[str, Fn]]:
        """Each kernel's statement; its tensors are freed once the caller moves on."""
        torch = self.torch
        yield "add_ 1K fp32", _add(torch.zeros(1024, device="cuda"))
        yield "add_ 64 MiB fp32", _add(torch.zeros(16 * 2**20, device="cuda"))
        src = torch.empty(2**28, device="cuda").uniform_()  # 1 GiB
        yield "copy_ 1 GiB fp32", _copy(src, torch.empty_like(src))
        del src
        for n in (256, 4096) if self.quick else (256, 4096, 8192):
            a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            yield f"mm bf16 {n}", _mm(torch, a, torch.randn(n, n, device="cuda", dtype=torch.bfloat16))
        del a
        add = _triton_add()
        if add is not None:
            yield "triton add 16M fp32", add

    def peers(self, fn: Fn, rows: Rows, case: str) -> dict[str, float]:
        """The peers' figures for ``fn``, each written as a row; by name."""
        found: dict[str, float] = {}
        torch = self.torch
        n = 50 if self.quick else 200
        for method, measure in (
            ("profiler kernel mean", lambda: _profiler(torch, fn, n)[0]),
            ("profiler kernel span", lambda: _profiler(torch, fn, n, queued=True)[1]),
            ("torch.cuda.Event blocks", lambda: _median([_events_block(torch, fn, n) for _ in range(5)])),
            ("torch.cuda.Event per-iteration", lambda: _median(_events_each(torch, fn, n))),
            ("triton do_bench (cold)", lambda: _do_bench(fn, graph=False)),
            ("triton do_bench_cudagraph", lambda: _do_bench(fn, graph=True)),
            ("torch.utils.benchmark", lambda: _tub(fn, 0.1 if self.quick else 0.3)),
        ):
            with rows.attempt(case, method):
                found[method] = measure()
                rows.add(case, method, found[method])
        return found

    def behaviour(self, rows: Rows) -> None:
        _gpu_behaviour(self.torch, rows, self.quick)


class FakeGpu:
    """The fake driver in the GPU's place: kernels of fixed device time, no peers."""

    fake = True
    # Device time of each kernel, about an H200's.
    KERNELS = (("add_ 1K fp32", 0.002), ("add_ 64 MiB fp32", 0.03), ("copy_ 1 GiB fp32", 0.45),
               ("mm bf16 256", 0.005), ("mm bf16 4096", 0.15), ("mm bf16 8192", 1.1),
               ("triton add 16M fp32", 0.03))

    def __init__(self, quick: bool) -> None:
        sys.path.insert(0, str(ROOT / "tests"))
        import opbench.cuda as oc
        from fake_cuda import FakeCuda, FakeGraphs, library

        self.fake_cuda = FakeCuda(library())
        self.fake_cuda.configure()
        self.quick = quick
        self._graphs = FakeGraphs
        self._oc = oc

    def kernels(self) -> Iterator[tuple[str, Fn]]:
        for case, ms in self.KERNELS[:3] if self.quick else self.KERNELS:
            self._oc.DeviceTimer._graphs_cls = self._graphs(self.fake_cuda, ms_per_call=ms, upload_ms=1.0)
            yield case, self.fake_cuda.kernel(ms)

    def peers(self, fn: Fn, rows: Rows, case: str) -> dict[str, float]:
        for method in ("profiler kernel mean", "profiler kernel span", "torch.cuda.Event blocks",
                       "torch.cuda.Event per-iteration", "triton do_bench (cold)",
                       "triton do_bench_cudagraph", "torch.utils.benchmark"):
            rows.add(case, method, skipped="needs torch on a GPU (fake driver)")
        return {"profiler kernel mean": _fake_ms(self.KERNELS, case) * 1e-3}

    def behaviour(self, rows: Rows) -> None:
        _fake_behaviour(self, rows)


def _add(x: Any) -> Fn:
    return lambda: x.add_(1.0)


def _copy(src: Any, dst: Any) -> Fn:
    return lambda: dst.copy_(src)


def _mm(torch: Any, a: Any, b: Any) -> Fn:
    return lambda: torch.mm(a, b)


def _fake_ms(kernels: tuple[tuple[str, float], ...], case: str) -> float:
    return dict(kernels)[case]


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

    ms = do_bench_cudagraph(fn, rep=100) if graph else do_bench(fn, warmup=25, rep=100, return_mode="median")
    return float(ms) * 1e-3


def _tub(fn: Fn, min_run_time: float) -> float:
    import torch.utils.benchmark as tub

    return float(tub.Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time).median)


def _triton_add() -> Fn | None:
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError:
        return None

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


def kernels_group(device: Any, rows: Rows) -> None:
    mrt = 0.05 if device.quick else 0.2
    for case, fn in device.kernels():
        peers = device.peers(fn, rows, case)
        mean = peers.get("profiler kernel mean")
        short = mean is not None and mean < SHORT_KERNEL_S
        for mode, cache, vs in (("events", "warm", "profiler kernel mean"),
                                ("graph", "warm", "profiler kernel mean"),
                                ("per_iteration", "warm", "profiler kernel mean"),
                                ("per_iteration", "cold", "triton do_bench (cold)")):
            method = f"opbench {mode}" + (" cold" if cache == "cold" else "")
            with rows.attempt(case, method):
                ours, wall, info = _opbench(fn, mode, cache, mrt)
                ref = peers.get(vs)
                check: dict[str, Any] = {"ratio": round(ours / ref, 4)} if ref else {}
                # Judged (issue 24): events and graph against the profiler's per-kernel
                # mean, within 5% from 10 us up; graph within 20% below. The rest is shown.
                if ref and (mode == "graph" or (mode == "events" and not short)):
                    tolerance = SHORT_TOLERANCE if short else TOLERANCE
                    check.update(ok=abs(ours / ref - 1) <= tolerance, tolerance=tolerance)
                rows.add(case, method, ours, vs=vs, wall_s=round(wall, 3), **check, **_facts(info))
            if mode == "graph" and "triton do_bench_cudagraph" in peers:
                rows.add(case, "opbench graph / do_bench_cudagraph", None,
                         ratio=round(ours / peers["triton do_bench_cudagraph"], 4))


def _facts(info: dict[str, Any]) -> dict[str, Any]:
    keys = ("launch_hold", "launches_per_call", "graph_calls", "per_iteration_offset_s", "l2_flush",
            "stream", "sm_clock_mhz", "throttled", "power_capped", "warnings", "block_size")
    return {k: info[k] for k in keys if info.get(k) is not None}


def _gpu_behaviour(torch: Any, rows: Rows, quick: bool) -> None:
    import opbench

    y = torch.rand(4096, device="cuda")
    with rows.attempt("never-launched kernel (special.i1e)", "Timer events"):
        start = time.monotonic()
        m = opbench.Timer(lambda: torch.special.i1e(y), device_timing="events").blocked_autorange(
            min_run_time=0.2)
        wall = time.monotonic() - start
        rows.add("never-launched kernel (special.i1e)", "Timer events", m.median, number=m.number_per_run,
                 wall_s=round(wall, 3), launch_hold=m.info["launch_hold"],
                 ok=m.number_per_run > 1 and m.info["launch_hold"] and wall < 2.0)
    x = torch.zeros(1024, device="cuda")
    with rows.attempt("graph-mode wall time (add_ 1K)", "Timer graph min_run_time=0.2"):
        start = time.monotonic()
        m = opbench.Timer(lambda: x.add_(1.0), device_timing="graph").blocked_autorange(min_run_time=0.2)
        wall = time.monotonic() - start
        rows.add("graph-mode wall time (add_ 1K)", "Timer graph min_run_time=0.2", m.median,
                 number=m.number_per_run, graph_calls=m.info.get("graph_calls"), wall_s=round(wall, 3),
                 ok=wall < 2.0)
    n = 4096 if quick else 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    with rows.attempt(f"clocks under a long GEMM (mm bf16 {n})", "Timer events min_run_time=2"):
        m = opbench.Timer(lambda: torch.mm(a, a), device_timing="events").blocked_autorange(
            min_run_time=0.5 if quick else 2.0)
        info = m.info
        rows.add(f"clocks under a long GEMM (mm bf16 {n})", "Timer events min_run_time=2", m.median,
                 **{k: info.get(k) for k in ("sm_clock_mhz", "sm_clock_mhz_lowest", "sm_clock_mhz_max",
                                             "mem_clock_mhz", "clock_settled", "throttled", "power_capped",
                                             "throttle_reasons", "clock_problem")})

    def sixty_four() -> None:
        for _ in range(64):
            x.add_(1.0)

    _sixty_four_row(rows, sixty_four)
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


def _sixty_four_row(rows: Rows, statement: Fn) -> None:
    import opbench

    with rows.attempt("64 kernels per call", "Timer events"):
        start = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = opbench.Timer(statement, device_timing="events").blocked_autorange(min_run_time=0.2)
        wall = time.monotonic() - start
        rows.add("64 kernels per call", "Timer events", m.median, wall_s=round(wall, 3),
                 launches_per_call=m.info.get("launches_per_call"), launch_hold=m.info["launch_hold"],
                 warnings=sorted({w.category.__name__ for w in caught}),
                 ok=m.info["launch_hold"] and wall < 2.0)


def _sync_row(rows: Rows, statement: Fn) -> None:
    import opbench

    with rows.attempt("a statement that synchronizes", "Timer events"):
        start = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m = opbench.Timer(statement, device_timing="events").timeit(20)
        rows.add("a statement that synchronizes", "Timer events", m.median,
                 wall_s=round(time.monotonic() - start, 3), launch_hold=m.info["launch_hold"],
                 reason=m.info.get("launch_hold_off_reason"),
                 warnings=sorted({w.category.__name__ for w in caught}))


def _fake_behaviour(device: FakeGpu, rows: Rows) -> None:
    import opbench

    fake = device.fake_cuda
    fake.configure(load_device_ns=5_000_000)
    with rows.attempt("never-launched kernel", "Timer events"):
        m = opbench.Timer(fake.kernel(0.003, kernel=5), device_timing="events").blocked_autorange(
            min_run_time=0.05)
        rows.add("never-launched kernel", "Timer events", m.median, number=m.number_per_run,
                 launch_hold=m.info["launch_hold"], ok=m.number_per_run > 1 and m.info["launch_hold"])
    graphs = device._oc.DeviceTimer._graphs_cls = device._graphs(fake, ms_per_call=0.002, upload_ms=1.0)
    with rows.attempt("graph-mode wall time", "Timer graph min_run_time=0.2"):
        m = opbench.Timer(fake.kernel(0.002), device_timing="graph").blocked_autorange(min_run_time=0.2)
        # 0.2 s of 2 ms replays: about 100, and a few for warm-up and the clock probe
        rows.add("graph-mode wall time", "Timer graph min_run_time=0.2", m.median, number=m.number_per_run,
                 replays=graphs.replays, ok=graphs.replays < 200)
    fake.configure(sm_clock_busy=1500, busy_reasons=0x4)
    with rows.attempt("clocks under a long GEMM", "Timer events"):
        m = opbench.Timer(fake.kernel(1.0), device_timing="events").timeit(100)
        rows.add("clocks under a long GEMM", "Timer events", m.median,
                 **{k: m.info.get(k) for k in ("sm_clock_mhz", "clock_settled", "throttled", "power_capped")})
    stream = fake.stream(0)
    with rows.attempt("64 kernels per call", "DeviceTimer events"):
        t = device._oc.DeviceTimer(fake.kernel(0.001, per_call=64, stream=stream), stream=stream)
        t.timeit(200)
        rows.add("64 kernels per call", "DeviceTimer events", t.timeit(200) / 200,
                 launches_per_call=t.metadata()["launches_per_call"], stalls=fake.stat("queue_full_blocks"),
                 ok=fake.stat("queue_full_blocks") == 0)
    rows.add("torch.cuda.stream(s), current_device", "Timer events inside", skipped="needs torch on a GPU")

    def sync_then_kernel() -> None:
        fake.synchronize()
        fake.launch(0.01)

    _sync_row(rows, sync_then_kernel)


_FAULT_CODE = {
    False: ("import torch, opbench.cuda as oc\n"
            "x = torch.zeros(4, device='cuda'); i = torch.tensor([1 << 40], device='cuda')\n"
            "t = oc.DeviceTimer(lambda: x.index_add_(0, i, x[:1]))\n"),
    True: ("import sys; sys.path.insert(0, {tests!r})\n"
           "from fake_cuda import FakeCuda, library\n"
           "import opbench.cuda as oc\n"
           "fake = FakeCuda(library()); fake.configure()\n"
           "t = oc.DeviceTimer(lambda: fake.launch(0.1, fault=700))\n"),
}
_BEFORE_TORCH = {
    False: ("import sys, opbench, opbench.cuda as oc\n"
            "assert 'torch' not in sys.modules\n"
            "e = oc.Event(); e.record(); e.synchronize()\n"
            "import torch\n"
            "x = torch.zeros(1024, device='cuda')\n"
            "m = opbench.Timer(lambda: x.add_(1.0), device_timing='events').timeit(100)\n"
            "print('ok', m.median)\n"),
    True: ("import sys; sys.path.insert(0, {tests!r})\n"
           "import opbench, opbench.cuda as oc\n"
           "assert 'torch' not in sys.modules\n"
           "from fake_cuda import FakeCuda, library\n"
           "fake = FakeCuda(library()); fake.configure()\n"
           "m = opbench.Timer(fake.kernel(0.01), device_timing='events').timeit(100)\n"
           "print('ok', m.median)\n"),
}


def fault_group(device_is_fake: bool, rows: Rows) -> None:
    tests = str(ROOT / "tests")
    with rows.attempt("opbench before import torch", "subprocess"):
        out = subprocess.run([sys.executable, "-c", _BEFORE_TORCH[device_is_fake].format(tests=tests)],
                             capture_output=True, text=True, timeout=120, check=False)
        words = out.stdout.split()
        seconds = float(words[1]) if words[:1] == ["ok"] else None
        rows.add("opbench before import torch", "subprocess", seconds, ok=out.returncode == 0,
                 stderr=out.stderr[-300:])
    code = _FAULT_CODE[device_is_fake].format(tests=tests) + (
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
    """Prints every row of OUT/*.jsonl; 1 when a row failed its check or errored."""
    rows = []
    for path in sorted(out.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a line cut by a kill
                rows.append(json.loads(line))
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
    r.add_argument("--quick", action="store_true", help="fewer kernels, shorter runs")
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
