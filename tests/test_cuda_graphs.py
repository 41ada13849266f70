"""opbench.engines.cuda.graphs: CUDA graph capture through torch (graph mode's graphs, and
counting a call's launches), against the fake torch.cuda of tests/fake_cuda and against the
installed CPU-only torch."""
from __future__ import annotations

import contextlib
import sys
import types

import pytest

from fake_cuda import FakeTorchCuda, fake_fixture, fake_library_fixture, use_fake_torch  # noqa: F401 (fixtures)
from opbench import _C, errors
from opbench.engines.cuda import graphs


@pytest.mark.parametrize("seconds, calls", [(1e-7, 1000), (2e-5, 1000), (4e-5, 500), (1e-3, 20),
                                            (0.02, 1), (3.0, 1), (0.0, 1000)])
def test_graph_calls_aim_at_a_20ms_replay_and_at_most_1000(seconds, calls):
    assert graphs.graph_calls(seconds) == calls


def test_graphs_are_captured_on_their_own_stream_and_replay_as_one_launch(fake, monkeypatch):
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    tg = graphs.TorchGraphs(0)
    tg.prepare(tc.kernel(0.01))
    assert tg._stream.waited_for == [tc.streams[0]]  # the capture stream waited for torch's
    replay = tg.capture(tc.kernel(0.01), 20)
    launches = fake.stat("launches")
    fake.set_current(0)
    replay()
    assert fake.stat("launches") - launches == 1 and fake.stat("graph_launches") == 1
    with pytest.raises(errors.GraphCaptureError, match="could not capture the statement"):
        tg.capture(lambda: fake.check(fake.synchronize(tc.streams[0]), "synchronize"), 3)  # as .item()


def _counting(fake, monkeypatch):
    tc = use_fake_torch(monkeypatch, FakeTorchCuda(fake, {0: fake.stream(0)}))
    return tc, _C.CudaContext(0), tc.streams[0]


def test_count_launches_counts_the_capture_torch_began(fake, monkeypatch):
    tc, ctx, stream = _counting(fake, monkeypatch)
    assert graphs.count_launches(tc, ctx, tc.random(0.01), stream) == 1  # torch's RNG knows of it
    assert graphs.count_launches(tc, ctx, tc.kernel(0.01, per_call=3), stream) == 3
    assert ctx.launch_count_problem == ""
    assert fake.stat("kernels") == 0  # captured, never run


def test_count_launches_says_why_it_could_not_count(fake, monkeypatch):
    tc, ctx, stream = _counting(fake, monkeypatch)
    assert graphs.count_launches(tc, ctx, lambda: None, stream) is None
    assert ctx.launch_count_problem == "one call launched nothing on the timed stream"

    def raises():
        raise ValueError("no")

    assert graphs.count_launches(tc, ctx, raises, stream) is None
    assert ctx.launch_count_problem == "the statement cannot run under stream capture (ValueError: no)"
    side = tc.Stream()

    def unjoined_fork():
        side.wait_stream(tc.current_stream())  # forked, never joined back
        fake.launch(0.01, stream=side.cuda_stream)

    assert graphs.count_launches(tc, ctx, unjoined_fork, stream) is None
    assert ctx.launch_count_problem.startswith("capturing one call failed: CUDA error 904")
    tc.streams[0] = 0
    assert graphs.count_launches(tc, ctx, tc.kernel(0.01), 0) is None  # no capture on the legacy stream
    assert ctx.launch_count_problem.startswith("torch could not begin a capture on the timed stream")


def test_an_interrupt_during_the_count_ends_the_capture_and_propagates(fake, monkeypatch):
    tc, ctx, stream = _counting(fake, monkeypatch)

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        graphs.count_launches(tc, ctx, interrupted, stream)
    assert graphs.count_launches(tc, ctx, tc.kernel(0.01), stream) == 1  # the stream is not left capturing


# -- torch's own graph path, against the installed (CPU-only) torch (issue 24, defect 6) ------


def test_torch_graphs_on_a_cpu_only_torch_is_a_clear_cuda_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this torch sees a GPU: test_gpu_graph_mode covers it")
    with pytest.raises(errors.CudaError, match=r"device_timing='graph' needs torch with CUDA; this torch "
                                           r"\(.*\) sees no CUDA device"):
        graphs.TorchGraphs(0)


def test_torch_graphs_set_up_on_their_own_device_or_say_why(monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this torch sees a GPU")
    # Past the availability check, the real torch refuses at the capture stream,
    # made up front on the timer's device (not at the first capture).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(errors.CudaError,
                       match=r"graph mode could not set up capture on CUDA device 1: .*CUDA"):
        graphs.TorchGraphs(1)


def test_torch_graphs_capture_errors_are_graph_capture_errors():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this torch sees a GPU")
    tg = object.__new__(graphs.TorchGraphs)
    tg._torch, tg._device, tg._stream, tg._pool, tg._graphs = torch, 0, None, None, []
    with pytest.raises(errors.GraphCaptureError, match=r"could not capture the statement into a CUDA graph: "
                                                      r".*time it with device_timing='events'") as e:
        tg.capture(lambda: None, 1)  # the real torch.cuda, as far as a CPU build goes
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, errors.Error)


def test_torch_graphs_share_one_pool_and_their_capture_stream():
    # torch.cuda as _TorchGraphs drives it, recorded: the capture stream is made
    # under the timer's device, both graphs get the same pool and stream, and a
    # statement that synchronizes mid-capture is named.
    calls = []

    class Graph:
        def replay(self):
            calls.append("replay")

    class Cuda:
        is_available = staticmethod(lambda: True)
        graph_pool_handle = staticmethod(lambda: "pool")
        CUDAGraph = Graph

        @staticmethod
        @contextlib.contextmanager
        def device(index):
            calls.append(("device", index))
            yield

        @staticmethod
        def Stream():
            calls.append(("Stream", calls[-1]))
            return "capture-stream"

        @staticmethod
        @contextlib.contextmanager
        def graph(graph, pool=None, stream=None):
            calls.append(("graph", pool, stream))
            yield


    stub = types.SimpleNamespace(cuda=Cuda, __version__="stub")
    original = sys.modules.get("torch")
    sys.modules["torch"] = stub  # type: ignore[assignment]
    try:
        tg = graphs.TorchGraphs(1)
    finally:
        if original is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = original
    assert ("Stream", ("device", 1)) in calls  # made on the timer's device
    tg.capture(lambda: None, 1000)
    tg.capture(lambda: None, 1)
    assert [c for c in calls if c[0] == "graph"] == [("graph", "pool", "capture-stream")] * 2
    assert len(tg._graphs) == 2  # both kept alive, one pool between them

    def synchronizes():
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    with pytest.raises(errors.GraphCaptureError, match=r"operation not permitted when stream is capturing\. "
                                                      r"A statement that synchronizes"):
        tg.capture(synchronizes, 10)


