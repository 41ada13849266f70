"""opbench.engines.cuda: device timing by CUDA events (the package; its modules' own
tests are tests/test_cuda_<module>.py, the defects of issue 39 in test_cuda_device_timer.py,
the fake driver's behaviours in test_cuda_fake.py).

Everything that does not need a GPU runs against the fake driver of
tests/fake_cuda: a C-ABI library these tests compile and hand to opbench's own
loader (``_C._cuda_set_libraries``), so the shipped loader, timing loops, event
pool, flush and launch-hold code run as on a GPU. The fake is as unkind as
hardware (see tests/fake_cuda/fake_cuda.cpp); its device clock is exact, so
the tests that assert device times take the fake's exact options
(``fake_cuda.EXACT``: no tick jitter, no launch gap, no clock ramp, the host
clock frozen between calls) and assert to within the event quantum; the tests
of each hardware behaviour turn it on.
Tests that need a real GPU are at the end and skip without one.

Defects of issue 12, each with the tests that failed before the fix:
  1 lazy loading under the hold:  test_first_call_of_a_lazily_loaded_kernel_runs_outside_the_hold,
      test_timer_with_a_lazy_kernel_keeps_the_hold_and_reports_the_cold_first_call,
      test_a_stall_at_the_first_held_block_is_retried_held, test_module_loading_mode_is_recorded
  2 hold_stream swallowing errors: test_hold_errors_other_than_not_supported_are_raised,
      test_a_sticky_error_reaches_the_hold_and_is_raised,
      test_not_supported_turns_the_hold_off_with_its_reason
  3 launch queue:                  test_eight_kernels_per_call_never_fill_the_launch_queue,
      test_the_learned_block_size_is_kept_for_the_device,
      test_a_stall_keeps_blocks_already_measured
  4 graph size:                    test_graph_mode_captures_one_bounded_graph_and_excludes_the_upload
  5 throttling:                    test_throttling_is_seen_while_the_gpu_is_busy
  6 event quantum:                 test_event_quantum_is_measured_and_short_windows_warn
  7 context and stream:            test_the_callers_current_context_is_left_current,
      test_events_go_on_the_stream_of_the_timers_own_device
  8 fake in the extension:         test_no_fake_driver_in_the_production_extension

Defects of issue 24, each with the tests that failed before the fix (checked
against the unfixed extension and package with this fake):
  1 cold first call sizes blocks:  test_block_size_comes_from_warm_calls_not_the_cold_first_one,
      test_events_mode_warns_when_its_windows_are_under_20_quanta
  2 graph-mode wall time:          test_graph_mode_blocks_are_whole_replays
  3 clocks:                        test_short_blocks_read_no_idle_or_ramping_clock,
      test_a_power_capped_gemm_is_power_capped_not_throttled,
      test_clocks_are_probed_on_a_cadence_not_per_timeit
  4 queue counted in launches:     test_held_blocks_are_sized_in_launches,
      test_launches_that_cannot_be_counted_say_why, test_a_statement_that_cannot_be_captured_is_still_timed
  5 dirty lines of the flush:      test_cold_cache_flushes_before_each_call_outside_the_window,
      test_without_the_read_kernel_the_flush_writes_and_says_so
  6 torch's graph path:            test_torch_graphs_* (now in test_cuda_graphs.py)
  7 device selection:              test_the_device_comes_from_the_statements_tensors
  8 held legacy stream:            test_a_legacy_current_stream_is_replaced_by_a_private_one
  9 per-iteration offset:          test_per_iteration_reports_its_offset_from_blocks
"""
from __future__ import annotations

import gc
import itertools
import statistics
import subprocess
import sys
import time
import warnings

import pytest

import opbench.engines.cuda as oc
from fake_cuda import (  # noqa: F401 (fixtures)
    HW_SLOWDOWN,
    ILLEGAL_ADDRESS,
    NOT_SUPPORTED,
    SW_POWER_CAP,
    FakeTorchCuda,
    fake_fixture,
    fake_library_fixture,
    no_warnings_fixture,
    use_fake_torch,
)
from opbench import _C, errors
from opbench.engines.cuda import device_timer
from opbench.errors import LaunchHoldWarning, ResolutionWarning, ThrottleWarning

MIB = 1024 * 1024
QUANTUM = 5e-7  # the fake's default event quantum (0.5 us)


def warmed(timer: oc.DeviceTimer) -> oc.DeviceTimer:
    """The timer after its first (unheld) call and the event-quantum probe: later
    counters are about timed calls only."""
    timer.timeit(1)
    return timer


def test_the_package_reexports_its_modules_names():
    from opbench.engines.cuda import clocks, events

    assert oc.DeviceTimer is device_timer.DeviceTimer and oc.Event is events.Event
    assert (oc.MODES, oc.CACHES) == (device_timer.MODES, device_timer.CACHES)
    assert oc.THROTTLE_THRESHOLD == clocks.THROTTLE_THRESHOLD == 0.75
    assert oc.CudaError is _C.CudaError is errors.CudaError
    assert sorted(oc.__all__) == ["CACHES", "CudaError", "DeviceTimer", "Event", "MODES",
                                  "THROTTLE_THRESHOLD"]


# -- validation and missing pieces ---------------------------------------------


