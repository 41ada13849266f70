"""The fake CUDA driver for tests: built here, loaded by opbench's own driver loader.

``fake_cuda.cpp`` is a C-ABI shared library that exports the driver and NVML
entry points opbench dlopens (``cuInit``, ``cuEventRecord``, ...,
``nvmlInit_v2``, ...) plus test controls (``opbench_fake_*``). ``library()``
compiles it once per content (cached in the temp directory); ``FakeCuda``
points ``opbench._C`` at it with ``_C._cuda_set_libraries(path, path)`` and
drives the controls through ctypes. Nothing of the fake is in ``opbench._C``.

Example:
    >>> fake = FakeCuda(library())            # doctest: +SKIP
    >>> fake.configure(queue_depth=64)        # doctest: +SKIP
    >>> t = opbench.engines.cuda.DeviceTimer(fake.kernel(0.5))  # doctest: +SKIP
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from opbench import _C
from opbench.engines.cpp.build import find_compiler
from opbench.errors import CompilerNotFoundError

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fake_cuda.cpp"
CSRC = HERE.parent.parent / "csrc"
_FLAGS = ["-std=c++17", "-O1", "-Wall", "-Wextra", "-shared", "-fPIC", "-pthread"]

# NVML clock-event reason bits (nvml.h), for tests that set busy_reasons.
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8

# CUresult codes the tests use.
ILLEGAL_ADDRESS = 700
LAUNCH_FAILED = 719
NOT_SUPPORTED = 801


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


class FakeCuda:
    """Controls of the fake driver at ``path`` (see fake_cuda.cpp for its behaviour)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        lib = ctypes.CDLL(self.path)
        lib.opbench_fake_set.argtypes = [ctypes.c_char_p, ctypes.c_double]
        lib.opbench_fake_set_text.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        lib.opbench_fake_launch.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_double, ctypes.c_int]
        lib.opbench_fake_fail.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.opbench_fake_stat.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_longlong)]
        lib.opbench_fake_stat.restype = ctypes.c_bool
        lib.opbench_fake_stream_create.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.opbench_fake_stream_create.restype = ctypes.c_size_t
        lib.opbench_fake_stream_records.argtypes = [ctypes.c_size_t, ctypes.c_int]
        lib.opbench_fake_stream_records.restype = ctypes.c_longlong
        lib.opbench_fake_pending.argtypes = [ctypes.c_size_t, ctypes.c_int]
        lib.opbench_fake_pending.restype = ctypes.c_longlong
        lib.opbench_fake_set_current.argtypes = [ctypes.c_int]
        lib.cuStreamSynchronize.argtypes = [ctypes.c_size_t]
        self.lib = lib
        #: Options every ``configure`` starts from (a test suite's own defaults).
        self.defaults: dict[str, float | str] = {}

    def configure(self, **config: float | str) -> None:
        """A fresh fake (every counter zero) with ``config`` over the defaults, in use by opbench."""
        self.lib.opbench_fake_reset()
        for key, value in {**self.defaults, **config}.items():
            if isinstance(value, str):
                rc = self.lib.opbench_fake_set_text(key.encode(), value.encode())
            else:
                rc = self.lib.opbench_fake_set(key.encode(), float(value))
            if rc != 0:
                raise ValueError(f"unknown fake driver option {key!r} (or bad value {value!r})")
        _C._cuda_set_libraries(self.path, self.path)

    def launch(self, ms: float, *, stream: int = 0, kernel: int = 0, fault: int = 0) -> None:
        """Launches a kernel of ``ms`` device milliseconds; raises like torch when the launch fails."""
        rc = self.lib.opbench_fake_launch(stream, kernel, ms, fault)
        if rc != 0:
            raise RuntimeError(f"CUDA error {rc} at kernel launch")

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
        """Most commands queued behind a hold since the last call (then starts afresh)."""
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

    def pending(self, stream: int, device: int = 0) -> int:
        """Commands submitted to ``stream`` that have not run yet."""
        return int(self.lib.opbench_fake_pending(stream, device))

    def records_on(self, stream: int, device: int = 0) -> int:
        return int(self.lib.opbench_fake_stream_records(stream, device))

    def set_current(self, device: int) -> None:
        """As cudaSetDevice(device) on this thread (-1: no context current)."""
        self.lib.opbench_fake_set_current(device)


class FakeGraphs:
    """Stands in for torch.cuda.CUDAGraph capture: a replay launches the captured
    calls' device time as one kernel, plus an upload on its first replay."""

    def __init__(self, fake: FakeCuda, ms_per_call: float, upload_ms: float) -> None:
        self.fake, self.ms_per_call, self.upload_ms = fake, ms_per_call, upload_ms
        self.captured: list[int] = []
        self.prepared = 0
        self.replays = 0

    def __call__(self, device: int) -> FakeGraphs:  # as DeviceTimer._graphs_cls(device)
        return self

    def prepare(self, fn: Callable[[], None]) -> None:
        self.prepared += 1
        self.fake.set_current(0)  # torch makes its device's context current
        fn()

    def capture(self, fn: Callable[[], None], calls: int) -> Callable[[], None]:
        self.captured.append(calls)
        uploaded: list[bool] = []

        def replay() -> None:
            self.replays += 1
            self.fake.launch(self.ms_per_call * calls + (0 if uploaded else self.upload_ms))
            uploaded.append(True)

        return replay
