"""opbench.memory.cuda: CUDA figures from torch's caching allocator statistics, read
between the calls; tested on stand-ins for torch.cuda and, end to end, on a caching
allocator over the fake CUDA driver (tests/fake_cuda)."""
from __future__ import annotations

import pytest

import preloaded
from opbench.errors import MemoryUnavailableError
from opbench.memory import cuda


class _Stats:
    """torch.cuda's statistics surface, with fixed numbers per device."""

    def __init__(self, per_device, available=True, initialized=True):
        self.per_device, self.available, self.initialized = per_device, available, initialized
        self.resets = []

    def is_available(self):
        return self.available

    def is_initialized(self):
        return self.initialized

    def device_count(self):
        return len(self.per_device)

    def memory_stats(self, device):
        return {cuda.STAT_KEYS[k]: v for k, v in self.per_device[device].items()}

    def reset_peak_memory_stats(self, device):
        self.resets.append(device)


def _numbers(**kw):
    return {**dict.fromkeys(cuda.STAT_KEYS, 0), **kw}


def test_figures_are_the_differences_and_the_peak_above_the_start():
    start = _numbers(requests=10, bytes=1000, current=500, peak=500, segments=2, reserved=4096)
    end = _numbers(requests=30, bytes=3000, current=700, peak=1500, segments=3, reserved=6144)
    assert cuda.figures(start, end) == {"allocations": 20, "bytes": 2000, "peak": 1000,
                                        "growth": 200, "device_allocations": 1,
                                        "device_bytes": 2048}


def test_statistics_are_summed_over_devices_and_peaks_reset_on_each():
    tc = _Stats([_numbers(requests=1), _numbers(requests=2)])
    stats = cuda.CudaStats(tc, [0, 1])
    assert stats.read()["requests"] == 3
    stats.reset_peak()
    assert tc.resets == [0, 1]


def test_find_follows_what_was_asked_and_what_the_statement_used(monkeypatch):
    monkeypatch.setattr(cuda, "_torch_cuda", lambda: None)
    assert cuda.find(None) is None and cuda.find(False) is None
    with pytest.raises(MemoryUnavailableError, match="torch is not imported"):
        cuda.find(True)
    monkeypatch.setattr(cuda, "_torch_cuda", lambda: _Stats([], available=False))
    with pytest.raises(MemoryUnavailableError, match="sees no CUDA device"):
        cuda.find(True)
    unused = _Stats([_numbers()], initialized=False)
    monkeypatch.setattr(cuda, "_torch_cuda", lambda: unused)
    assert cuda.find(None) is None  # the statement never initialised CUDA
    assert cuda.find(True).devices == [0]


# A caching allocator over the fake driver (tests/fake_cuda/allocator.py), read as torch.cuda.
FAKE_TORCH_CUDA = """
from fake_cuda import FakeCuda, library
from fake_cuda.allocator import CachingAllocator

fake = FakeCuda(library())
fake.configure()
fake.set_current(0)
allocator = CachingAllocator(fake)
allocator.install()
"""


def test_a_count_reads_the_caching_allocator_over_the_fake_driver():
    result = preloaded.run(FAKE_TORCH_CUDA + """
from opbench.core.measurement import TaskSpec
from opbench.memory import counting

kept = []
def temporary():
    a = allocator.allocate(4096)
    b = allocator.allocate(1024)
def leaking():
    kept.append(allocator.allocate(512))
def count(fn):
    c = counting.count(counting.python_calls(fn), number=20, repeats=3,
                         task_spec=TaskSpec("stmt", "pass"), cuda=True)
    return {f: list(v) for f, v in c.counts["cuda"].items()}
before = fake.stat("allocs_live")
result = {"temporary": count(temporary), "leaking": count(leaking),
          "segments": fake.stat("allocs_live") - before}
""")
    temporary = result["temporary"]
    assert temporary["allocations"] == [40] * 3 and temporary["bytes"] == [5120 * 20] * 3
    assert temporary["peak"] == [5120] * 3 and temporary["growth"] == [0] * 3
    assert temporary["device_allocations"] == [0] * 3  # served from the cache once warm
    leaking = result["leaking"]
    assert leaking["growth"] == [512 * 20] * 3
    assert leaking["device_allocations"] == [20] * 3 and leaking["device_bytes"] == [512 * 20] * 3
    # The driver's own count of live device allocations agrees with the statistics read.
    # The temporaries' two blocks, then every block the leaking calls kept: a warm-up window
    # and three pairs of windows (20 and 40 calls), each with its 10 settling calls.
    assert result["segments"] == 2 + (10 + 20) + 3 * (10 + 20 + 10 + 40)
