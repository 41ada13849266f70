"""The fake CUDA driver for tests: built here, loaded by opbench's own driver loader.

``fake_cuda.cpp`` is a C-ABI shared library that exports the driver and NVML
entry points opbench dlopens (``cuInit``, ``cuEventRecord``, ...,
``nvmlInit_v2``, ...) plus test controls (``opbench_fake_*``). ``library()``
compiles it once per content (cached in the temp directory); ``FakeCuda``
points ``opbench._C`` at it with ``_C._cuda_set_libraries(path, path)`` and
drives the controls through ctypes. Nothing of the fake is in ``opbench._C``.

``FakeTorch`` stands in for ``torch`` (its ``cuda`` module: streams, the current
stream and device, ``CUDAGraph`` capture and replay, the caching allocator's
``empty_cache``, random-number ops) on the same fake driver, through the driver's
own entry points: ``Stream.wait_stream`` records an event and makes the other
stream wait for it, graphs are captured by the driver and launched as one
command, and a driver error raises as torch's ``AcceleratorError`` does. opbench's
real ``torch.cuda`` code paths (graph mode's capture, the private stream, the
launch count) run against it.

Example:
    >>> fake = FakeCuda(library())            # doctest: +SKIP
    >>> fake.configure(queue_depth=64)        # doctest: +SKIP
    >>> t = opbench.engines.cuda.DeviceTimer(fake.kernel(0.5))  # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import importlib
import os
import subprocess
import tempfile
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from opbench import _C, errors
from opbench.engines.cpp.build import find_compiler
from opbench.errors import CompilerNotFoundError

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fake_cuda.cpp"
CSRC = HERE.parent.parent / "csrc"
_FLAGS = ["-std=c++17", "-O1", "-Wall", "-Wextra", "-shared", "-fPIC", "-pthread"]

# NVML clock-event reason bits (nvml.h), for tests that set busy_reasons.
GPU_IDLE = 0x1
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
HW_THERMAL_SLOWDOWN = 0x40

# CUresult codes the tests use.
ILLEGAL_ADDRESS = 700
LAUNCH_FAILED = 719
NOT_SUPPORTED = 801

# The fake's defaults that make device times exact, for tests that assert them:
# no tick jitter or phase, no launch latency between kernels, no clock ramp
# slowing the first kernels, a frozen host clock, no NVML. Each behaviour's own
# tests turn it back on (the fake's defaults are the hardware's).
EXACT = {"host_real_time": 0, "nvml_clocks": 0, "dependent_gap_ns": 0, "clock_ramp_ns": 0,
         "event_jitter_ns": 0, "event_phase_ns": 0, "graph_node_gap_ns": 0}


def library() -> Path:
    """The compiled fake, built on first use and cached by the hash of its inputs.

    Skips the calling test, with the reason, where no C++ compiler exists.
    """
    try:
        cxx = find_compiler()
    except CompilerNotFoundError as e:
        pytest.skip(f"the fake CUDA driver is compiled by the tests: {e}")
    digest = hashlib.sha256()
    for part in (cxx, " ".join(_FLAGS), SOURCE.read_text(), (CSRC / "detail" / "cuda_driver.h").read_text()):
        digest.update(part.encode())
        digest.update(b"\0")
    cache = Path(tempfile.gettempdir()) / "opbench-fake-cuda"
    cache.mkdir(exist_ok=True)
    target = cache / f"libopbench-fake-cuda-{digest.hexdigest()[:16]}.so"
    if not target.exists():
        # Built under a private name, then renamed: concurrent test workers never
        # load a half-written library.
        tmp = cache / f".{target.name}.{os.getpid()}.tmp"
        proc = subprocess.run([cxx, *_FLAGS, f"-I{CSRC}", str(SOURCE), "-o", str(tmp)],
                              check=False, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building the fake CUDA driver failed:\n{proc.stderr}")
        os.replace(tmp, target)
    return target


class AcceleratorError(RuntimeError):
    """What torch raises for a CUDA error (torch.AcceleratorError, a RuntimeError)."""


_vp = ctypes.c_void_p
_sz = ctypes.c_size_t


class FakeCuda:
    """Controls of the fake driver at ``path`` (see fake_cuda.cpp for its behaviour)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        lib = ctypes.CDLL(self.path)
        lib.opbench_fake_set.argtypes = [ctypes.c_char_p, ctypes.c_double]
        lib.opbench_fake_set_text.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        lib.opbench_fake_launch.argtypes = [_sz, ctypes.c_int, ctypes.c_double, ctypes.c_int]
        lib.opbench_fake_fail.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.opbench_fake_stat.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_longlong)]
        lib.opbench_fake_stat.restype = ctypes.c_bool
        lib.opbench_fake_stream_create.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.opbench_fake_stream_create.restype = _sz
        lib.opbench_fake_stream_records.argtypes = [_sz, ctypes.c_int]
        lib.opbench_fake_stream_records.restype = ctypes.c_longlong
        lib.opbench_fake_stream_connection.argtypes = [_sz, ctypes.c_int]
        lib.opbench_fake_pending.argtypes = [_sz, ctypes.c_int]
        lib.opbench_fake_pending.restype = ctypes.c_longlong
        lib.opbench_fake_set_current.argtypes = [ctypes.c_int]
        lib.opbench_fake_wait_stream.argtypes = [_sz, _sz]
        lib.opbench_fake_kernel_log.argtypes = [ctypes.POINTER(ctypes.c_longlong)] * 2 + [ctypes.c_longlong]
        lib.opbench_fake_kernel_log.restype = ctypes.c_longlong
        lib.cuStreamSynchronize.argtypes = [_sz]
        lib.cuStreamBeginCapture_v2.argtypes = [_sz, ctypes.c_int]
        lib.cuStreamEndCapture.argtypes = [_sz, ctypes.POINTER(_vp)]
        lib.cuStreamIsCapturing.argtypes = [_sz, ctypes.POINTER(ctypes.c_int)]
        lib.cuGraphInstantiateWithFlags.argtypes = [ctypes.POINTER(_vp), _vp, ctypes.c_ulonglong]
        lib.cuGraphLaunch.argtypes = [_vp, _sz]
        lib.cuGraphDestroy.argtypes = [_vp]
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(_sz), _sz]  # as tests/fake_cuda/allocator.py has it
        lib.cuMemFree_v2.argtypes = [_sz]
        self.lib = lib
        #: Options every ``configure`` starts from (a test suite's own defaults).
        self.defaults: dict[str, float | str] = {}

    def configure(self, **config: float | str) -> None:
        """A fresh fake (every counter zero) with ``config`` over the defaults, in use by opbench."""
        self.lib.opbench_fake_reset()
        self.set(**{**self.defaults, **config})
        _C._cuda_set_libraries(self.path, self.path)

    def set(self, **config: float | str) -> None:
        """Changes options of the running fake (nothing is reset), as a GPU that starts throttling."""
        for key, value in config.items():
            if isinstance(value, str):
                rc = self.lib.opbench_fake_set_text(key.encode(), value.encode())
            else:
                rc = self.lib.opbench_fake_set(key.encode(), float(value))
            if rc != 0:
                raise ValueError(f"unknown fake driver option {key!r} (or bad value {value!r})")

    def check(self, rc: int, what: str) -> None:
        """Raises as torch does when a driver call returned ``rc`` != 0."""
        if rc != 0:
            raise AcceleratorError(f"CUDA error {rc} at {what}")

    def launch(self, ms: float, *, stream: int = 0, kernel: int = 0, fault: int = 0) -> None:
        """Launches a kernel of ``ms`` device milliseconds; raises like torch when the launch fails."""
        self.check(self.lib.opbench_fake_launch(stream, kernel, ms, fault), "kernel launch")

    def kernel(self, ms: float, *, per_call: int = 1, stream: int = 0, kernel: int = 0) -> Callable[[], None]:
        """A statement launching ``per_call`` kernels of ``ms`` ms each (kernel ids from ``kernel``)."""

        def statement() -> None:
            for i in range(per_call):
                self.launch(ms, stream=stream, kernel=kernel + i if kernel else 0)

        return statement

    def synchronize(self, stream: int = 0) -> int:
        """cuStreamSynchronize on the current context, as ``.item()`` would do; the CUresult."""
        return int(self.lib.cuStreamSynchronize(stream))

    def stat(self, name: str) -> int:
        out = ctypes.c_longlong()
        if not self.lib.opbench_fake_stat(name.encode(), ctypes.byref(out)):
            raise KeyError(name)
        return out.value

    def max_queued(self) -> int:
        """Most commands queued behind a hold since the last call (then starts afresh, as
        does the longest stall of another stream's command behind a connection)."""
        value = self.stat("max_queued")
        self.lib.opbench_fake_reset_max_queued()
        return value

    def fail(self, function: str, code: int) -> None:
        """Makes entry point ``function`` return ``code`` (0 clears)."""
        self.lib.opbench_fake_fail(function.encode(), code)

    def stream(self, device: int = 0, *, blocking: bool = False) -> int:
        """A new stream: non-blocking as torch makes them, or blocking (cuStreamCreate's
        default), which synchronises implicitly with the legacy stream."""
        return int(self.lib.opbench_fake_stream_create(device, int(blocking)))

    def connection(self, stream: int, device: int = 0) -> int:
        """The hardware connection ``stream`` runs on (streams take them in turn)."""
        return int(self.lib.opbench_fake_stream_connection(stream, device))

    def pending(self, stream: int, device: int = 0) -> int:
        """Commands submitted to ``stream`` that have not run yet."""
        return int(self.lib.opbench_fake_pending(stream, device))

    def records_on(self, stream: int, device: int = 0) -> int:
        return int(self.lib.opbench_fake_stream_records(stream, device))

    def set_current(self, device: int) -> None:
        """As cudaSetDevice(device) on this thread (-1: no context current)."""
        self.lib.opbench_fake_set_current(device)

    def kernel_log(self) -> list[tuple[int, int]]:
        """(start, end) device nanoseconds of device 0's kernels since the last call, as a
        profiler's trace shows them."""
        n = 1 << 16
        starts, ends = (ctypes.c_longlong * n)(), (ctypes.c_longlong * n)()
        got = self.lib.opbench_fake_kernel_log(starts, ends, n)
        return [(starts[i], ends[i]) for i in range(got)]


