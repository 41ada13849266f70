"""CUDA device time: events around the statement's GPU work, not a host clock.

torch.utils.benchmark synchronizes the device and reads a host clock, so the
launch overhead and the synchronize itself are in every figure. ``DeviceTimer``
(``device_timer.py``) brackets the calls with CUDA events recorded from
opbench's native loop (``opbench._C``), so the figure is what the GPU spent
between them:

* ``mode="events"``: one event pair around each block of calls. Blocks are
  queued behind a host-released wait (the *launch hold*, as nvbench's
  blocking kernel) so the GPU runs them back to back even when launching
  takes longer than the kernel. Held blocks are kept to a few dozen launches
  (a launch queue holds about a thousand commands; a host queueing more
  blocks), so a timed window of ``number`` calls is the sum of several blocks.
* ``mode="per_iteration"``: an event pair around every call, a true per-call
  distribution (``per_call_times``). Event timestamps come in steps (the
  *event quantum*, about 0.5 us): the windows are dequantised so that their
  median is unbiased (``quantum.py``), the record-to-launch offset is
  subtracted, and opbench warns (``ResolutionWarning``) when the median window
  is under 20 steps.
* ``mode="graph"``: the statement captured once into a CUDA graph of K calls
  (at most 1,000, chosen by time as triton's ``do_bench_cudagraph`` does:
  about 20 ms per replay), replayed ``ceil(number / K)`` times inside one
  timed window: kernel time without launch overhead (``graphs.py``).

``cache="cold"`` reads a buffer twice the device's L2 size before every call,
outside the timed window (the events are recorded after the flush), with a
small kernel the driver compiles from PTX: the L2 is left full of clean lines,
and the statement's own dirty lines are written back during the flush, so each
timed call starts from a clean, cold L2. (Writing the buffer instead, as
triton's ``zero_`` does, leaves dirty lines whose write-back lands in the next
timed call.) Where the read kernel cannot load, the buffer is written and
``info["l2_flush"]`` says so. The flush has to sit between calls, so cold mode
always times per call, whatever the mode; ``timeit`` returns the sum.

What a real GPU does that a naive loop trips over, and what happens here:

* Kernels load lazily on their first launch (CUDA >= 12.2), and loading waits
  for the queued work, which behind the hold never runs. So the first call of
  every statement (and the first replay of every graph) runs alone, unheld and
  synchronized, before any held block. ``timeit(1)`` as the very first call
  times that call: ``Timer(record_first_call=True)`` reports the cold call.
  ``warm_up()`` runs it (and counts the statement's launches) so that a
  block-size search sees warm calls only.
* The launch queue is counted in launches: one warm call is captured once
  (through torch's own ``CUDAGraph`` when torch is in use, so its random-number
  state and allocator know of it; nothing runs) to count what it queues, and
  held blocks are sized in launches (``info["launches_per_call"]``). A call whose
  launches cannot be counted is sized by its host time, which bounds them; and
  any held block is queued within 2 ms of host time (kHeldHostNs), since the held wait
  also stalls the streams that share its hardware connection.
* A free that synchronises inside a held block (a DeviceTimer dropped by the
  statement, torch emptying its cache) cannot finish until the block is
  released: opbench's own frees wait until no block is held, the garbage
  collector is paused while a block is queued, and the watchdog releases a
  stalled block after a few hundred calls' worth of host time; a block that
  stalled once is redone at the same size, and only a second stall makes blocks
  smaller.
* The clocks (``clocks.py``): NVML changes its readings on a millisecond
  scale and the clock ramps up from idle over milliseconds, so clocks are read
  by a *clock probe* off the timed path, which judges every sample window: the
  first samples of each measurement have a probe of their own, later ones are
  judged by a reading under a second old. A reading under ``THROTTLE_THRESHOLD``
  of the maximum (75%, nvbench's default) with a throttling reason marks the
  windows as throttled and warns (``ThrottleWarning``); the power limit alone
  is ``power_capped``; a low clock read while a launch-bound statement left
  the GPU half idle is not judged, and ``unjudged_windows`` says why.
* The context: each call into the driver pushes the device's primary context
  and pops it afterwards, and the default stream is torch's current stream of
  the timer's own device (``devices.py``), so ``DeviceTimer(device=1)`` neither
  changes torch's current device nor records on device 0's stream.
* The legacy default stream: holding it would also hold every blocking stream
  of the context (pin-memory threads, CuPy). When torch's current stream is
  the legacy stream, the statement runs on a private non-blocking stream
  (``torch.cuda.stream``) that waits for the legacy stream before and is
  waited for after; ``info["stream"]`` says which. A statement whose work does
  not follow torch's stream (CuPy, numba, a raw launch on stream 0) launches
  nothing there: it is timed on the legacy stream, where that work runs, and a
  statement that launches nothing on a stream torch or the caller chose is
  refused, never timed as about zero.

The CUDA driver (``libcuda.so.1``) and NVML (``libnvidia-ml.so.1``) are loaded
at first use: importing this package needs neither, nor torch. Errors name the
missing piece (``opbench.errors.CudaError``). Device timing has not yet been
validated on hardware: its tests run against a fake driver (tests/fake_cuda).

Example (on a machine with an NVIDIA GPU):
    >>> import torch, opbench.engines.cuda
    >>> x = torch.randn(4096, 4096, device="cuda")  # doctest: +SKIP
    >>> t = opbench.engines.cuda.DeviceTimer(lambda: x @ x, mode="events")  # doctest: +SKIP
    >>> seconds = t.timeit(10) / 10  # device seconds per matmul  # doctest: +SKIP
    >>> t.metadata()["clock"]  # doctest: +SKIP
    'cuda-events (warm L2)'
"""
from __future__ import annotations

from opbench.engines.cuda.clocks import THROTTLE_THRESHOLD
from opbench.engines.cuda.device_timer import CACHES, MODES, DeviceTimer
from opbench.engines.cuda.events import Event
from opbench.errors import CudaError

__all__ = ["CACHES", "MODES", "THROTTLE_THRESHOLD", "CudaError", "DeviceTimer", "Event"]
