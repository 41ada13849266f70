"""A stand-in for torch's CUDA caching allocator over the fake driver, with torch's
statistics (``torch.cuda.memory_stats``' keys), for the tests and benchmark of memory
counts (``opbench.memory.cuda``).

A request is served from a freed block of its size, else from a new segment taken from
the fake driver (``cuMemAlloc_v2``, which the driver counts as ``allocs_live``); a block
goes back to the cache when the Python object holding it dies, as a tensor's does.

Example:
    >>> fake = FakeCuda(library()); fake.configure(); fake.set_current(0)   # doctest: +SKIP
    >>> memory = CachingAllocator(fake); memory.install()                    # doctest: +SKIP
    >>> block = memory.allocate(4096)                                         # doctest: +SKIP
"""
from __future__ import annotations

import ctypes
from typing import Any

from opbench.memory import cuda as memory_cuda


class Block:
    """A request's block; returned to the cache when this object dies."""

    def __init__(self, owner: CachingAllocator, size: int, ptr: int) -> None:
        self.owner, self.size, self.ptr = owner, size, ptr

    def __del__(self) -> None:
        self.owner.release(self)


class CachingAllocator:
    """Device memory of the fake driver ``fake`` (a FakeCuda), cached by size."""

    def __init__(self, fake: Any) -> None:
        self.fake = fake
        fake.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t]
        self.free: dict[int, list[int]] = {}
        self.stats = dict.fromkeys(memory_cuda.STAT_KEYS.values(), 0)

    def allocate(self, size: int) -> Block:
        s = self.stats
        if not self.free.get(size):
            ptr = ctypes.c_size_t()
            rc = self.fake.lib.cuMemAlloc_v2(ctypes.byref(ptr), size)
            if rc != 0:
                raise RuntimeError(f"cuMemAlloc failed: {rc}")
            self.free.setdefault(size, []).append(ptr.value)
            s["segment.all.allocated"] += 1
            s["reserved_bytes.all.allocated"] += size
        s["allocation.all.allocated"] += 1
        s["allocated_bytes.all.allocated"] += size
        s["allocated_bytes.all.current"] += size
        s["allocated_bytes.all.peak"] = max(s["allocated_bytes.all.peak"],
                                            s["allocated_bytes.all.current"])
        return Block(self, size, self.free[size].pop())

    def release(self, block: Block) -> None:
        self.free[block.size].append(block.ptr)
        self.stats["allocated_bytes.all.current"] -= block.size

    # -- torch.cuda's statistics surface, as opbench.memory.cuda reads it --------------

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def memory_stats(self, device: int) -> dict[str, int]:
        return dict(self.stats)

    def reset_peak_memory_stats(self, device: int) -> None:
        self.stats["allocated_bytes.all.peak"] = self.stats["allocated_bytes.all.current"]

    def install(self) -> None:
        """Makes opbench.memory.cuda read this allocator as it would read torch.cuda."""
        memory_cuda._torch_cuda = lambda: self
