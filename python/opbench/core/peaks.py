"""Peaks: the memory bandwidth and FLOP rates this machine reaches, measured here once.

A roofline needs two ceilings: bytes per second and FLOPs per second. A
datasheet's cannot be reached; these are measured on this machine, with the
thread count the statement ran on, and cached in
``.opbench/<machine id>/peaks.json`` (beside the baselines;
``$OPBENCH_BASELINE_DIR`` moves both) with how they were measured:

* **bandwidth**: STREAM's copy (``b = a``: 2 x N bytes) and triad
  (``a = b + s * c``: 3 x N bytes) over buffers of 8 x the last-level cache
  (at least 256 MiB), the best of 10 runs each after a first-touch run (STREAM
  reports the best); the peak is the faster of the two.
* **FLOP rate**: a square matmul per dtype (``2 n^3`` FLOPs), ``n`` doubled from
  256 until one takes 25 ms (at most 4096), best of 5: float32 always,
  bfloat16 where the CPU has native support (oneDNN's check), any other
  dtype when a statement asks for it.
* **CUDA** devices: the same on the device, timed with CUDA events, buffers 8 x
  the L2; beside them the datasheet figures the driver allows: memory
  bandwidth from the memory clock and bus width, float32 (non-tensor-core)
  FLOP rate from SMs, clock and FP32 lanes per SM.

A measurement takes a few seconds per thread count; ``python -m opbench
peaks`` shows the cached peaks and ``--refresh`` measures them again (do it
on a quiet machine: a loaded one gives low peaks).

Example:
    >>> p = Peak(device="cpu", threads=1, bandwidth=2e10, flop_rates={"float32": 1e11})
    >>> p.ridge("float32")  # FLOPs per byte where memory stops being the limit
    5.0
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from opbench import environment
from opbench._files import atomic_write_text
from opbench._threads import set_torch_threads
from opbench.core import roofline
from opbench.errors import UsageError

__all__ = ["FILE", "Peak", "get", "load", "measure", "path", "save"]

FILE = "peaks.json"
_FORMAT = "opbench-peaks"
_VERSION = 1
_MIN_BUFFER = 256 << 20
_REPEATS = 10  # STREAM's NTIMES: the best of 10 catches a quiet moment on a shared host
_MATMUL_REPEATS = 5
_MATMUL_TARGET_S = 0.025
_MATMUL_MAX_N = 4096

# FP32 lanes per SM by compute capability (major, minor), from NVIDIA's CUDA C++
# programming guide ("Arithmetic Instructions" throughput table).
_FP32_LANES = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
               (9, 0): 128, (10, 0): 128, (12, 0): 128}


@dataclasses.dataclass
class Peak:
    """The ceilings of one device at one thread count.

    Attributes:
        device: ``"cpu"`` or ``"cuda:N"``.
        threads: torch threads used (None on a CUDA device).
        bandwidth: bytes per second, the faster of ``copy`` and ``triad``.
        copy, triad: the two STREAM rates, bytes per second.
        flop_rates: dtype name -> FLOPs per second (matmul).
        how: how each figure was measured (buffer size, matmul sizes, repeats).
        datasheet: the driver-derived figures (CUDA), else None.
        measured: when (UTC, ISO 8601).
    """

    device: str
    threads: int | None
    bandwidth: float
    flop_rates: dict[str, float]
    copy: float | None = None
    triad: float | None = None
    how: dict[str, Any] = dataclasses.field(default_factory=dict)
    datasheet: dict[str, Any] | None = None
    measured: str | None = None

    def ridge(self, dtype: str = "float32") -> float | None:
        """FLOPs per byte at which the compute ceiling meets the memory one."""
        rate = self.flop_rates.get(dtype)
        return None if rate is None else roofline.ridge(self.bandwidth, rate)

    def for_dtype(self, dtype: str) -> dict[str, Any]:
        """What a Measurement's ``info["peaks"]`` keeps for a statement of ``dtype``."""
        return {"device": self.device, "threads": self.threads, "bandwidth": self.bandwidth,
                "dtype": dtype, "flop_rate": self.flop_rates.get(dtype),
                "measured": self.measured}


def _slot(device: str, threads: int | None) -> str:
    return device if threads is None else f"{device}/{threads}"


def path(root: str | os.PathLike[str] | None = None) -> Path:
    """This machine's peaks file: ``<root>/<machine id>/peaks.json``."""
    return environment.root_dir(root) / environment.machine_id() / FILE


def load(root: str | os.PathLike[str] | None = None) -> dict[str, Peak]:
    """The cached peaks, ``"cpu/2"`` / ``"cuda:0"`` -> Peak; empty when none are.

    A file that cannot be read as peaks is ignored (it is a cache: measuring
    again replaces it).
    """
    try:
        doc = json.loads(path(root).read_text())
        if doc.get("format") != _FORMAT or doc.get("version") != _VERSION:
            return {}
        return {slot: Peak(**entry) for slot, entry in doc["peaks"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def save(peaks: dict[str, Peak], root: str | os.PathLike[str] | None = None) -> Path:
    """Writes ``peaks`` (as ``load`` returns them) to this machine's file, atomically."""
    target = path(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": _FORMAT, "version": _VERSION, "machine": environment.machine_id(),
           "peaks": {slot: dataclasses.asdict(p) for slot, p in peaks.items()}}
    return atomic_write_text(target, json.dumps(doc, indent=1, allow_nan=False) + "\n")


def get(device: str = "cpu", threads: int | None = 1, dtypes: Iterable[str] = ("float32",),
        *, refresh: bool = False, root: str | os.PathLike[str] | None = None) -> Peak:
    """The peaks of ``device`` at ``threads``, from the cache, measuring (and caching)
    what is missing: the whole slot, or a dtype's FLOP rate.

    Raises:
        UsageError: torch is not installed (the peaks are measured with torch), or
            ``device`` is not ``"cpu"`` / ``"cuda[:N]"``.
    """
    if device.startswith("cuda"):
        device, threads = (device if ":" in device else "cuda:0"), None
    elif device != "cpu":
        raise UsageError(f"peaks are measured for 'cpu' or 'cuda[:N]', not {device!r}")
    cached = load(root)
    slot = _slot(device, threads)
    peak = None if refresh else cached.get(slot)
    wanted = list(dict.fromkeys(dtypes))
    missing = wanted if peak is None else [d for d in wanted if d not in peak.flop_rates
                                          and d not in peak.how.get("unsupported", {})]
    if peak is not None and not missing:
        return peak
    fresh = measure(device, threads, missing, bandwidth=peak is None)
    if peak is None:
        peak = fresh
    else:
        peak.flop_rates.update(fresh.flop_rates)
        peak.how.setdefault("matmul", {}).update(fresh.how.get("matmul", {}))
        peak.how.setdefault("unsupported", {}).update(fresh.how.get("unsupported", {}))
    cached[slot] = peak
    save(cached, root)
    return peak


# -- measuring -------------------------------------------------------------------------

def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise UsageError("measuring peaks needs torch: pip install torch") from None
    return torch


def _llc_bytes() -> int | None:
    """The largest CPU cache, from sysfs (None where it is hidden)."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def _best(run: Callable[[], float], repeats: int) -> float:
    """The shortest of ``repeats`` timed runs, after one untimed (first touch, warm-up)."""
    run()
    return min(run() for _ in range(repeats))


def measure(device: str = "cpu", threads: int | None = 1, dtypes: Iterable[str] = ("float32",),
            *, bandwidth: bool = True) -> Peak:
    """Measures the peaks now (no cache); ``bandwidth=False`` measures FLOP rates only.

    bfloat16 is measured only where it is natively supported; a dtype that is
    not is named in ``how["unsupported"]`` instead of getting a rate.
    """
    torch = _torch()
    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise UsageError(f"peaks of {device}: torch sees no CUDA device")
    dev = torch.device(device)
    clock = _cuda_clock(torch, dev) if cuda else _host_clock
    how: dict[str, Any] = {"timer": "CUDA events" if cuda else "time.perf_counter",
                           "repeats": _REPEATS, "unsupported": {}, "matmul": {}}
    copy = triad = None
    with set_torch_threads(threads or 1):
        if bandwidth:
            cache = (torch.cuda.get_device_properties(dev).L2_cache_size if cuda
                     else _llc_bytes()) or (32 << 20)
            n = max(8 * cache, _MIN_BUFFER) // 4
            how.update(buffer_bytes=4 * n, cache_bytes=cache,
                       copy="b.copy_(a): 2 x buffer bytes",
                       triad="torch.add(b, c, alpha=3.0, out=a): 3 x buffer bytes")
            a, b, c = (torch.ones(n, device=dev) for _ in range(3))
            copy = 8 * n / _best(lambda: clock(lambda: b.copy_(a)), _REPEATS)
            triad = 12 * n / _best(lambda: clock(lambda: torch.add(b, c, alpha=3.0, out=a)),
                                   _REPEATS)
            del a, b, c
        rates = {}
        for dtype in dict.fromkeys(dtypes):
            reason = _unsupported(torch, dtype, cuda)
            if reason:
                how["unsupported"][dtype] = reason
                continue
            rates[dtype], how["matmul"][dtype] = _matmul_rate(torch, dev, dtype, clock)
    return Peak(
        device=device, threads=None if cuda else threads,
        bandwidth=max(copy or 0.0, triad or 0.0), copy=copy, triad=triad,
        flop_rates=rates, how=how, datasheet=_datasheet(torch, dev) if cuda else None,
        measured=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )


def _host_clock(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _cuda_clock(torch: Any, dev: Any) -> Callable[[Callable[[], Any]], float]:
    def clock(fn: Callable[[], Any]) -> float:
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3
    return clock


def _unsupported(torch: Any, dtype: str, cuda: bool) -> str | None:
    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        return f"not a torch dtype: {dtype}"
    if dtype == "bfloat16":
        if cuda and not torch.cuda.is_bf16_supported():
            return "the device has no bfloat16 support"
        if not cuda and not (torch.backends.mkldnn.is_available()
                             and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
            return "no native bfloat16 on this CPU (oneDNN: emulated, not a peak)"
    return None


def _matmul_rate(torch: Any, dev: Any, dtype: str,
                 clock: Callable[[Callable[[], Any]], float]) -> tuple[float, dict[str, Any]]:
    """FLOPs per second of an n x n matmul, n grown until one takes _MATMUL_TARGET_S."""
    n = 256
    while True:
        a = torch.ones(n, n, dtype=getattr(torch, dtype), device=dev)
        out = torch.empty_like(a)
        seconds = _best(functools.partial(clock, functools.partial(torch.mm, a, a, out=out)),
                        _MATMUL_REPEATS)
        if seconds >= _MATMUL_TARGET_S or n >= _MATMUL_MAX_N:
            return 2 * n**3 / seconds, {"n": n, "seconds": seconds}
        n *= 2


def _datasheet(torch: Any, dev: Any) -> dict[str, Any]:
    """Figures derived from what the driver reports (None where it does not)."""
    p = torch.cuda.get_device_properties(dev)
    clock_khz, mem_khz, bus = (getattr(p, k, 0) for k in
                               ("clock_rate", "memory_clock_rate", "memory_bus_width"))
    lanes = _FP32_LANES.get((p.major, p.minor))
    return {
        "name": p.name,
        # Double data rate: two transfers per memory clock.
        "bandwidth": 2 * mem_khz * 1e3 * bus / 8 if mem_khz and bus else None,
        "float32_flop_rate": (2 * lanes * p.multi_processor_count * clock_khz * 1e3
                              if lanes and clock_khz else None),
        "how": "bandwidth = 2 x memory clock x bus width; float32 = 2 (FMA) x FP32 lanes "
               "per SM x SMs x clock (no tensor cores)",
    }


def describe(peaks: dict[str, Peak]) -> str:
    """The peaks as the ``opbench peaks`` command prints them."""
    if not peaks:
        return "no peaks measured on this machine yet"
    lines = []
    for slot, p in peaks.items():
        lines.append(f"{slot} (measured {p.measured}):")
        for name, value in (("copy", p.copy), ("triad", p.triad)):
            if value is not None:
                lines.append(f"  {name:<9} {value / 1e9:10.2f} GB/s")
        for dtype, rate in p.flop_rates.items():
            lines.append(f"  {dtype:<9} {rate / 1e12:10.4f} TFLOP/s   ridge "
                         f"{roofline.ridge(p.bandwidth, rate):.2f} FLOP/byte")
        for dtype, reason in p.how.get("unsupported", {}).items():
            lines.append(f"  {dtype:<9} not measured: {reason}")
        if p.datasheet:
            ds = p.datasheet
            figures = [f"{ds['bandwidth'] / 1e9:.0f} GB/s" if ds.get("bandwidth") else None,
                       f"{ds['float32_flop_rate'] / 1e12:.1f} float32 TFLOP/s"
                       if ds.get("float32_flop_rate") else None]
            lines.append("  datasheet: " + (", ".join(f for f in figures if f) or "n/a"))
        if p.how.get("buffer_bytes"):
            lines.append(f"  how: STREAM copy/triad over {p.how['buffer_bytes'] >> 20} MiB "
                         f"buffers (cache {p.how['cache_bytes'] >> 20} MiB), best of "
                         f"{p.how['repeats']}; matmul n = "
                         + ", ".join(f"{d}: {m['n']}" for d, m in p.how["matmul"].items()))
    return "\n".join(lines)