def test_import_needs_neither_torch_nor_driver():
    code = (
        "import sys, opbench.engines.cuda, opbench._C as C\n"
        "assert 'torch' not in sys.modules, 'opbench.engines.cuda imported torch'\n"
        "C._cuda_set_libraries('libopbench-absent-cuda.so.1')\n"
        "import opbench.engines.cuda\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_no_fake_driver_in_the_production_extension():
    # Defect 8: the fake and its hooks lived in _C. Tests now build their own.
    assert [n for n in dir(_C) if "fake" in n.lower()] == []
    with open(_C.__file__, "rb") as f:
        assert b"opbench fake GPU" not in f.read()


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
        assert isinstance(e.value, RuntimeError) and isinstance(e.value, errors.Error)
    finally:
        _C._cuda_set_libraries()


def test_no_gpu_is_a_clear_error(fake):
    fake.configure(device_count=0)
    with pytest.raises(oc.CudaError,
                       match=r"no CUDA device: cuInit reports CUDA_ERROR_NO_DEVICE \(100\)") as e:
        oc.DeviceTimer(lambda: None)
    assert e.value.code == 100 and e.value.function == "cuInit"


def test_device_out_of_range(fake):
    with pytest.raises(oc.CudaError,
                       match=r"CUDA device 3 requested, but this machine has 1 \(valid: 0..0\)"):
        oc.DeviceTimer(lambda: None, device=3)


def test_graph_mode_without_torch_says_install_torch(fake, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(ImportError, match=r"needs torch .*install torch"):
        oc.DeviceTimer(lambda: None, mode="graph")


def test_graph_mode_rejects_explicit_stream(fake):
    with pytest.raises(ValueError, match="graph mode replays on torch's current stream"):
        oc.DeviceTimer(lambda: None, mode="graph", stream=7)


def test_bad_stream_type(fake):
    with pytest.raises(TypeError,
                       match=r"stream must be None, an int CUstream handle or a torch\.cuda\.Stream"):
        oc.DeviceTimer(lambda: None, stream="default")


# -- timing against the fake clock -------------------------------------------


def test_events_time_blocks_of_calls(fake, monkeypatch):
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))  # launches counted: 1 a call
    t = warmed(oc.DeviceTimer(tc.kernel(0.25)))
    records, waits = fake.stat("records"), fake.stat("stream_waits")
    fake.max_queued()
    assert t.timeit(8) == pytest.approx(8 * 0.25e-3, abs=QUANTUM)
    assert fake.stat("records") - records == 2  # one pair around the block
    assert fake.stat("stream_waits") - waits == 1  # queued behind one hold
    assert fake.max_queued() == 1 + 1 + 8 + 1  # wait, record, 8 kernels, record


def test_zero_calls(fake):
    t = oc.DeviceTimer(fake.kernel(1.0))
    assert t.timeit(0) == 0.0
    assert oc.DeviceTimer(fake.kernel(1.0), mode="per_iteration").timeit(0) == 0.0
    assert fake.stat("launches") == 0
    with pytest.raises(ValueError, match="number must be >= 0"):
        t.timeit(-1)


def test_hold_blocks_are_capped(fake, monkeypatch):
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    t = warmed(oc.DeviceTimer(tc.kernel(0.5)))
    t._ctx.hold_chunk = 3
    waits = fake.stat("stream_waits")
    assert t.timeit(10) == pytest.approx(5e-3, abs=4 * QUANTUM)
    assert fake.stat("stream_waits") - waits == 4  # 3 + 3 + 3 + 1 calls
    with pytest.raises(ValueError, match="hold_chunk must be >= 1"):
        t._ctx.hold_chunk = 0


def test_the_hold_removes_launch_gaps(fake):
    # 4 us of host time per launch, 1 us kernels: unheld, the GPU waits for the host.
    fake.configure(launch_ns=4000)
    held = warmed(oc.DeviceTimer(fake.kernel(0.001)))
    unheld = warmed(oc.DeviceTimer(fake.kernel(0.001), launch_hold=False))
    assert held.timeit(32) == pytest.approx(32e-6, abs=QUANTUM)
    assert unheld.timeit(32) == pytest.approx(32 * 4e-6 + 1e-6, abs=2 * QUANTUM)


def test_per_iteration_gives_each_call(fake):
    # The first call alone, one warm call (its host time bounds its launches: the
    # legacy stream cannot be captured), then (once) 64 calls that measure the
    # per-iteration offset.
    durations = itertools.chain([0.1], [0.05] * 65, [0.2, 0.3, 0.4, 0.5], itertools.repeat(1.0))
    t = oc.DeviceTimer(lambda: fake.launch(next(durations)), mode="per_iteration")
    assert t.per_call_times(1) == pytest.approx([1e-4], abs=QUANTUM)
    assert t.per_call_times(4) == pytest.approx([2e-4, 3e-4, 4e-4, 5e-4], abs=QUANTUM)
    assert t.last_per_call_times == pytest.approx([2e-4, 3e-4, 4e-4, 5e-4], abs=QUANTUM)
    assert t.timeit(2) == pytest.approx(2e-3, abs=2 * QUANTUM)


def test_per_iteration_reuses_a_bounded_event_pool(fake):
    t = oc.DeviceTimer(fake.kernel(0.01), mode="per_iteration")
    times = t.per_call_times(600)
    assert len(times) == 600
    # Readings on one step of the timer are spread over a step either side.
    assert times == pytest.approx([1e-5] * 600, abs=2 * QUANTUM)
    assert statistics.median(times) == pytest.approx(1e-5, abs=QUANTUM / 10)
    assert fake.stat("events_live") <= 2 * 32


def test_cold_cache_flushes_before_each_call_outside_the_window(fake):
    # Defect 5 (issue 24): the flush wrote the buffer, leaving the L2 full of dirty
    # lines whose write-back (50 MiB: 52 us here) landed in the next timed call.
    # Now it reads the buffer: each 100 MiB read moves the fake device clock by
    # ~105 ms, the kernel 0.5 ms, and no write-back is left for the timed call.
    fake.configure(l2_bytes=50 * MIB, read_bytes_per_ms=1e6)
    t = warmed(oc.DeviceTimer(fake.kernel(0.5), cache="cold"))
    before, reads = fake.stat("device_ns"), fake.stat("flush_reads")
    assert t.timeit(4) == pytest.approx(4 * 0.5e-3, abs=4 * QUANTUM)  # the flushes are not in it
    assert fake.stat("device_ns") - before > 4 * 100e6  # ...although they ran
    assert fake.stat("flush_reads") - reads == 4 and fake.stat("memsets") == 0
    t.timeit(3)
    assert fake.stat("allocs_live") == 1  # one buffer, allocated once
    assert t.metadata()["flush_buffer_bytes"] == 100 * MIB
    assert t.metadata()["l2_flush"] == "read"


def test_without_the_read_kernel_the_flush_writes_and_says_so(fake):
    fake.fail("cuModuleLoadData", 218)  # CUDA_ERROR_INVALID_PTX
    t = oc.DeviceTimer(fake.kernel(0.5), cache="cold")
    t.timeit(2)
    assert fake.stat("memsets") == 3 and fake.stat("flush_reads") == 0
    assert t.metadata()["l2_flush"].startswith("write (the read kernel did not load: ")


def test_warm_cache_never_flushes(fake):
    t = oc.DeviceTimer(fake.kernel(0.5), mode="per_iteration")
    t.timeit(4)
    assert fake.stat("memsets") == 0 and fake.stat("allocs_live") == 0
    assert t.metadata()["flush_buffer_bytes"] == 0


