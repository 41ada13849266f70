"""CUDA graph capture through torch: graph mode's graphs, and counting a call's launches.

torch must know of a capture of torch work: its random-number generators
register with the graph (a random op under a capture torch did not begin
raises), and its caching allocator serves the capture from a pool of its own.
So both captures here go through ``torch.cuda.CUDAGraph``:

* ``TorchGraphs`` captures graph mode's statement (``graph_calls(seconds)`` calls
  per graph, about 20 ms a replay as triton's ``do_bench_cudagraph`` picks them,
  at most 1,000) on a capture stream of the timer's own device, every graph of a
  timer sharing one memory pool.
* ``count_launches`` captures one call on the timing stream (torch's current
  stream) and counts the capture's nodes through the driver before it ends: the
  launches of the call on that stream and on the side streams it forks from it.

Example (on a machine with an NVIDIA GPU):
    >>> graphs = TorchGraphs(0)  # doctest: +SKIP
    >>> replay = graphs.capture(lambda: x.add_(1), graph_calls(2e-6))  # doctest: +SKIP
    >>> graph_calls(2e-6), graph_calls(1e-3)
    (1000, 20)
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from opbench.engines.cuda import devices
from opbench.errors import CudaError, GraphCaptureError

__all__ = ["GRAPH_MAX_CALLS", "TorchGraphs", "count_launches", "graph_calls"]

# Graph mode: calls per graph as triton's do_bench_cudagraph picks them (a
# replay of about 20 ms), at most 1,000 (capture time and memory grow with it).
GRAPH_REPLAY_S = 0.020
GRAPH_MAX_CALLS = 1000


def graph_calls(seconds_per_call: float) -> int:
    """Calls captured in one graph: a replay of about 20 ms, 1 to 1,000 calls.

    >>> graph_calls(2e-6), graph_calls(1e-3), graph_calls(0.5), graph_calls(0.0)
    (1000, 20, 1, 1000)
    """
    if seconds_per_call <= 0:
        return GRAPH_MAX_CALLS
    # The epsilon keeps an exact ratio (0.02 / 2e-5) from flooring one call short.
    return max(1, min(GRAPH_MAX_CALLS, int(GRAPH_REPLAY_S / seconds_per_call * (1 + 1e-9))))


class TorchGraphs:
    """CUDA graph capture through torch (its allocator must own the graph's memory).

    The capture stream is made on the timer's device (``torch.cuda.graph``
    otherwise makes one on whichever device captures first), and every graph
    of this timer (the 1-call and the K-call one) shares one memory pool.
    """

    def __init__(self, device: int) -> None:
        torch = self._torch = devices.require_torch("device_timing='graph'")
        self._device = device
        try:
            with torch.cuda.device(device):
                self._stream = torch.cuda.Stream()
            self._pool = torch.cuda.graph_pool_handle()
        except RuntimeError as e:
            raise CudaError(f"graph mode could not set up capture on CUDA device {device}: {e}") from e
        self._graphs: list[Any] = []  # alive as long as their replays may be called

    def prepare(self, fn: Callable[[], Any]) -> None:
        """Lazy initialisation (cuBLAS handles, allocator pools) done before capture,
        on the capture stream, as torch documents for graph capture."""
        torch = self._torch
        with torch.cuda.device(self._device):
            side = self._stream
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    fn()
            torch.cuda.current_stream().wait_stream(side)

    def capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], Any]:
        """``replay`` of a graph of ``calls`` calls of ``fn``."""
        torch = self._torch
        try:
            with torch.cuda.device(self._device):
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self._pool, stream=self._stream):
                    for _ in range(calls):
                        fn()
        except RuntimeError as e:
            raise GraphCaptureError(
                f"graph mode could not capture the statement into a CUDA graph: {e}. A statement that "
                "synchronizes (.item(), .cpu(), torch.cuda.synchronize(), a blocking copy) cannot be "
                "captured: time it with device_timing='events'") from e
        self._graphs.append(graph)
        return graph.replay  # type: ignore[no-any-return]


def count_launches(torch_cuda: Any, ctx: Any, fn: Callable[[], Any], stream: int) -> int | None:
    """Launches one call of ``fn`` queues on ``stream`` (torch's current stream) and the side
    streams it forks, captured by torch (nothing runs); recorded in ``ctx`` for sizing held
    blocks. None when they cannot be counted (``ctx.launch_count_problem`` says why)."""
    graph = torch_cuda.CUDAGraph()
    try:
        graph.capture_begin(capture_error_mode="relaxed")
    except (RuntimeError, TypeError) as e:  # TypeError: a torch whose capture_begin has no mode
        return ctx.set_launches(0, f"torch could not begin a capture on the timed stream: {e}")  # type: ignore[no-any-return]
    nodes = None
    problem = ""
    try:
        fn()
        nodes = ctx.capture_nodes(stream)
        if nodes is None:
            problem = "this driver cannot count a capture's nodes (cuStreamGetCaptureInfo)"
    except Exception as e:  # KeyboardInterrupt and SystemExit are the user's: they propagate
        problem = f"the statement cannot run under stream capture ({type(e).__name__}: {e})"
    finally:
        with warnings.catch_warnings():  # torch warns of an empty graph: that is ctx's to say
            warnings.simplefilter("ignore")
            try:
                graph.capture_end()
            except RuntimeError as e:
                problem = problem or f"capturing one call failed: {e}"
            reset = getattr(graph, "reset", None)
            if reset is not None:
                reset()
    return ctx.set_launches(nodes or 0, problem)  # type: ignore[no-any-return]