# -- torch.cuda on the fake driver ------------------------------------------------------


class FakeStream:
    """A torch.cuda.Stream: ``cuda_stream`` (the handle), ``wait_stream`` through the driver."""

    def __init__(self, torch: FakeTorchCuda, handle: int, device: int) -> None:
        self._torch, self.cuda_stream, self.device_index = torch, handle, device
        self.waited_for: list[int] = []

    def wait_stream(self, other: FakeStream) -> None:
        """torch records an event on ``other`` and makes this stream wait for it; a sticky
        error raises AcceleratorError here, as torch's does."""
        self.waited_for.append(other.cuda_stream)
        with self._torch._on_device(self.device_index):
            self._torch.fake.check(self._torch.fake.lib.opbench_fake_wait_stream(
                self.cuda_stream, other.cuda_stream), "wait_stream")

    def synchronize(self) -> None:
        with self._torch._on_device(self.device_index):
            self._torch.fake.check(self._torch.fake.synchronize(self.cuda_stream), "synchronize")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeStream) and other.cuda_stream == self.cuda_stream

    def __hash__(self) -> int:
        return hash(self.cuda_stream)


class FakeCUDAGraph:
    """torch.cuda.CUDAGraph: captures the current stream through the driver and replays
    the graph as one launch. Captures it began have torch's random-number state
    registered (``FakeTorchCuda.random`` works inside them); any other capture does not."""

    def __init__(self, torch: FakeTorchCuda) -> None:
        self._torch = torch
        self._exec: int | None = None
        self._stream = 0

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        torch, fake = self._torch, self._torch.fake
        self._stream = torch.streams[torch.current]
        if self._stream == 0:
            raise RuntimeError("CUDA graphs must be captured on a non-default stream")
        mode = {"global": 0, "thread_local": 1, "relaxed": 2}[capture_error_mode]
        with torch._on_device(torch.current):
            fake.check(fake.lib.cuStreamBeginCapture_v2(self._stream, mode), "capture_begin")
        torch.registered.add(self._stream)

    def capture_end(self) -> None:
        torch, fake = self._torch, self._torch.fake
        torch.registered.discard(self._stream)
        graph, exec_ = _vp(), _vp()
        with torch._on_device(torch.current):
            rc = fake.lib.cuStreamEndCapture(self._stream, ctypes.byref(graph))
            fake.check(rc, "capture_end")
            fake.check(fake.lib.cuGraphInstantiateWithFlags(ctypes.byref(exec_), graph, 0), "instantiate")
            fake.lib.cuGraphDestroy(graph)
        self._exec = exec_.value
        torch.graphs_captured += 1

    def replay(self) -> None:
        torch = self._torch
        torch.replays += 1
        with torch._on_device(torch.current):
            torch.fake.check(torch.fake.lib.cuGraphLaunch(self._exec, torch.streams[torch.current]), "replay")

    def reset(self) -> None:
        self._exec = None