def test_everything_is_released_with_the_timer(fake):
    t = oc.DeviceTimer(fake.kernel(0.5), mode="per_iteration", cache="cold")
    t.timeit(10)
    assert fake.stat("events_live") > 0 and fake.stat("allocs_live") == 1
    assert fake.stat("host_allocs_live") == 1 and fake.stat("contexts_retained") == 1
    del t
    gc.collect()
    assert [fake.stat(k) for k in ("events_live", "allocs_live", "host_allocs_live", "contexts_retained")] \
        == [0, 0, 0, 0]


def test_events_are_recorded_on_the_given_stream(fake):
    class TorchLikeStream:
        cuda_stream = fake.stream(0)

    plain = fake.stream(0)
    oc.DeviceTimer(fake.kernel(0.1, stream=plain), stream=plain).timeit(2)
    oc.DeviceTimer(fake.kernel(0.1, stream=TorchLikeStream.cuda_stream), mode="per_iteration",
                   stream=TorchLikeStream()).timeit(2)
    assert fake.records_on(plain) > 0 and fake.records_on(TorchLikeStream.cuda_stream) > 0
    assert fake.records_on(0) == 0


def test_default_stream_without_torch_cuda_is_the_legacy_stream(fake):
    oc.DeviceTimer(fake.kernel(0.1)).timeit(2)
    assert fake.records_on(0) == fake.stat("records") > 0


# -- 1: the first call, lazy loading --------------------------------------------


def test_first_call_of_a_lazily_loaded_kernel_runs_outside_the_hold(fake, no_warnings):
    # A first launch waits for the device's queued work, which behind the hold
    # never runs: it must come before any held block.
    t = oc.DeviceTimer(fake.kernel(0.01, kernel=1))
    assert t.timeit(10) == pytest.approx(1e-4, abs=QUANTUM)
    assert fake.stat("loads") == 1 and fake.stat("load_blocks") == 0
    meta = t.metadata()
    assert meta["launch_hold"] is True and meta["launch_hold_off_reason"] is None


def test_timer_with_a_lazy_kernel_keeps_the_hold_and_reports_the_cold_first_call(fake, no_warnings):
    from opbench.timer import Timer

    fake.configure(load_device_ns=5_000_000)  # the first launch also uploads: 5 ms of device time
    m = Timer(fake.kernel(0.01, kernel=7), device_timing="events", record_first_call=True).timeit(100)
    assert m.median == pytest.approx(1e-5, abs=QUANTUM / 100)
    assert m.info["first_call_s"] == pytest.approx(5.01e-3, abs=QUANTUM)  # the cold call itself
    assert m.info["launch_hold"] is True and "warnings" not in m.info
    assert fake.stat("load_blocks") == 0


def test_a_stall_at_the_first_held_block_is_retried_held(fake, no_warnings):
    # Like an autotuner that synchronizes on its first three calls: the first runs
    # unheld, and so does the second (its host time bounds its launches: the legacy
    # stream cannot be captured); the stall of the third, at the start of the first
    # held block, is retried held, not taken as a reason to drop the hold.
    calls = itertools.count()

    def tuning_then_kernel():
        if next(calls) <= 2:
            fake.synchronize()
        fake.launch(0.5)

    t = oc.DeviceTimer(tuning_then_kernel)
    t._ctx.watchdog_s = 0.05
    assert t.timeit(4) == pytest.approx(2e-3, abs=QUANTUM)
    assert t.metadata()["launch_hold"] is True
    assert fake.stat("sync_blocks") == 1


