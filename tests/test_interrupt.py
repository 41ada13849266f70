"""Ctrl-C reaches every timing loop: a real SIGINT sent to a child process that is deep
inside a measurement that would otherwise run for hours.

Each case starts a child that prints READY and then times a statement
`number` times where the whole block would take about 10^4 s; the test waits
for READY, lets the loop run, sends SIGINT, and expects the child to report a
KeyboardInterrupt raised by the loop, with torch's thread count restored.
No wall-clock threshold is asserted: a child that ignored the signal would
run until the (generous) timeout and fail the test that way.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# Printed by the child; the parent checks each.
_CHILD = textwrap.dedent("""
    import sys, time, torch
    import opbench
    torch.set_num_threads(3)
    {setup}
    timer = opbench.Timer({stmt}, num_threads=1{extra})
    print("READY", flush=True)
    try:
        timer.timeit({number})
    except KeyboardInterrupt:
        print("INTERRUPTED threads=%d" % torch.get_num_threads(), flush=True)
        sys.exit(0)
    print("FINISHED", flush=True)
""")


def _interrupt(stmt: str, number: int, *, setup: str = "", extra: str = "",
               wait: float = 1.0, timeout: float = 120.0) -> str:
    code = _CHILD.format(stmt=stmt, number=number, setup=setup, extra=extra)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "READY", (line, proc.stderr.read() if proc.stderr else "")
        time.sleep(wait)  # well inside the loop (the warm-up block alone takes minutes)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return line + out + err


@pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery to a child is POSIX")
def test_native_loop_stops_on_ctrl_c():
    # functools.partial of a C function is a C callable: it runs in _C.time_call.
    # 1 ms per call, 10^7 calls: ~3 hours uninterrupted.
    out = _interrupt("functools.partial(time.sleep, 0.001)", 10_000_000, setup="import functools")
    assert "INTERRUPTED threads=3" in out, out


@pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery to a child is POSIX")
def test_native_loop_stops_on_ctrl_c_for_fast_statements():
    # A cheap C callable: the poll's stride grows to thousands of calls and must
    # still come back to check every few milliseconds.
    out = _interrupt("[].copy", 10**12)
    assert "INTERRUPTED threads=3" in out, out


@pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery to a child is POSIX")
def test_python_template_loop_stops_on_ctrl_c():
    out = _interrupt('"time.sleep(0.001)"', 10_000_000, extra=', globals={"time": time}')
    assert "INTERRUPTED threads=3" in out, out


@pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery to a child is POSIX")
def test_cuda_loop_stops_on_ctrl_c():
    # The device-timing loop against the fake driver (tests/fake_cuda), through
    # opbench's own loader. The statement is a ctypes function, a C callable, so
    # no bytecode runs inside the loop: only its own signal poll can stop it.
    from fake_cuda import library

    setup = (
        "import ctypes, functools; from opbench import _C\n"
        f"fake = ctypes.CDLL({str(library())!r}); fake.opbench_fake_reset()\n"
        f"_C._cuda_set_libraries({str(library())!r}, {str(library())!r})\n"
        "fake.opbench_fake_launch.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_double, ctypes.c_int]"
    )
    out = _interrupt("functools.partial(fake.opbench_fake_launch, 0, 0, 0.01, 0)", 10**12,
                     setup=setup, extra=', device_timing="events"')
    assert "INTERRUPTED threads=3" in out, out


def _cpp_interrupt(stmt: str, setup: str, cache) -> str:
    # The library is compiled and cached before READY, so the signal lands in the
    # statement's loop, not in the compiler.
    prepare = (f"import os; os.environ['OPBENCH_CACHE_DIR'] = {str(cache)!r}\n"
               "from opbench.engines.cpp.engine import CppEngine\n"
               f"CppEngine(stmt={stmt!r}, setup={setup!r}).prepare()")
    return _interrupt(repr(stmt), 10**15, setup=prepare,
                      extra=f", setup={setup!r}, language='c++'")


@pytest.mark.skipif(os.name != "posix", reason="SIGINT delivery to a child is POSIX")
@pytest.mark.skipif(not any(shutil.which(c) for c in ("c++", "g++", "clang++")),
                    reason="no C++ compiler on PATH")
@pytest.mark.parametrize("stmt", [
    "sink = sink + 1;",  # about a nanosecond: strides of a million runs
    "auto t0 = opbench::now_ns(); while (opbench::now_ns() - t0 < 1000000) {}",  # 1 ms
], ids=["ns", "ms"])
def test_cpp_statement_loop_stops_on_ctrl_c(stmt, tmp_path):
    # The compiled loop runs with the GIL released, where Python cannot run its
    # handler: it must come back to Python every few milliseconds of loop time.
    out = _cpp_interrupt(stmt, "volatile long sink = 0;", tmp_path)
    assert "INTERRUPTED threads=3" in out, out
    assert not list(tmp_path.rglob(".build-*"))