class FakeTorchCuda:
    """``torch.cuda`` on the fake driver, as opbench uses it: the current device and
    stream, new (non-blocking) streams, ``torch.cuda.stream(s)``, ``device(i)``,
    graphs (``CUDAGraph``, ``graph(...)``, ``graph_pool_handle``), ``synchronize``,
    ``empty_cache`` (a free that synchronises) and ops: ``kernel`` and ``random``."""

    def __init__(self, fake: FakeCuda, streams: dict[int, int] | None = None, current: int = 0) -> None:
        self.fake, self.current = fake, current
        self.streams = dict(streams if streams is not None else {0: 0})
        self.made: list[FakeStream] = []
        self.registered: set[int] = set()  # streams whose capture torch began
        self.graphs_captured = 0
        self.replays = 0
        self.CUDAGraph = lambda: FakeCUDAGraph(self)
        self._cached: list[int] = []
        fake.set_current(current)  # torch has initialised CUDA on its current device

    @contextlib.contextmanager
    def _on_device(self, index: int) -> Iterator[None]:
        # torch makes its device's primary context current before any runtime call
        self.fake.set_current(index)
        yield

    def is_available(self) -> bool:
        return True

    def current_device(self) -> int:
        return self.current

    @contextlib.contextmanager
    def device(self, index: int) -> Iterator[None]:
        before, self.current = self.current, index
        self.streams.setdefault(index, 0)
        try:
            yield
        finally:
            self.current = before

    def current_stream(self, device: int | None = None) -> FakeStream:
        index = self.current if device is None else device
        return FakeStream(self, self.streams.setdefault(index, 0), index)

    def Stream(self, device: int | None = None) -> FakeStream:
        index = self.current if device is None else device
        stream = FakeStream(self, self.fake.stream(index), index)
        self.made.append(stream)
        return stream

    @contextlib.contextmanager
    def stream(self, stream: FakeStream) -> Iterator[None]:
        index = stream.device_index
        before = self.streams.get(index, 0)
        self.streams[index] = stream.cuda_stream
        try:
            yield
        finally:
            self.streams[index] = before

    def graph_pool_handle(self) -> tuple[int, int]:
        return (0, 1)

    @contextlib.contextmanager
    def graph(self, graph: FakeCUDAGraph, pool: Any = None, stream: FakeStream | None = None,
              capture_error_mode: str = "global") -> Iterator[None]:
        self.synchronize()
        side = stream if stream is not None else self.Stream()
        with self.stream(side):
            graph.capture_begin(pool, capture_error_mode=capture_error_mode)
            try:
                yield
            finally:
                graph.capture_end()

    def synchronize(self) -> None:
        with self._on_device(self.current):
            for handle in set(self.streams.values()) | {s.cuda_stream for s in self.made}:
                self.fake.check(self.fake.synchronize(handle), "synchronize")

    def malloc(self) -> None:
        """A block for the caching allocator to hold (freed by empty_cache)."""
        ptr = _sz()
        with self._on_device(self.current):
            self.fake.check(self.fake.lib.cuMemAlloc_v2(ctypes.byref(ptr), 1 << 20), "cudaMalloc")
        self._cached.append(ptr.value)

    def empty_cache(self) -> None:
        """Frees the cached blocks with cudaFree, which waits for the device."""
        with self._on_device(self.current):
            while self._cached:
                self.fake.check(self.fake.lib.cuMemFree_v2(self._cached.pop()), "cudaFree")

    def kernel(self, ms: float, per_call: int = 1, *, fault: Callable[[], int] | None = None,
               kernel: int = 0) -> Callable[[], None]:
        """A statement launching on torch's current stream, as torch ops do (``kernel``: the
        first of the statement's kernel ids, loaded lazily at their first launch)."""

        def statement() -> None:
            for i in range(per_call):
                self.fake.launch(ms, stream=self.streams[self.current], fault=fault() if fault else 0,
                                 kernel=kernel + i if kernel else 0)

        return statement

    def random(self, ms: float) -> Callable[[], None]:
        """A random-number op (torch.randn): under a capture torch did not begin, torch
        raises, as its Philox state is not registered with it."""

        def statement() -> None:
            stream = self.streams[self.current]
            status = ctypes.c_int()
            if stream != 0:
                self.fake.check(self.fake.lib.cuStreamIsCapturing(stream, ctypes.byref(status)),
                                "cudaStreamIsCapturing")
            if status.value and stream not in self.registered:
                raise RuntimeError("philox_cuda_state for an unexpected CUDA generator used during "
                                   "capture. In regions captured by CUDA graphs, you may only use the "
                                   "default CUDA RNG generator on the device that's current when capture "
                                   "begins.")
            self.fake.launch(ms, stream=stream)

        return statement