def test_statement_that_synchronizes_loses_the_hold_saying_why(fake):
    # Waiting for the GPU inside the block deadlocks against the launch hold
    # on a real device too; the watchdog releases it, one retry, then no hold.
    def sync_then_kernel():
        fake.synchronize()
        fake.launch(1.0)

    t = oc.DeviceTimer(sync_then_kernel)
    t._ctx.watchdog_s = 0.05
    with pytest.warns(LaunchHoldWarning, match=r"launch hold switched off: twice, the statement did not "
                                               r"return within 0.05 s .*it waits for the GPU inside a call"):
        assert t.timeit(4) == pytest.approx(4e-3, abs=QUANTUM)
    meta = t.metadata()
    assert meta["launch_hold"] is False
    assert "it waits for the GPU inside a call" in meta["launch_hold_off_reason"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert t.timeit(2) == pytest.approx(2e-3, abs=QUANTUM)  # no hold, no second warning


def test_module_loading_mode_is_recorded(fake):
    assert oc.DeviceTimer(fake.kernel(1.0)).metadata()["module_loading"] == "lazy"
    fake.configure(lazy_loading=0)
    assert oc.DeviceTimer(fake.kernel(1.0)).metadata()["module_loading"] == "eager"


# -- 2: errors of the hold ---------------------------------------------------------


def test_hold_errors_other_than_not_supported_are_raised(fake):
    t = warmed(oc.DeviceTimer(fake.kernel(0.1)))
    fake.fail("cuStreamWaitValue32", 1)
    with pytest.raises(oc.CudaError, match=r"^cuStreamWaitValue32 \(launch hold\) failed: "
                                           r"CUDA_ERROR_INVALID_VALUE \(1\): invalid argument$") as e:
        t.timeit(2)
    assert e.value.code == 1
    fake.fail("cuStreamWaitValue32", 0)
    assert t.timeit(2) == pytest.approx(2e-4, abs=QUANTUM)
    assert t.metadata()["launch_hold"] is True


def test_a_sticky_error_reaches_the_hold_and_is_raised(fake):
    calls = itertools.count()
    t = oc.DeviceTimer(lambda: fake.launch(0.1, fault=ILLEGAL_ADDRESS if next(calls) == 3 else 0))
    with pytest.raises(oc.CudaError) as e:
        t.timeit(5)  # call 3 faults when the held block runs
    assert str(e.value) == (
        "cuEventSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access "
        "was encountered (raised by GPU work queued in the timed region) (a sticky error: a kernel "
        "that ran earlier faulted, and the CUDA context stays unusable until the process exits)")
    assert e.value.function == "cuEventSynchronize"
    with pytest.raises(oc.CudaError) as e:
        t.timeit(5)  # sticky: the next call into the driver reports it too
    assert e.value.code == 700 and e.value.function == "cuStreamWaitValue32 (launch hold)"


def test_a_sticky_error_surfaces_at_record_and_at_launch(fake):
    t = oc.DeviceTimer(lambda: fake.launch(0.1, fault=ILLEGAL_ADDRESS), launch_hold=False)
    with pytest.raises(oc.CudaError) as e:
        t.timeit(3)  # unheld, the kernel faults at once: the record after it reports it
    assert e.value.code == 700 and e.value.function == "cuEventRecord"
    assert "a sticky error" in str(e.value)
    t2 = oc.DeviceTimer(fake.kernel(0.1), launch_hold=False)
    with pytest.raises(oc.CudaError, match=r"CUDA_ERROR_ILLEGAL_ADDRESS \(700\).*a sticky error"):
        t2.timeit(1)
    fake.set_current(0)
    with pytest.raises(RuntimeError, match="CUDA error 700 at kernel launch"):
        fake.launch(0.1)  # the statement's own launches fail too, as torch's would


def test_not_supported_turns_the_hold_off_with_its_reason(fake, no_warnings):
    t = warmed(oc.DeviceTimer(fake.kernel(0.5)))
    fake.fail("cuStreamWaitValue32", NOT_SUPPORTED)
    assert t.timeit(4) == pytest.approx(2e-3, abs=QUANTUM)
    meta = t.metadata()
    assert meta["launch_hold"] is False
    assert "CUDA_ERROR_NOT_SUPPORTED" in meta["launch_hold_off_reason"]
    with pytest.raises(ValueError, match="launches cannot be held: cuStreamWaitValue32 returned"):
        t._ctx.hold = True


def test_without_stream_memory_ops_timing_runs_unheld(fake, no_warnings):
    fake.configure(stream_mem_ops=0)
    t = oc.DeviceTimer(fake.kernel(0.5))
    assert t.timeit(4) == pytest.approx(2e-3, abs=QUANTUM)
    assert t.metadata()["launch_hold"] is False


def test_failed_driver_call_is_named(fake):
    t = warmed(oc.DeviceTimer(fake.kernel(0.1)))
    fake.fail("cuEventRecord", 1)
    with pytest.raises(oc.CudaError, match=r"^cuEventRecord failed: CUDA_ERROR_INVALID_VALUE \(1\): "
                                           r"invalid argument$"):
        t.timeit(2)
    fake.fail("cuEventRecord", 0)
    assert t.timeit(2) == pytest.approx(2e-4, abs=QUANTUM)  # usable again, nothing left held


def test_statement_exception_propagates_and_releases_the_stream(fake):
    def boom():
        raise ZeroDivisionError("from the statement")

    t = oc.DeviceTimer(boom)
    with pytest.raises(ZeroDivisionError, match="from the statement"):
        t.timeit(5)
    fake.set_current(0)  # as torch would have it
    assert fake.pending(0) == 0  # a hold kept would leave its wait queued on the stream...
    assert fake.synchronize() == 0  # ...and this would block forever
    assert fake.stat("sync_blocks") == 0


# -- 3: the launch queue ---------------------------------------------------------------


def test_eight_kernels_per_call_never_fill_the_launch_queue(fake, no_warnings):
    # Launches on the legacy stream are not counted, so blocks are sized by the
    # host's time per call: a busy host makes more, smaller blocks (130 to 250
    # windows here). Each window would carry one record's device time, which
    # sums to more than any fixed tolerance when the host is slow enough (CI saw
    # 40 quanta); with free records the sum is exact whatever the block sizes.
    fake.configure(event_ns=0)
    t = oc.DeviceTimer(fake.kernel(0.001, per_call=8))
    assert t.timeit(1000) == pytest.approx(8e-3, abs=QUANTUM)
    assert fake.stat("queue_full_blocks") == 0
    assert fake.max_queued() <= 32 * 8 + 3  # a held block is at most 32 calls
    assert t.metadata()["launch_hold"] is True


def test_the_per_call_block_leaves_room_for_the_events_and_the_flush(fake, monkeypatch):
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))  # one launch a call, counted
    per_call = warmed(oc.DeviceTimer(tc.kernel(0.02), mode="per_iteration"))
    fake.max_queued()
    per_call.timeit(100)
    assert fake.max_queued() == 1 + 32 * 3  # wait + (record, kernel, record) x 32
    cold = warmed(oc.DeviceTimer(tc.kernel(0.02), cache="cold"))
    fake.max_queued()
    cold.timeit(100)
    assert fake.max_queued() == 1 + 24 * 4  # and the flush memset: 24 calls a block


def test_a_full_launch_queue_shrinks_the_held_block(fake, monkeypatch, no_warnings):
    # Launches block once 40 commands are queued behind a hold: the watchdog
    # releases it, the same block is redone (a one-off would not stall again), and
    # when it stalls again it is made smaller, still held, no warning.
    fake.configure(queue_depth=40)
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    t = oc.DeviceTimer(tc.kernel(0.01, per_call=8))
    t._ctx.watchdog_s = 0.1
    assert t.timeit(20) == pytest.approx(1.6e-3, abs=20 * QUANTUM)
    assert t._ctx.hold_chunk == 2  # 4 calls got through (wait, record, 4 x 8 kernels)
    assert fake.stat("queue_full_blocks") == 2
    assert t.metadata()["launch_hold"] is True


def test_the_learned_block_size_is_kept_for_the_device(fake, monkeypatch, no_warnings):
    fake.configure(queue_depth=40)
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    first = oc.DeviceTimer(tc.kernel(0.01, per_call=8))
    first._ctx.watchdog_s = 0.1
    first.timeit(100)
    assert fake.stat("queue_full_blocks") == 2
    second = oc.DeviceTimer(tc.kernel(0.01, per_call=8))  # a new Context, same device
    assert second.timeit(100) == pytest.approx(8e-3, abs=100 * QUANTUM)
    assert fake.stat("queue_full_blocks") == 2  # no more stalls


def test_a_stall_keeps_blocks_already_measured(fake, monkeypatch, no_warnings):
    # One kernel per call for the first 40 calls, then 8 (counted as 1: the count
    # was made early): the second held block overflows a 100-command queue. Only
    # that block is redone (twice: the same size first, then smaller).
    fake.configure(queue_depth=100)
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    calls = itertools.count()

    def statement():
        n = next(calls)
        for _ in range(1 if n <= 40 else 8):
            fake.launch(0.005, stream=tc.streams[0])

    t = oc.DeviceTimer(statement)
    t._ctx.watchdog_s = 0.1
    total = t.timeit(100)
    made = next(calls)
    assert fake.stat("queue_full_blocks") == 2
    # The first call, the counted one, 100 timed and the stalled blocks' calls (two of 32 at most).
    assert 102 < made <= 102 + 2 * 32
    # Timed: calls 2..33 (one kernel each) and 68 redone calls of 8 kernels.
    assert total == pytest.approx(32 * 5e-6 + 68 * 40e-6, abs=20 * QUANTUM)


# -- 4: graphs ---------------------------------------------------------------------------


