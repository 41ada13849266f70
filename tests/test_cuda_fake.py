"""The fake CUDA driver of tests/fake_cuda behaves as hardware does where opbench's timing
depends on it (issue 39: each of these was a kindness of the fake that hid a defect).

These test the fake itself, through its own entry points and through opbench."""
from __future__ import annotations

import ctypes
import statistics

import pytest

import opbench.engines.cuda as oc
from fake_cuda import (  # noqa: F401 (fixtures)
    GPU_IDLE,
    HW_SLOWDOWN,
    ILLEGAL_ADDRESS,
    SW_POWER_CAP,
    AcceleratorError,
    FakeTorchCuda,
    fake_fixture,
    fake_library_fixture,
    use_fake_torch,
)
from opbench import _C


def window_of(fake, stream: int, *statement_ms: float, pad_ns: int = 0) -> float:
    """Seconds between two opbench events around kernels of ``statement_ms`` on ``stream``."""
    ctx = _C.CudaContext(0)
    start, end = ctx.event(), ctx.event()
    fake.set_current(0)
    start.record(stream)
    for ms in statement_ms:
        fake.launch(ms, stream=stream)
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) * 1e-3


def test_event_timestamps_are_ticks_of_a_jittered_timer_not_multiples_of_500ns(fake):
    fake.configure(event_jitter_ns=24, event_phase_ns=137)
    windows = [window_of(fake, 0, 0.0022) for _ in range(200)]
    steps = {round(w * 1e9) for w in windows}
    assert not all(s % 500 == 0 for s in steps)  # the ticks are off their nominal times
    assert {round(s / 500) for s in steps} == {4, 5}  # 2.24 us read as 2.0 or 2.5 us, give or take
    assert 0.3 < sum(round(w * 1e9 / 500) == 5 for w in windows) / 200 < 0.7  # random phases


def test_dependent_kernels_have_a_launch_gap(fake):
    fake.configure(dependent_gap_ns=1000, event_quantum_ns=1)
    one, two = window_of(fake, 0, 0.01), window_of(fake, 0, 0.01, 0.01)
    assert two - one == pytest.approx(10e-6 + 1e-6, abs=2e-9)
    kernels = fake.kernel_log()
    assert kernels[-1][0] - kernels[-2][1] == 1000  # the profiler sees the gap between them


def test_a_lower_clock_slows_kernels(fake):
    fake.configure(event_quantum_ns=1, sm_clock_busy=990)  # half the maximum clock
    assert window_of(fake, 0, 0.01) == pytest.approx(2 * 10e-6 + 40e-9, abs=2e-9)
    fake.configure(event_quantum_ns=1, clock_ramp_ns=1e6)  # ramping up from idle
    first = window_of(fake, 0, 0.01)
    assert first > 2 * 10e-6  # the first kernel of a busy stretch starts at the idle clock


def test_streams_share_hardware_connections(fake):
    fake.configure(connections=2)
    a, b = fake.stream(0), fake.stream(0)
    assert (fake.connection(0), fake.connection(a), fake.connection(b)) == (0, 1, 0)
    # A wait held at the head of the legacy stream's connection holds b's work too.
    ctx = _C.CudaContext(0)
    ctx.hold_chunk = 1
    fake.set_current(0)
    stuck = []
    ctx.run(lambda: (fake.launch(0.01, stream=b), stuck.append(fake.pending(b)), fake.launch(0.01)), 1, 0)
    assert stuck == [1] and fake.pending(b) == 0


def test_frees_wait_for_the_device(fake):
    ctx = _C.CudaContext(0)
    freed = []
    ctx.set_flush_bytes(1 << 20)

    def statement():
        fake.launch(0.01)
        if not freed:
            freed.append(True)
            ctx.set_flush_bytes(0)  # cuMemFree: waits for the held work, until the watchdog fires

    ctx.watchdog_s = 0.05
    ctx.run(statement, 4, 0)
    assert fake.stat("free_blocks") == 1


def test_wait_stream_goes_through_the_driver_and_raises_torchs_error(fake):
    tc = FakeTorchCuda(fake, {0: fake.stream(0)})
    side = tc.Stream()
    side.wait_stream(tc.current_stream())
    assert fake.stat("event_waits") == 1 and fake.stat("records") == 1
    tc.kernel(0.01, fault=lambda: ILLEGAL_ADDRESS)()
    with pytest.raises(AcceleratorError, match="CUDA error 700 at wait_stream"):
        side.wait_stream(tc.current_stream())  # the context is sticky now


def test_capture_records_work_and_follows_forks(fake):
    fake.configure(graph_node_gap_ns=200)
    tc = FakeTorchCuda(fake, {0: fake.stream(0)})
    side = tc.Stream()
    graph = tc.CUDAGraph()
    with tc.stream(tc.current_stream()):
        graph.capture_begin(capture_error_mode="relaxed")
        tc.kernel(0.01)()
        side.wait_stream(tc.current_stream())  # side joins the capture
        fake.launch(0.02, stream=side.cuda_stream)
        tc.current_stream().wait_stream(side)  # and is joined back
        graph.capture_end()
    assert fake.stat("kernels") == 0 and fake.stat("captured_nodes") == 2  # recorded, not run
    fake.set_current(0)
    graph.replay()
    fake.synchronize(tc.streams[0])
    assert fake.stat("graph_launches") == 1
    assert [e - s for s, e in fake.kernel_log()] == [30_000 + 200]  # one launch: both kernels and a gap


