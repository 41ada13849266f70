"""opbench.cuda: device timing by CUDA events.

Everything that does not need a GPU runs against the fake driver built into
opbench._C (csrc/detail/cuda_fake.h): the same timing loops, event pool, flush
and launch-hold code as on a GPU, with a device clock the test moves itself, so
device times are exact. Tests that need a real GPU are at the end and skip
without one.
"""
from __future__ import annotations

import gc
import subprocess
import sys
import time
import warnings

import pytest

import opbench.cuda as oc
from opbench import _C

MIB = 1024 * 1024


@pytest.fixture
def fake():
    """Switches opbench._C to the fake driver; returns a function to reconfigure it."""

    def use(**config):
        _C._cuda_use_fake_driver(config)

    use()
    yield use
    gc.collect()  # contexts made on the fake are released on the fake
    _C._cuda_set_libraries()  # back to the real libcuda.so.1 (loaded on next use)


def kernel(ms: float):
    """A statement whose GPU work takes `ms` milliseconds of fake device time."""
    return lambda: _C._cuda_fake_advance(ms)


# -- pure helpers -----------------------------------------------------------


@pytest.mark.parametrize(
    "l2, expected_mib",
    [(50 * MIB, 100), (40 * MIB, 80), (6 * MIB + 1, 13), (96 * 1024, 1), (126 * MIB, 252)],
)
def test_flush_buffer_is_twice_l2_rounded_up_to_mib(l2, expected_mib):
    size = oc._flush_buffer_bytes(l2)
    assert size == expected_mib * MIB
    assert size >= 2 * l2


@pytest.mark.parametrize("l2", [0, -1])
def test_flush_buffer_falls_back_when_l2_unknown(l2):
    assert oc._flush_buffer_bytes(l2) == 256 * MIB


@pytest.mark.parametrize(
    "start, end, dropped",
    [
        ((1980, 2619), (1600, 2619), True),  # SM clock fell 19%
        ((1980, 2619), (1980, 1593), True),  # memory clock fell
        ((1980, 2619), (1900, 2619), False),  # 4%: boost jitter, under the 5% tolerance
        ((345, 405), (1980, 2619), False),  # idle -> boosted is not throttling
        (None, (1980, 2619), None),
        ((1980, 2619), None, None),
    ],
)
def test_clocks_dropped(start, end, dropped):
    assert oc._clocks_dropped(start, end) is dropped


def test_clock_names():
    assert oc._clock_name("events", "warm") == "cuda-events (warm L2)"
    assert oc._clock_name("events", "cold") == "cuda-events (cold L2)"
    assert oc._clock_name("per_iteration", "warm") == "cuda-events per-iteration (warm L2)"
    assert oc._clock_name("graph", "cold") == "cuda-graph (cold L2)"


def test_version_text():
    assert oc._version_text(12040) == "12.4"
    assert oc._version_text(13000) == "13.0"


# -- validation and missing pieces ---------------------------------------------


def test_import_needs_neither_torch_nor_driver():
    code = (
        "import sys, opbench.cuda, opbench._C as C\n"
        "assert 'torch' not in sys.modules, 'opbench.cuda imported torch'\n"
        "C._cuda_set_libraries('libopbench-absent-cuda.so.1')\n"
        "import opbench.cuda\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "cupti"}, "unknown device timing mode 'cupti'; valid: 'events', 'per_iteration', 'graph'"),
    ({"cache": "hot"}, "unknown L2 cache mode 'hot'; valid: 'warm', 'cold'"),
])
def test_bad_mode_or_cache_is_a_value_error_naming_valid_values(kwargs, message):
    with pytest.raises(ValueError) as e:
        oc.DeviceTimer(lambda: None, **kwargs)
    assert str(e.value) == message


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="zero-argument callable"):
        oc.DeviceTimer("x + 1")


def test_missing_driver_names_the_library():
    _C._cuda_set_libraries("libopbench-absent-cuda.so.1")
    try:
        with pytest.raises(oc.CudaError) as e:
            oc.DeviceTimer(lambda: None)
        assert str(e.value).startswith(
            "libopbench-absent-cuda.so.1 not found: no NVIDIA driver on this machine")
        assert e.value.code == -1
        assert isinstance(e.value, RuntimeError)
    finally:
        _C._cuda_set_libraries()


def test_no_gpu_is_a_clear_error(fake):
    fake(device_count=0)
    with pytest.raises(oc.CudaError, match=r"no CUDA device: cuInit reports CUDA_ERROR_NO_DEVICE \(100\)") as e:
        oc.DeviceTimer(lambda: None)
    assert e.value.code == 100 and e.value.function == "cuInit"


def test_device_out_of_range(fake):
    with pytest.raises(oc.CudaError, match=r"CUDA device 3 requested, but this machine has 1 \(valid: 0..0\)"):
        oc.DeviceTimer(lambda: None, device=3)


def test_graph_mode_without_torch_says_install_torch(fake, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(ImportError, match="needs torch .*install torch"):
        oc.DeviceTimer(lambda: None, mode="graph")


def test_graph_mode_rejects_explicit_stream(fake):
    with pytest.raises(ValueError, match="graph mode replays on torch's current stream"):
        oc.DeviceTimer(lambda: None, mode="graph", stream=7)


def test_bad_stream_type(fake):
    with pytest.raises(TypeError, match="stream must be None, an int CUstream handle or a torch.cuda.Stream"):
        oc.DeviceTimer(lambda: None, stream="default")


# -- timing against the fake clock -------------------------------------------


def test_events_time_a_block_of_calls(fake):
    t = oc.DeviceTimer(kernel(0.25))
    assert t.timeit(8) == pytest.approx(8 * 0.25e-3, rel=1e-6)
    stats = _C._cuda_fake_stats()
    assert stats["records"] == 2  # one pair around the whole block
    assert stats["stream_waits"] == 1  # the block was queued behind one hold
    assert stats["events_live"] == 2


def test_zero_calls(fake):
    t = oc.DeviceTimer(kernel(1.0))
    assert t.timeit(0) == 0.0
    assert oc.DeviceTimer(kernel(1.0), mode="per_iteration").timeit(0) == 0.0
    with pytest.raises(ValueError, match="number must be >= 0"):
        t.timeit(-1)


def test_hold_splits_long_blocks_below_the_launch_queue_depth(fake):
    t = oc.DeviceTimer(kernel(0.5))
    t._ctx.hold_chunk = 3
    assert t.timeit(10) == pytest.approx(5e-3, rel=1e-6)
    assert _C._cuda_fake_stats()["stream_waits"] == 4  # 3 + 3 + 3 + 1 calls


def test_per_iteration_gives_each_call(fake):
    durations = iter([0.1, 0.2, 0.3, 0.4, 0.5])
    t = oc.DeviceTimer(lambda: _C._cuda_fake_advance(next(durations)), mode="per_iteration")
    assert t.per_call_times(5) == pytest.approx([1e-4, 2e-4, 3e-4, 4e-4, 5e-4], rel=1e-5)
    assert t.last_per_call_times == pytest.approx([1e-4, 2e-4, 3e-4, 4e-4, 5e-4], rel=1e-5)
    durations = iter([1.0, 2.0])
    assert t.timeit(2) == pytest.approx(3e-3, rel=1e-6)


def test_per_iteration_reuses_a_bounded_event_pool(fake):
    t = oc.DeviceTimer(kernel(0.01), mode="per_iteration")
    times = t.per_call_times(600)
    assert len(times) == 600
    assert times == pytest.approx([1e-5] * 600, rel=1e-3)
    assert _C._cuda_fake_stats()["events_live"] <= 2 * 256


def test_cold_cache_flushes_before_each_call_outside_the_window(fake):
    # Each 100 MiB flush moves the fake device clock by ~105 ms; the kernel 0.5 ms.
    fake(l2_bytes=50 * MIB, memset_bytes_per_ms=1e6)
    t = oc.DeviceTimer(kernel(0.5), cache="cold")
    before = _C._cuda_fake_stats()["now_ms"]
    assert t.timeit(4) == pytest.approx(4 * 0.5e-3, rel=1e-6)  # the flushes are not in it
    stats = _C._cuda_fake_stats()
    assert stats["now_ms"] - before > 4 * 100  # ...although they ran
    assert stats["memsets"] == 4
    assert stats["memset_bytes"] == 4 * 100 * MIB
    t.timeit(3)
    assert _C._cuda_fake_stats()["allocs_live"] == 1  # one buffer, allocated once
    assert t.metadata()["flush_buffer_bytes"] == 100 * MIB


def test_warm_cache_never_flushes(fake):
    t = oc.DeviceTimer(kernel(0.5), mode="per_iteration")
    t.timeit(4)
    stats = _C._cuda_fake_stats()
    assert stats["memsets"] == 0 and stats["allocs_live"] == 0
    assert t.metadata()["flush_buffer_bytes"] == 0


def test_everything_is_released_with_the_timer(fake):
    t = oc.DeviceTimer(kernel(0.5), mode="per_iteration", cache="cold")
    t.timeit(10)
    stats = _C._cuda_fake_stats()
    assert stats["events_live"] > 0 and stats["allocs_live"] == 1 and stats["contexts_retained"] == 1
    del t
    gc.collect()
    stats = _C._cuda_fake_stats()
    assert (stats["events_live"], stats["allocs_live"], stats["host_allocs_live"],
            stats["contexts_retained"]) == (0, 0, 0, 0)


def test_events_are_recorded_on_the_given_stream(fake):
    class TorchLikeStream:
        cuda_stream = 0xBEEF

    oc.DeviceTimer(kernel(0.1), stream=1234).timeit(2)
    oc.DeviceTimer(kernel(0.1), mode="per_iteration", stream=TorchLikeStream()).timeit(2)
    assert set(_C._cuda_fake_stats()["streams"]) == {1234, 0xBEEF}


def test_default_stream_without_torch_cuda_is_the_legacy_stream(fake):
    oc.DeviceTimer(kernel(0.1)).timeit(2)
    assert _C._cuda_fake_stats()["streams"] == [0]


# -- errors -----------------------------------------------------------------------


def test_kernel_fault_surfaces_as_the_cuda_error(fake):
    t = oc.DeviceTimer(lambda: _C._cuda_fake_kernel_error(700))
    with pytest.raises(oc.CudaError) as e:
        t.timeit(3)
    assert str(e.value) == (
        "cuEventSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access "
        "was encountered (raised by GPU work queued in the timed region)")
    assert e.value.code == 700 and e.value.function == "cuEventSynchronize"


def test_failed_driver_call_is_named(fake):
    t = oc.DeviceTimer(kernel(0.1))
    _C._cuda_fake_fail("cuEventRecord", 719)
    with pytest.raises(oc.CudaError, match=r"^cuEventRecord failed: CUDA_ERROR_LAUNCH_FAILED \(719\): "
                                           r"unspecified launch failure$"):
        t.timeit(2)
    _C._cuda_fake_fail("cuEventRecord", 0)
    assert t.timeit(2) == pytest.approx(2e-4, rel=1e-5)  # usable again, nothing left held


def test_statement_exception_propagates_and_releases_the_stream(fake):
    def boom():
        raise ZeroDivisionError("from the statement")

    t = oc.DeviceTimer(boom)
    with pytest.raises(ZeroDivisionError, match="from the statement"):
        t.timeit(5)
    start = time.monotonic()
    assert _C._cuda_fake_synchronize() == 0  # would block forever if the hold were kept
    assert time.monotonic() - start < 1.0


def test_statement_that_synchronizes_does_not_hang(fake):
    # Waiting for the GPU inside the block deadlocks against the launch hold
    # on a real device too; the watchdog must release it and timing go on.
    def sync_then_kernel():
        _C._cuda_fake_synchronize()
        _C._cuda_fake_advance(1.0)

    t = oc.DeviceTimer(sync_then_kernel)
    t._ctx.watchdog_s = 0.05
    with pytest.warns(RuntimeWarning, match="waited for the GPU while its launches were held"):
        assert t.timeit(4) == pytest.approx(4e-3, rel=1e-6)
    assert t.metadata()["launch_hold"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert t.timeit(2) == pytest.approx(2e-3, rel=1e-6)  # no hold, no second warning


def test_full_launch_queue_shrinks_the_held_block(fake):
    # Launches block once 5 are queued behind a hold: the watchdog releases
    # it, and the run is redone with blocks that fit, still held, no warning.
    fake(queue_depth=5)
    t = oc.DeviceTimer(kernel(0.1))
    t._ctx.watchdog_s = 0.2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert t.timeit(20) == pytest.approx(2e-3, rel=1e-5)
    assert t._ctx.hold_chunk == 2  # 5 calls got through before the stall
    assert t.metadata()["launch_hold"] is True


def test_launch_hold_can_be_turned_off(fake):
    t = oc.DeviceTimer(kernel(0.5), launch_hold=False)
    assert t.timeit(4) == pytest.approx(2e-3, rel=1e-6)
    assert _C._cuda_fake_stats()["stream_waits"] == 0
    assert t.metadata()["launch_hold"] is False


def test_without_stream_memory_ops_timing_runs_unheld(fake):
    fake(stream_mem_ops=False)
    t = oc.DeviceTimer(kernel(0.5))
    assert t.timeit(4) == pytest.approx(2e-3, rel=1e-6)
    assert t.metadata()["launch_hold"] is False


# -- metadata --------------------------------------------------------------------


def test_metadata(fake):
    fake(name="NVIDIA H200", l2_bytes=60 * MIB, driver_version=12080, nvml_driver_version="570.86.15",
         sm_clocks=[1980], mem_clocks=[3201])
    t = oc.DeviceTimer(kernel(0.5), mode="per_iteration", cache="cold")
    assert t.metadata()["throttled"] is None  # nothing measured yet
    t.timeit(3)
    assert t.metadata() == {
        "clock": "cuda-events per-iteration (cold L2)",
        "device_timing": "per_iteration",
        "l2_cache": "cold",
        "device": "NVIDIA H200",
        "device_index": 0,
        "driver_version": "570.86.15",
        "cuda_driver_version": "12.8",
        "l2_cache_bytes": 60 * MIB,
        "flush_buffer_bytes": 120 * MIB,
        "launch_hold": True,
        "sm_clock_mhz_start": 1980,
        "sm_clock_mhz_end": 1980,
        "mem_clock_mhz_start": 3201,
        "mem_clock_mhz_end": 3201,
        "throttled": False,
    }


def test_throttling_warns_once(fake):
    # Readings: start of the first timeit, end of it, end of the second.
    fake(sm_clocks=[1980, 1980, 1500])
    t = oc.DeviceTimer(kernel(0.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.timeit(2)
    with pytest.warns(RuntimeWarning, match=r"GPU clocks dropped during the measurement \(SM 1980 -> 1500 MHz"):
        t.timeit(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.timeit(2)
    meta = t.metadata()
    assert meta["throttled"] is True
    assert (meta["sm_clock_mhz_start"], meta["sm_clock_mhz_end"]) == (1980, 1500)


def test_without_nvml_clocks_are_unknown_not_fatal(fake):
    fake(nvml=False)
    t = oc.DeviceTimer(kernel(0.5))
    assert t.timeit(2) == pytest.approx(1e-3, rel=1e-6)
    meta = t.metadata()
    assert meta["throttled"] is None and meta["sm_clock_mhz_start"] is None
    assert meta["driver_version"] is None and meta["cuda_driver_version"] == "12.4"
    assert "libnvidia-ml.so.1 not found" in meta["clock_problem"]


# -- the Event API ------------------------------------------------------------------


def test_event_record_synchronize_elapsed(fake):
    start, end = oc.Event(), oc.Event()
    start.record(stream=42)
    _C._cuda_fake_advance(2.5)
    end.record(stream=42)
    end.synchronize()
    assert end.query() is True
    assert start.elapsed_time(end) == pytest.approx(2.5)
    assert 42 in _C._cuda_fake_stats()["streams"]


def test_event_misuse_is_a_clear_error(fake):
    start, end = oc.Event(), oc.Event()
    with pytest.raises(ValueError, match=r"Event.synchronize\(\) before Event.record\(\)"):
        start.synchronize()
    start.record()
    with pytest.raises(ValueError, match=r"the end event was never recorded"):
        start.elapsed_time(end)


# -- with opbench.Timer ----------------------------------------------------------------


def test_timer_device_timing(fake):
    from opbench.timer import Timer

    m = Timer(kernel(0.01), device_timing="events", l2_cache="warm").timeit(100)
    assert m.median == pytest.approx(1e-5, rel=1e-4)
    assert "cuda-events (warm L2)" in repr(m)


# -- on a real GPU -------------------------------------------------------------------------


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


gpu = pytest.mark.skipif(not _has_cuda(), reason="needs an NVIDIA GPU with torch CUDA (CI has none)")


@gpu
def test_gpu_events_and_metadata():
    import torch

    x = torch.randn(1024, 1024, device="cuda")
    t = oc.DeviceTimer(lambda: x @ x)
    assert t.timeit(10) > 0
    meta = t.metadata()
    assert meta["device"] == torch.cuda.get_device_name()
    assert meta["launch_hold"] is True


@gpu
def test_gpu_cold_buffer_sized_from_the_device_l2():
    import torch

    x = torch.randn(1 << 20, device="cuda")
    t = oc.DeviceTimer(lambda: x.mul_(1.0), cache="cold")
    assert len(t.per_call_times(5)) == 5
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    assert t.metadata()["flush_buffer_bytes"] == oc._flush_buffer_bytes(l2)


@gpu
def test_gpu_graph_mode():
    import torch

    x = torch.randn(1 << 16, device="cuda")
    t = oc.DeviceTimer(lambda: x.add_(1.0), mode="graph")
    before = x.clone()
    assert t.timeit(20) > 0
    assert len(t.per_call_times(3)) == 3
    assert torch.all(x > before)  # the replays ran


@gpu
def test_gpu_synchronizing_statement_does_not_hang():
    import torch

    x = torch.randn(1024, device="cuda")
    t = oc.DeviceTimer(lambda: x.sum().item())
    t._ctx.watchdog_s = 0.2
    with pytest.warns(RuntimeWarning, match="waited for the GPU"):
        assert t.timeit(3) > 0


@gpu
def test_gpu_kernel_fault_is_reported_not_hung():
    # A device-side fault poisons the context, so it runs in its own process.
    code = (
        "import torch, opbench.cuda as oc\n"
        "x = torch.zeros(4, device='cuda'); i = torch.tensor([1 << 40], device='cuda')\n"
        "t = oc.DeviceTimer(lambda: x.index_add_(0, i, x[:1]))\n"
        "try:\n    t.timeit(1)\nexcept oc.CudaError as e:\n    print(e.function, e.code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    # torch checks index_add_'s indices on the device: CUDA_ERROR_ASSERT (710).
    assert out.stdout.split() == ["cuEventSynchronize", "710"], out.stdout + out.stderr