def test_graph_mode_captures_one_bounded_graph_and_excludes_the_upload(fake, monkeypatch, no_warnings):
    fake.configure(graph_upload_ns=50_000_000)  # a graph's first launch uploads it: 50 ms
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    t = oc.DeviceTimer(tc.kernel(0.002), mode="graph")
    for number in (1, 10, 100, 1000, 10_000, 1_000_000):  # timeit's default is 1e6
        assert t.timeit(number) == pytest.approx(number * 2e-6, rel=1e-3)
    assert tc.graphs_captured == 1  # once, at most 1,000 calls, never per block size
    assert t.metadata()["graph_calls"] == 1000
    assert fake.stat("graph_launches") < 1100  # 1e6 calls as ~1,000 replays
    assert fake.stat("graph_uploads") == 1


def test_graph_size_follows_the_call_time(fake, monkeypatch):
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    t = oc.DeviceTimer(tc.kernel(1.0), mode="graph")
    assert t.timeit(30) == pytest.approx(30e-3, rel=1e-4)  # 2 replays of 20 calls, scaled to 30
    assert (tc.graphs_captured, t.metadata()["graph_calls"]) == (1, 20)


def test_graph_per_call_times_replay_a_one_call_graph(fake, monkeypatch):
    fake.configure(graph_upload_ns=5_000_000)
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    t = oc.DeviceTimer(tc.kernel(0.01), mode="graph")
    assert t.per_call_times(3) == pytest.approx([1e-5] * 3, abs=2 * QUANTUM)
    assert t.per_call_times(3) == pytest.approx([1e-5] * 3, abs=2 * QUANTUM)
    assert tc.graphs_captured == 1  # the one-call graph alone


# -- 5: clocks and throttling ------------------------------------------------------------


# Clocks as hardware shows them: a host clock that runs, NVML that answers at its
# 1 ms update period, an SM clock that ramps from idle over 5 ms.
CLOCKS = {"host_real_time": 1, "nvml_clocks": 1, "nvml_period_ns": 1e6, "clock_ramp_ns": 5e6}


def test_throttling_is_seen_while_the_gpu_is_busy(fake):
    # Idle reads 345 MHz; under load this GPU runs at 1200 of 1980 MHz, slowed by hardware.
    fake.configure(**CLOCKS, sm_clock_busy=1200, busy_reasons=HW_SLOWDOWN)
    t = oc.DeviceTimer(fake.kernel(0.5), mode="per_iteration")
    with pytest.warns(ThrottleWarning, match=r"SM clock was 1200 MHz while running the statement, under "
                                             r"75% of its maximum 1980 MHz \(NVML reasons: HwSlowdown\)"):
        t.timeit(10)
    meta = t.metadata()
    assert meta["throttled"] is True and meta["throttled_windows"] == 10  # the first call is no sample
    assert meta["throttle_reasons"] == ["HwSlowdown"] and meta["power_capped"] is False
    assert (meta["sm_clock_mhz"], meta["sm_clock_mhz_lowest"], meta["sm_clock_mhz_max"]) == (1200, 1200, 1980)
    assert meta["throttle_threshold"] == 0.75 and meta["clock_settled"] is True


def test_full_clocks_under_load_are_not_throttling(fake, no_warnings):
    fake.configure(**CLOCKS)
    t = oc.DeviceTimer(fake.kernel(0.5))
    t.timeit(10)
    meta = t.metadata()
    assert meta["throttled"] is False and meta["throttled_windows"] == 0
    assert meta["sm_clock_mhz"] == 1980 and meta["mem_clock_mhz"] == 2619  # not the idle 345 / 405


def test_short_blocks_read_no_idle_or_ramping_clock(fake, no_warnings):
    # Defect 3 (issue 24): NVML was read right after each block was released. A
    # block of 32 x 20 us is over long before NVML's next update, and for the
    # first 5 ms the clock is still ramping up from idle: readings of an idle or
    # ramping GPU (a spurious ThrottleWarning), and three NVML reads per block.
    fake.configure(**CLOCKS)
    t = oc.DeviceTimer(fake.kernel(0.02))
    t.timeit(6400)  # 200 held blocks
    meta = t.metadata()
    assert (meta["sm_clock_mhz"], meta["throttled"], meta["clock_settled"]) == (1980, False, True)
    one_probe = 2 * (1 + device_timer._PROBE_MAX_S / device_timer._PROBE_SPACING_S + 1)
    assert fake.stat("nvml_clock_reads") <= one_probe


def test_a_power_capped_gemm_is_power_capped_not_throttled(fake, no_warnings):
    # Defect 3: a large GEMM held at its power limit (NVML: SwPowerCap alone)
    # runs as designed; it was reported as throttling.
    fake.configure(**CLOCKS, sm_clock_busy=1200, busy_reasons=SW_POWER_CAP)
    t = oc.DeviceTimer(fake.kernel(2.0), mode="per_iteration")
    t.timeit(20)
    meta = t.metadata()
    assert (meta["power_capped"], meta["throttled"], meta["throttled_windows"]) == (True, False, 0)
    assert meta["throttle_reasons"] == ["SwPowerCap"] and meta["sm_clock_mhz"] == 1200


def test_clocks_are_probed_on_a_cadence_not_per_timeit(fake):
    fake.configure(**CLOCKS)
    t = oc.DeviceTimer(fake.kernel(0.05))
    t.timeit(100)
    reads = fake.stat("nvml_clock_reads")
    for _ in range(20):
        t.timeit(100)  # well within a second: no second probe
    assert fake.stat("nvml_clock_reads") == reads


def test_without_nvml_clocks_are_unknown_not_fatal(fake):
    _C._cuda_set_libraries(fake.path, "libopbench-absent-nvml.so.1")
    t = oc.DeviceTimer(fake.kernel(0.5))
    assert t.timeit(2) == pytest.approx(1e-3, abs=QUANTUM)
    meta = t.metadata()
    assert meta["throttled"] is None and meta["sm_clock_mhz"] is None and meta["sm_clock_mhz_max"] is None
    assert meta["driver_version"] is None and meta["cuda_driver_version"] == "12.4"
    assert "libopbench-absent-nvml.so.1 not found" in meta["clock_problem"]


# -- 6: the event quantum ------------------------------------------------------------------


def test_event_quantum_is_measured_and_short_windows_warn(fake):
    t = oc.DeviceTimer(fake.kernel(0.002), mode="per_iteration")  # 2 us: 4 quanta
    with pytest.warns(ResolutionWarning, match=r"median per-call window, 2 us, is 4.0 steps of this GPU's "
                                               r"event timer \(0.5 us each; under 20\).*'events' or 'graph'"):
        t.timeit(50)
    meta = t.metadata()
    assert meta["event_quantum_s"] == pytest.approx(5e-7, rel=1e-6)
    assert meta["resolution_limited"] is True
    records = fake.stat("records")
    oc.DeviceTimer(fake.kernel(0.002)).timeit(1)
    assert fake.stat("records") - records < 32  # once per device and process: no second probe


def test_event_quantum_probe_tries_again_when_a_round_fits_between_ticks(fake):
    # 32 records 20 ns apart span 620 ns: a round may see no tick of a 1 us timer.
    fake.configure(event_ns=20, event_quantum_ns=1000)
    t = oc.DeviceTimer(fake.kernel(0.5))
    t.timeit(1)
    assert t.metadata()["event_quantum_s"] == pytest.approx(1e-6, rel=1e-6)
    assert fake.stat("records") > 2 * 32  # it took more than one round here


def test_long_windows_and_blocks_do_not_warn(fake, no_warnings):
    fake.configure(event_quantum_ns=1000)
    per_call = oc.DeviceTimer(fake.kernel(0.02), mode="per_iteration")  # 20 us: 20 quanta
    per_call.timeit(50)
    blocks = oc.DeviceTimer(fake.kernel(0.002))  # 2 us calls timed in blocks
    blocks.timeit(50)
    assert per_call.metadata()["event_quantum_s"] == pytest.approx(1e-6, rel=1e-6)
    assert per_call.metadata()["resolution_limited"] is False


# -- 7: contexts and streams of several devices ------------------------------------------------


def test_the_callers_current_context_is_left_current(fake):
    fake.configure(device_count=2)
    fake.set_current(0)  # torch's current device
    oc.DeviceTimer(fake.kernel(0.1), device=1).timeit(4)
    assert fake.stat("current_device") == 0
    oc.Event(device=1).record()
    assert fake.stat("current_device") == 0
    fake.set_current(-1)  # a thread where nothing touched CUDA stays that way
    oc.DeviceTimer(fake.kernel(0.1), device=1).timeit(2)
    assert fake.stat("current_device") == -1


def test_events_go_on_the_stream_of_the_timers_own_device(fake, monkeypatch):
    fake.configure(device_count=2)
    streams = {0: fake.stream(0), 1: fake.stream(1)}
    use_fake_torch(monkeypatch, FakeTorchCuda(fake, streams, current=0))
    t = oc.DeviceTimer(fake.kernel(0.25, stream=streams[1]), device=1)
    assert t.timeit(4) == pytest.approx(1e-3, abs=QUANTUM)
    assert fake.records_on(streams[1], 1) > 0 and fake.records_on(streams[0], 0) == 0
    event = oc.Event(device=1)
    event.record()
    assert fake.records_on(streams[0], 0) == 0


# -- metadata ----------------------------------------------------------------------------------


def test_metadata(fake):
    fake.configure(**CLOCKS, l2_bytes=60 * MIB, driver_version=12080, sm_clock_busy=1755, mem_clock_busy=3201,
                   mem_clock_max=3201, name="NVIDIA H200", nvml_driver_version="570.86.15")
    t = oc.DeviceTimer(fake.kernel(0.5), mode="per_iteration", cache="cold")
    assert t.metadata()["throttled"] is None  # nothing measured yet
    t.timeit(3)
    meta = t.metadata()
    assert meta.pop("per_iteration_offset_s") >= 0  # measured in cold mode too
    assert meta.pop("per_call_estimator").startswith("each call's event window, readings on one step")
    assert meta == {
        "clock": "cuda-events per-iteration (cold L2)",
        "device_timing": "per_iteration",
        "l2_cache": "cold",
        "device": "NVIDIA H200",
        "device_index": 0,
        "device_source": "current device",
        "driver_version": "570.86.15",
        "cuda_driver_version": "12.8",
        "module_loading": "lazy",
        "stream": "legacy default stream (torch is not in use)",
        "l2_cache_bytes": 60 * MIB,
        "flush_buffer_bytes": 120 * MIB,
        "l2_flush": "read",
        "launch_hold": True,
        "launch_hold_off_reason": None,
        "launches_per_call": None,
        "launch_count_problem": "the legacy default stream cannot be captured",
        "event_quantum_s": 5e-7,
        "resolution_limited": False,
        "sm_clock_mhz": 1755,
        "sm_clock_mhz_lowest": 1755,
        "sm_clock_mhz_max": 1980,
        "mem_clock_mhz": 3201,
        "clock_settled": True,
        "throttle_threshold": 0.75,
        "throttled": False,
        "throttled_windows": 0,
        "judged_windows": 3,
        "unjudged_windows": 0,
        "unjudged_reason": None,
        "throttle_reasons": [],
        "power_capped": False,
    }


def test_launch_hold_off_by_the_caller_is_reported(fake):
    t = warmed(oc.DeviceTimer(fake.kernel(0.5), launch_hold=False))
    waits = fake.stat("stream_waits")
    assert t.timeit(4) == pytest.approx(2e-3, abs=QUANTUM)
    assert fake.stat("stream_waits") == waits
    meta = t.metadata()
    assert meta["launch_hold"] is False
    assert meta["launch_hold_off_reason"] == "switched off by the caller (launch_hold=False)"


# -- with opbench.Timer ----------------------------------------------------------------


def test_timer_device_timing(fake):
    from opbench.timer import Timer

    # NVML's clocks on, and the host clock frozen between driver calls (the fake's
    # default in these tests): what the timer sees does not depend on how fast this
    # host runs Python. On the real host clock a loaded machine, launching slower than one
    # 10 us kernel per 10 us, left the GPU idle between kernels: the clock probe
    # read a partly idle GPU and `throttled` was None, not False.
    fake.configure(nvml_clocks=1)
    m = Timer(fake.kernel(0.01), device_timing="events", l2_cache="warm").timeit(100)
    # Each window holds one event record (the fake's 40 ns) besides its calls, and the
    # held blocks are sized by the host's speed: 0 to 40 ns a call above the kernel.
    assert 1e-5 - 1e-12 <= m.median <= 1e-5 + 40e-9
    assert "cuda-events (warm L2)" in repr(m)
    assert m.info["event_quantum_s"] == pytest.approx(5e-7) and m.info["throttled"] is False