class FakeTorch(types.SimpleNamespace):
    """``torch`` as opbench imports it: ``cuda`` and ``__version__``."""

    def __init__(self, cuda: FakeTorchCuda) -> None:
        super().__init__(cuda=cuda, __version__="fake")


def use_fake_torch(monkeypatch: pytest.MonkeyPatch, cuda: FakeTorchCuda) -> FakeTorchCuda:
    """Makes opbench's CUDA engine see ``cuda`` as torch.cuda (torch in use, with a GPU).

    Patches wherever the engine reaches torch: the module that chooses devices and
    streams (``opbench.engines.cuda.devices``), or, in the package before it was
    split, ``opbench.engines.cuda`` itself, so the same tests run against both.
    """
    torch = FakeTorch(cuda)
    try:
        devices = importlib.import_module("opbench.engines.cuda.devices")
    except ImportError:
        devices = importlib.import_module("opbench.engines.cuda")
        monkeypatch.setattr(devices, "_torch_cuda", lambda: cuda)
        monkeypatch.setattr(devices, "_require_torch", lambda what: torch)
        return cuda
    monkeypatch.setattr(devices, "torch_cuda", lambda: cuda)
    monkeypatch.setattr(devices, "require_torch", lambda what: torch)
    return cuda


# -- fixtures --------------------------------------------------------------------------


# The fixtures: a test module imports them (``from fake_cuda import fake_fixture, ...``)
# and asks for them by name (``fake``, ``fake_library``, ``no_warnings``).


@pytest.fixture(scope="session", name="fake_library")
def fake_library_fixture() -> Path:
    return library()


@pytest.fixture(name="fake")
def fake_fixture(fake_library: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCuda]:
    """opbench._C on a fresh fake driver; ``fake.configure(**options)`` starts it afresh.

    Most tests assert device times exactly: the fake's exact options (``EXACT``) are
    the defaults here, and tests of each hardware behaviour turn theirs on.
    """
    monkeypatch.setattr(errors, "_shown", set())  # once-per-process warnings show again
    f = FakeCuda(fake_library)
    f.defaults = dict(EXACT)
    f.configure()
    # Contexts made on the fake must be released on the fake: collect what this test
    # made before switching back. Freezing the older objects keeps that collection to
    # this test's own (a full collection of a long session's heap takes ~0.6 s).
    gc.freeze()
    try:
        yield f
        gc.collect()
    finally:
        gc.unfreeze()
    _C._cuda_set_libraries()  # back to the real libcuda.so.1 (loaded on next use)


@pytest.fixture(name="no_warnings")
def no_warnings_fixture() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield
