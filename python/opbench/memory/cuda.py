"""The CUDA figures of a memory count: torch's caching allocator statistics.

torch serves device memory from a cache: a request (``torch.empty(..., device="cuda")``)
is served from blocks it holds, and only when none fits does it take more from the
device (``cudaMalloc``, a *segment*). ``torch.cuda.memory_stats`` counts both, per
device, since the process started; a count reads them around the counted calls:

* ``allocations`` / ``bytes``: requests made to the caching allocator, and their bytes;
* ``peak``: the most bytes allocated at once above where the counted calls started
  (torch's peak, reset at the start);
* ``growth``: the change of bytes allocated (a leak of device memory when it grows);
* ``device_allocations`` / ``device_bytes``: segments taken from the device, and their
  bytes (zero per call once the cache holds what the statement needs).

Summed over the visible devices. Read between the calls, never during them.

Example (a stand-in for ``torch.cuda``, as the tests use):
    >>> class Stub:
    ...     def is_available(self): return True
    ...     def is_initialized(self): return True
    ...     def device_count(self): return 1
    ...     def memory_stats(self, device): return {k: 0 for k in STAT_KEYS.values()}
    ...     def reset_peak_memory_stats(self, device): pass
    >>> stats = CudaStats(Stub(), [0])
    >>> figures(stats.read(), stats.read())["allocations"]
    0
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from opbench.errors import MemoryUnavailableError

__all__ = ["STAT_KEYS", "CudaStats", "figures", "find"]

# What is read -> torch.cuda.memory_stats' key for it.
STAT_KEYS = {"requests": "allocation.all.allocated", "bytes": "allocated_bytes.all.allocated",
             "current": "allocated_bytes.all.current", "peak": "allocated_bytes.all.peak",
             "segments": "segment.all.allocated", "reserved": "reserved_bytes.all.allocated"}


def _torch_cuda() -> Any | None:
    """torch.cuda, when this process imported torch (never imported here)."""
    torch = sys.modules.get("torch")
    return None if torch is None else torch.cuda


class CudaStats:
    """torch's allocator statistics of ``devices``, summed (``tc`` is ``torch.cuda``)."""

    def __init__(self, tc: Any, devices: Iterable[int]) -> None:
        self._tc = tc
        self.devices = list(devices)

    def read(self) -> dict[str, int]:
        totals = dict.fromkeys(STAT_KEYS, 0)
        for device in self.devices:
            stats = self._tc.memory_stats(device)
            for name, key in STAT_KEYS.items():
                totals[name] += int(stats.get(key, 0))
        return totals

    def reset_peak(self) -> None:
        for device in self.devices:
            self._tc.reset_peak_memory_stats(device)


def find(want: bool | None) -> CudaStats | None:
    """The statistics to read for a count: ``want`` True (required), False (never) or None
    (when the statement has used CUDA, seen after its warm-up).

    Raises:
        MemoryUnavailableError: ``want`` is True and torch sees no CUDA device.
    """
    if want is False:
        return None
    tc = _torch_cuda()
    if tc is None or not tc.is_available():
        if want:
            raise MemoryUnavailableError(
                "cuda=True: no CUDA figures can be read here: "
                + ("torch is not imported (the statement does not use it)" if tc is None
                   else "torch sees no CUDA device (a CPU build, or no GPU)")
                + ". Leave cuda=None to count CUDA only where the statement uses it.")
        return None
    if want is None and not tc.is_initialized():
        return None
    return CudaStats(tc, range(int(tc.device_count())))


def figures(mark: dict[str, int], end: dict[str, int]) -> dict[str, int]:
    """The counted calls' CUDA figures from the statistics read at the mark (peak reset
    just after) and at the end."""
    return {"allocations": end["requests"] - mark["requests"], "bytes": end["bytes"] - mark["bytes"],
            "peak": max(end["peak"] - mark["current"], 0), "growth": end["current"] - mark["current"],
            "device_allocations": end["segments"] - mark["segments"],
            "device_bytes": end["reserved"] - mark["reserved"]}