def test_timer_per_iteration_keeps_every_call_and_the_warnings(fake):
    from opbench.timer import Timer

    with pytest.warns(ResolutionWarning):
        m = Timer(fake.kernel(0.002), device_timing="per_iteration").timeit(50)
    assert m.number_per_run == 1 and len(m.raw_times) == 50
    assert {"category": "ResolutionWarning"}.items() <= m.info["warnings"][0].items()


# -- issue 24: defects 1, 2, 4, 6, 7, 8, 9 -------------------------------------------------


def test_block_size_comes_from_warm_calls_not_the_cold_first_one(fake, no_warnings):
    # Defect 1: the search's timeit(1) returned the cold first call (here 5 ms of
    # loading), which fixed number=1 for a 3 us kernel.
    from opbench.timer import Timer

    fake.configure(load_device_ns=5_000_000)
    timer = Timer(fake.kernel(0.003, kernel=9), device_timing="events")
    assert timer.block_size(0.2) == 100  # 3 us warm calls: 100 of them reach 0.2 ms
    assert fake.stat("loads") == 1


def test_events_mode_warns_when_its_windows_are_under_20_quanta(fake):
    # Defect 1: the event quantum applies to block windows too (2 calls of 1 us: 4 quanta).
    t = oc.DeviceTimer(fake.kernel(0.001))
    with pytest.warns(ResolutionWarning, match=r"the median timed window, 2 us, is 4.0 steps"):
        t.timeit(2)  # the first call alone (1 us), then a block of 2
    assert t.metadata()["resolution_limited"] is True


def test_graph_mode_blocks_are_whole_replays(fake, monkeypatch, no_warnings):
    # Defect 2: blocks were sized to ~200 us of calls but each ran a whole 2 ms
    # replay: min_run_time=0.2 cost 1,000 replays (2 s; 20 s for slower kernels).
    from opbench.timer import Timer

    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    timer = Timer(tc.kernel(0.002), device_timing="graph")
    m = timer.blocked_autorange(min_run_time=0.2)
    assert tc.graphs_captured == 1 and m.number_per_run == 1000
    assert m.median == pytest.approx(2e-6, rel=1e-3)
    assert fake.stat("graph_launches") <= 100 + 10  # 100 replays of 2 ms, and the warm-up


def test_held_blocks_are_sized_in_launches(fake, monkeypatch, no_warnings):
    # Defect 4: 32 calls of 64 kernels (2,048 launches) overfilled a 1,024-command
    # queue; each smaller block was learned through a watchdog stall.
    stream = fake.stream(0)
    torch_cuda = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: stream}))
    t = oc.DeviceTimer(torch_cuda.kernel(0.001, per_call=64))
    t._ctx.watchdog_s = 0.2
    fake.max_queued()
    assert t.timeit(40) == pytest.approx(40 * 64e-6, abs=40 * QUANTUM)
    assert fake.stat("queue_full_blocks") == 0 and fake.stat("captures") == 1
    assert fake.max_queued() <= 96 + 3
    meta = t.metadata()
    assert meta["launches_per_call"] == 64 and meta["launch_hold"] is True


def test_launches_that_cannot_be_counted_say_why(fake):
    t = oc.DeviceTimer(fake.kernel(0.01))  # the legacy stream: no capture
    t.timeit(4)
    meta = t.metadata()
    assert meta["launches_per_call"] is None
    assert meta["launch_count_problem"] == "the legacy default stream cannot be captured"


def test_a_statement_that_cannot_be_captured_is_still_timed(fake, monkeypatch, no_warnings):
    stream = fake.stream(0)
    torch_cuda = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: stream}))
    kernel = torch_cuda.kernel(0.01)

    def item_then_kernel():
        if fake.synchronize(stream):  # as .item() would, and fails under capture
            raise RuntimeError("operation not permitted when stream is capturing")
        kernel()

    t = oc.DeviceTimer(item_then_kernel, launch_hold=False)
    assert t.timeit(4) == pytest.approx(4e-5, abs=4 * QUANTUM)
    assert t.metadata()["launch_count_problem"].startswith(
        "the statement cannot run under stream capture (RuntimeError: operation not permitted")


class FakeTensor:
    """What the device choice looks at: ``is_cuda`` and ``device.index``."""

    def __init__(self, index):
        self.is_cuda = True
        self.device = type("device", (), {"index": index})()


def test_the_device_comes_from_the_statements_tensors(fake, monkeypatch):
    # Defect 7: a statement on cuda:1 with current device 0 was timed on device 0's stream.
    from opbench.timer import Timer

    fake.configure(device_count=2)
    streams = {0: fake.stream(0), 1: fake.stream(1)}
    use_fake_torch(monkeypatch, FakeTorchCuda(fake, streams, current=0))
    statement = fake.kernel(0.25, stream=streams[1])
    m = Timer(statement, globals={"x": FakeTensor(1), "n": 3}, device_timing="events").timeit(4)
    assert m.median == pytest.approx(0.25e-3, abs=QUANTUM)
    assert (m.info["device_index"], m.info["device_source"]) == (1, "CUDA tensors in globals")
    assert fake.records_on(streams[1], 1) > 0 and fake.records_on(streams[0], 0) == 0
    m = Timer(statement, device="cuda:1", device_timing="events").timeit(2)
    assert (m.info["device_index"], m.info["device_source"]) == (1, "device argument")
    m = Timer(fake.kernel(0.25, stream=streams[0]), device_timing="events").timeit(2)
    assert (m.info["device_index"], m.info["device_source"]) == (0, "current device")
    with pytest.raises(ValueError, match=r"CUDA tensors on devices \[0, 1\]: pass device="):
        oc.DeviceTimer(statement, globals={"a": [FakeTensor(0)], "b": {"k": FakeTensor(1)}})
    with pytest.raises(ValueError, match="device must be a CUDA device"):
        oc.DeviceTimer(statement, device="cpu")


def test_a_legacy_current_stream_is_replaced_by_a_private_one(fake, monkeypatch, no_warnings):
    # Defect 8: holding the legacy stream held every blocking stream too (a
    # pin-memory thread's copies): their work waited for the whole block.
    blocking = fake.stream(0, blocking=True)
    # torch's current stream: the legacy one
    torch_cuda = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: 0}))
    kernel = torch_cuda.kernel(0.1)
    stuck = []

    def statement():
        kernel()
        fake.launch(0.001, stream=blocking)  # another thread's work on a blocking stream
        stuck.append(fake.pending(blocking))

    t = oc.DeviceTimer(statement)
    assert t.timeit(8) == pytest.approx(8 * 0.1e-3, abs=QUANTUM)  # the other stream's work is not in it
    assert set(stuck) == {0}
    private = torch_cuda.made[0].cuda_stream
    # On the legacy stream, only torch's own records: one for each time the private stream waits for it.
    assert fake.records_on(0) == torch_cuda.made[0].waited_for.count(0) and fake.records_on(private) > 0
    assert torch_cuda.made[0].waited_for[0] == 0  # the statement's inputs came first
    assert t.metadata()["stream"].startswith("private non-blocking stream")
    assert torch_cuda.streams[0] == 0  # torch's current stream is left as it was