@pytest.mark.parametrize("misuse, code", [
    ("unjoined", 904),  # a fork never joined back
    ("isolation", 901),  # waiting for work outside the capture invalidates it
    ("legacy", 901),  # the legacy stream would wait for a capturing blocking stream
    ("sync", 901),  # synchronizing a capturing stream
])
def test_capture_refuses_what_hardware_refuses(fake, misuse, code):
    tc = FakeTorchCuda(fake, {0: fake.stream(0, blocking=True)})
    side, outside = tc.Stream(), tc.Stream()
    graph = tc.CUDAGraph()
    graph.capture_begin(capture_error_mode="relaxed")
    fake.set_current(0)
    with pytest.raises(AcceleratorError) if misuse != "unjoined" else _nothing():
        if misuse == "unjoined":
            side.wait_stream(tc.current_stream())
        elif misuse == "isolation":
            tc.current_stream().wait_stream(outside)
        elif misuse == "legacy":
            fake.launch(0.01, stream=0)
        else:
            tc.current_stream().synchronize()
    with pytest.raises(AcceleratorError, match=f"CUDA error {code} at capture_end"):
        graph.capture_end()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_nvml_combines_reasons_and_costs_host_time(fake):
    fake.configure(host_real_time=0, nvml_clocks=1, nvml_call_ns=50_000,
                   busy_reasons=SW_POWER_CAP | HW_SLOWDOWN, sm_clock_busy=1200)
    ctx = _C.CudaContext(0)
    host = fake.stat("host_ns")
    assert ctx.clocks() == (345, 405)  # idle: nothing ran
    assert fake.stat("host_ns") - host == 2 * 50_000  # two NVML queries
    fake.set_current(0)
    fake.launch(5.0)  # 5 ms of work, then the host catches up
    fake.synchronize()
    reading = ctx.clock_probe(lambda: fake.launch(2.0), 0, 3, 0.0005, 0.01, 2e-3)
    assert reading is not None and reading[2] == SW_POWER_CAP | HW_SLOWDOWN  # both bits at once
    lib = fake.lib
    lib.nvmlDeviceGetCurrentClocksEventReasons.argtypes = [ctypes.c_void_p,
                                                           ctypes.POINTER(ctypes.c_ulonglong)]
    reasons = ctypes.c_ulonglong()
    fake.set(host_real_time=0)
    lib.nvmlDeviceGetCurrentClocksEventReasons(ctypes.c_void_p(0x2000), ctypes.byref(reasons))
    assert reasons.value & SW_POWER_CAP


def test_a_half_idle_gpu_reads_a_lowered_clock(fake):
    fake.configure(host_real_time=1, nvml_clocks=1, launch_ns=12_000, clock_ramp_ns=0)
    ctx = _C.CudaContext(0)
    fake.set_current(0)
    reading = ctx.clock_probe(lambda: fake.launch(0.003), 0, 100_000, 0.005, 0.05, 3e-6)
    assert reading is None or reading[0] < 0.75 * 1980  # or idle through a whole NVML period


def test_module_loading_takes_ptx_only(fake):
    lib = fake.lib
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    module = ctypes.c_void_p()
    fake.set_current(0)
    _C.CudaContext(0)  # the primary context retained
    assert lib.cuModuleLoadData(ctypes.byref(module), b"opbench_l2_read: not PTX") == 218
    assert lib.cuModuleLoadData(ctypes.byref(module), b".version 7.0\n.target sm_75\n.address_size 64\n"
                                b".visible .entry opbench_l2_read()\n{\n  mov.u32 %r1, 0\n}\n") == 218  # ;
    assert lib.cuModuleLoadData(ctypes.byref(module), b".version 7.0\n.target sm_75\n.address_size 64\n"
                                b".visible .entry opbench_l2_read()\n{\n  .reg .b32 %r<2>;\n"
                                b"  mov.u32 %r2, 0;\n  ret;\n}\n") == 218  # %r2 undeclared
    assert lib.cuModuleLoadData(ctypes.byref(module), b".version 9.9\n.target sm_75\n.address_size 64\n"
                                b".visible .entry opbench_l2_read()\n{\n  ret;\n}\n") == 222  # too new a PTX


@pytest.mark.parametrize("config, why", [
    ({"compute_capability": 50}, "CUDA_ERROR_NO_BINARY_FOR_GPU"),  # sm_75 and sm_52 both too new
    ({"driver_version": 10020}, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),  # CUDA 10.2 takes PTX 6.5
])
def test_the_flush_kernel_loads_where_the_driver_compiles_it_or_says_why(fake, config, why):
    t = oc.DeviceTimer(fake.kernel(0.5), cache="cold")
    assert t.metadata()["l2_flush"] == "read"  # opbench's PTX passes the fake's checks
    fake.configure(**config)
    t = oc.DeviceTimer(fake.kernel(0.5), cache="cold")
    assert t.metadata()["l2_flush"] == f"write (the read kernel did not load: {why} " + (
        "(209): no kernel image is available for execution on the device)" if why.endswith("GPU") else
        "(222): the provided PTX was compiled with an unsupported toolchain.)")
    fake.configure(compute_capability=61)
    assert oc.DeviceTimer(fake.kernel(0.5), cache="cold").metadata()["l2_flush"] == "read"  # sm_52's
    assert fake.stat("module_loads") == 1


def test_the_profiler_log_holds_each_kernel(fake):
    fake.configure(dependent_gap_ns=500)
    fake.set_current(0)
    for _ in range(3):
        fake.launch(0.004)
    fake.synchronize()
    spans = fake.kernel_log()
    assert [e - s for s, e in spans] == [4000] * 3
    assert statistics.mean(b[0] - a[1] for a, b in zip(spans, spans[1:])) == 500
    assert fake.kernel_log() == []  # read once