def test_per_iteration_reports_its_offset_from_blocks(fake, monkeypatch):
    # Defect 9 (issue 24): an event record between kernels serialises them (here
    # the 300 ns overlap of back-to-back kernels is lost and each record takes 200
    # ns), so per-call windows read above blocks; the offset is measured, reported
    # and (issue 39) subtracted from the per-call figures.
    fake.configure(kernel_overlap_ns=300, event_ns=200, event_quantum_ns=1)
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))  # whole blocks of 32 calls
    t = oc.DeviceTimer(tc.kernel(0.01), mode="per_iteration")
    figures = t.per_call_times(10)
    assert t.last_windows == pytest.approx([10.2e-6] * 10, abs=2e-9)
    n = device_timer._OFFSET_CALLS
    expected = (200 + 300) * (n - 1) / n * 1e-9  # from a block of n calls
    assert t.metadata()["per_iteration_offset_s"] == pytest.approx(expected, abs=2e-9)
    assert statistics.median(figures) == pytest.approx(10.2e-6 - expected, abs=2e-9)
    events = oc.DeviceTimer(tc.kernel(0.01))
    assert t.timeit(n) / n - events.timeit(n) / n == pytest.approx(0, abs=2e-9)


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
    assert meta["launch_hold"] is True, meta["launch_hold_off_reason"]
    assert meta["module_loading"] in ("lazy", "eager")
    assert meta["event_quantum_s"] is None or 0 < meta["event_quantum_s"] < 1e-5


@gpu
def test_gpu_never_launched_kernel_keeps_the_hold():
    import torch

    x = torch.rand(4096, device="cuda")
    t = oc.DeviceTimer(lambda: torch.special.i1e(x))  # a kernel nothing here launched before
    with warnings.catch_warnings():
        warnings.simplefilter("error", LaunchHoldWarning)
        assert t.timeit(100) > 0
    assert t.metadata()["launch_hold"] is True


@gpu
def test_gpu_eight_kernels_per_call_do_not_stall():
    import torch

    x = torch.zeros(1024, device="cuda")

    def eight():
        for _ in range(8):
            x.add_(1.0)

    t = oc.DeviceTimer(eight)
    t._ctx.watchdog_s = 0.5
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error", LaunchHoldWarning)
        t.timeit(2000)
    assert time.monotonic() - start < 0.5 * 4  # no watchdog stall (each costs 0.5 s)
    assert t.metadata()["launch_hold"] is True


@gpu
def test_gpu_cold_buffer_sized_from_the_device_l2():
    import torch

    x = torch.randn(1 << 20, device="cuda")
    t = oc.DeviceTimer(lambda: x.mul_(1.0), cache="cold")
    assert len(t.per_call_times(5)) == 5
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    assert t.metadata()["flush_buffer_bytes"] == device_timer._flush_buffer_bytes(l2)


@gpu
def test_gpu_cold_flush_reads_with_the_ptx_kernel():
    import torch

    x = torch.randn(1 << 20, device="cuda")
    t = oc.DeviceTimer(lambda: x.mul_(1.0), mode="per_iteration", cache="cold")
    assert len(t.per_call_times(5)) == 5
    assert t.metadata()["l2_flush"] == "read"  # the driver compiled and ran the read kernel


@gpu
def test_gpu_launches_are_counted_on_torchs_stream():
    import torch

    x = torch.zeros(1024, device="cuda")

    def eight():
        for _ in range(8):
            x.add_(1.0)

    before = x.clone()
    with torch.cuda.stream(torch.cuda.Stream()):
        t = oc.DeviceTimer(eight)
        t.timeit(100)
        torch.cuda.current_stream().synchronize()
    meta = t.metadata()
    assert meta["launches_per_call"] == 8, meta.get("launch_count_problem")
    assert meta["stream"] == "torch's current stream" and meta["launch_hold"] is True
    assert torch.all(x > before)  # the captured call ran nothing; the timed ones did


@gpu
def test_gpu_legacy_stream_is_replaced_by_a_private_one():
    import torch

    x = torch.zeros(1024, device="cuda")
    t = oc.DeviceTimer(lambda: x.add_(1.0))
    t.timeit(100)
    assert t.metadata()["stream"].startswith("private non-blocking stream")
    assert torch.cuda.current_stream().cuda_stream == 0
    assert float(x[0]) >= 100  # the legacy stream waited for the private one


@gpu
def test_gpu_graph_mode():
    import torch

    x = torch.randn(1 << 16, device="cuda")
    t = oc.DeviceTimer(lambda: x.add_(1.0), mode="graph")
    before = x.clone()
    assert t.timeit(20) > 0
    assert t.timeit(100_000) > 0
    assert 1 <= t.metadata()["graph_calls"] <= 1000
    assert len(t.per_call_times(3)) == 3
    assert torch.all(x > before)  # the replays ran


@gpu
def test_gpu_synchronizing_statement_does_not_hang():
    import torch

    x = torch.randn(1024, device="cuda")
    t = oc.DeviceTimer(lambda: x.sum().item())
    t._ctx.watchdog_s = 0.2
    with pytest.warns(LaunchHoldWarning, match="launch hold switched off"):
        assert t.timeit(3) > 0


@gpu
def test_gpu_kernel_fault_is_reported_not_hung():
    # A device-side fault poisons the context, so it runs in its own process.
    code = (
        "import torch, opbench.engines.cuda as oc\n"
        "x = torch.zeros(4, device='cuda'); i = torch.tensor([1 << 40], device='cuda')\n"
        "t = oc.DeviceTimer(lambda: x.index_add_(0, i, x[:1]))\n"
        "try:\n    t.timeit(1)\nexcept oc.CudaError as e:\n    print(e.function, e.code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                         timeout=120)
    # torch checks index_add_'s indices on the device: CUDA_ERROR_ASSERT (710), reported by
    # the first driver call after the fault (the first call runs unheld, so it may be a record).
    reported = out.stdout.split()
    assert len(reported) == 2 and reported[0] in ("cuEventSynchronize", "cuEventRecord") \
        and reported[1] == "710", out.stdout + out.stderr
