"""Counting a statement's memory in *this* process, which has the allocation counter.

``Timer.memory`` runs this in a process it starts with the counter preloaded
(``opbench.memory.collect``); ``pytest --opbench-mode=memory`` runs it in its
re-run session, where the statement lives (a closure over the test's fixtures).

How one repeat counts, so that only the statement's own work is in the figures:

1. warm-up: one whole window (below) of ``number`` calls, before the first repeat,
   its figures dropped;
2. two windows, of ``number`` and of ``2 * number`` calls. A window collects the
   garbage, reads CUDA's statistics, switches the counter on, runs a few settling
   calls (``min(number, 10)``: freelists the collection emptied refill), sets a mark,
   runs its calls, pauses the counter (frees still tallied), collects the garbage the
   calls left (cycles), reads CUDA's statistics again, and stops. The figures per
   call are the second window's less the first's, divided by ``number``: whatever a
   window costs once (the measuring code's own work at its edges, the settling
   calls) is the same in both and cancels, exactly. ``peak`` is the first window's:
   the most bytes live at once after its mark, above the live bytes at the mark,
   among the blocks the window allocated (CUDA's: above the window's start);
3. the switches (``opbench._C.memory``) are C functions that allocate nothing, the
   loop iterates a prepared ``itertools.repeat`` and calls the statement (Python), or
   runs the compiled C++ loop from C: opbench's own loop allocates nothing, and setup
   ran before. The garbage collector is off while the calls run, as ``timeit`` times,
   so a collection never lands in one window and not the other.

A statement that starts a process while counted (``fork``, ``subprocess``) raises
MemoryCountError: the other process's allocations are not counted.

Example (in a process started with ``counter.preload_env()``)::

    counts = count(python_calls(lambda: [0] * 100), number=100, repeats=3,
                   task_spec=TaskSpec("[0] * 100", "pass"))
"""
from __future__ import annotations

import ctypes
import functools
import gc
import itertools
import sys
from collections.abc import Callable
from typing import Any

from opbench import _C
from opbench._checks import check_count
from opbench._threads import set_torch_threads
from opbench.core.measurement import TaskSpec
from opbench.core.memory import MemoryCounts
from opbench.errors import MemoryCountError
from opbench.memory import counter
from opbench.memory import cuda as _cuda

__all__ = ["Calls", "count", "count_timer", "cpp_calls", "python_calls"]

_SOURCES = ("python", "native", "host")
# Calls a window makes before its mark: they refill what the collection before it emptied
# (CPython's freelists), so the peak is the calls' own; they cancel in the difference.
_SETTLE = 10


def _loop(fn: Callable[[], Any], calls: Any) -> None:
    for _ in calls:
        fn()


class Calls:
    """The statement's calls, as a count drives them: ``batch(n)`` (a zero-argument
    callable making ``n`` calls, made before the window and allocating nothing of its
    own; it returns a status, truthy on a failure ``check`` reports), ``close()``."""

    def batch(self, n: int) -> Callable[[], Any]:
        raise NotImplementedError

    def check(self, status: Any) -> None:
        """Raises the statement's error when a batch failed."""

    def close(self) -> None:
        """Releases what the calls held (a C++ setup's frame)."""


class _PythonCalls(Calls):
    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn = fn

    def batch(self, n: int) -> Callable[[], Any]:
        return functools.partial(_loop, self._fn, itertools.repeat(None, n))


def python_calls(fn: Callable[[], Any]) -> Calls:
    """A zero-argument callable's calls (a Python statement: ``engine.as_callable()``)."""
    return _PythonCalls(fn)


class _CppCalls(Calls):
    def __init__(self, engine: Any) -> None:
        from opbench.engines.cpp.engine import _Library

        self._lib = _Library(engine.library_path())
        session = self._lib.open()
        if not session:
            raise MemoryError("could not allocate the C++ timer's session")
        self._session = int(session)
        self._run = ctypes.cast(self._lib.run, ctypes.c_void_p).value or 0  # called from C

    def batch(self, n: int) -> Callable[[], Any]:
        return functools.partial(_C.memory.run_cpp, self._run, self._session, n)

    def check(self, status: Any) -> None:
        if status:
            message = self._lib.error(self._session).decode(errors="replace")
            raise RuntimeError(f"C++ statement threw: {message}")

    def close(self) -> None:
        if self._session:
            self._lib.close(self._session)
            self._session = 0


def cpp_calls(engine: Any) -> Calls:
    """A compiled C++ Timer's calls (``CppEngine``): setup runs at the first call, and
    the loop runs from C."""
    return _CppCalls(engine)


def _window(settle: Callable[[], Any], batch: Callable[[], Any],
            cuda: _cuda.CudaStats | None) -> _Window:
    """One window (module doc)."""
    mem = _C.memory
    cuda_start = cuda_end = None
    # A trace function (coverage, a debugger) makes CPython create a frame object per
    # call, an allocation of the tracer's, not the statement's: none runs in the window.
    tracer = sys.gettrace()
    sys.settrace(None)
    gc.collect()
    if cuda is not None:
        cuda_start = cuda.read()
        cuda.reset_peak()
    gc.disable()
    try:
        mem.begin()
        status = settle()
        mem.mark()
        status = status or batch()
        mem.pause()
        gc.collect()
        if cuda is not None:
            cuda_end = cuda.read()
    finally:
        mem.stop()
        gc.enable()
        sys.settrace(tracer)
    return _Window(mem.read(), cuda_start, cuda_end, status)


class _Window:
    """What one window counted: the counter's tallies, CUDA's statistics at its start and
    end, and the batch's status."""

    def __init__(self, tallies: dict[str, Any], cuda_start: dict[str, int] | None,
                 cuda_end: dict[str, int] | None, status: Any) -> None:
        self.tallies, self.cuda_start, self.cuda_end = tallies, cuda_start, cuda_end
        self.status = status

    def figures(self, source: str) -> dict[str, int]:
        if source == "cuda":
            assert self.cuda_start is not None and self.cuda_end is not None
            return _cuda.figures(self.cuda_start, self.cuda_end)
        t, mark = self.tallies["now"][source], self.tallies["mark"][source]
        return {"allocations": t["allocations"], "bytes": t["bytes"],
                "peak": t["peak"] - mark["live"], "growth": t["live"]}


def _difference(short: _Window, long: _Window, source: str) -> dict[str, int]:
    """The counted calls' figures: the long window's less the short one's (peak: the
    short window's own)."""
    a, b = short.figures(source), long.figures(source)
    return {field: a[field] if field == "peak" else b[field] - a[field] for field in a}


def count(calls: Calls, *, number: int, repeats: int, task_spec: TaskSpec,
          cuda: bool | None = None, info: dict[str, Any] | None = None) -> MemoryCounts:
    """``repeats`` pairs of windows of ``calls`` (module doc), ``number`` calls counted in
    each.

    ``cuda``: True to require CUDA figures, False for none, None (default) for CUDA
    figures when the statement used CUDA by the end of its warm-up.

    Raises:
        ValueError: ``number`` or ``repeats`` not a positive int.
        MemoryUnavailableError: no counter here, or CUDA required and absent.
        MemoryCountError: the statement started a process while counted.
        the statement's own exception.
    """
    check_count("number", number)
    check_count("repeats", repeats)
    interposing = counter.attach()
    sources = _SOURCES if interposing else ("python",)
    stats = None

    settling = min(number, _SETTLE)

    def window(n: int) -> _Window:
        w = _window(calls.batch(settling), calls.batch(n), stats)
        calls.check(w.status)
        _check_tallies(w.tallies, task_spec)
        return w

    window(number)  # warm-up
    stats = _cuda.find(cuda)
    if stats is not None:
        sources = (*sources, "cuda")
    totals: dict[str, dict[str, list[int]]] = {s: {} for s in sources}
    for _ in range(repeats):
        short, long = window(number), window(2 * number)
        for source in sources:
            for field, value in _difference(short, long, source).items():
                totals[source].setdefault(field, []).append(value)
    facts: dict[str, Any] = {"memory_counter": "preloaded" if interposing
                             else "python objects only"}
    if stats is not None:
        facts["cuda_devices"] = stats.devices
    return MemoryCounts(number_per_run=number,
                        counts={s: {f: tuple(v) for f, v in d.items()} for s, d in totals.items()},
                        task_spec=task_spec, info={**facts, **(info or {})})


def _check_tallies(tallies: dict[str, Any], task_spec: TaskSpec) -> None:
    if tallies["processes"]:
        raise MemoryCountError(
            f"{task_spec.title}: the statement started {tallies['processes']} process(es) (fork, "
            "subprocess, multiprocessing) while its memory was counted; their allocations are not "
            "counted, so the figures would miss that work. Start processes in setup, or count "
            "the other process's work as a statement of its own.")
    if tallies["failed"]:
        raise MemoryCountError(f"{task_spec.title}: the allocation counter could not map memory "
                               f"for {tallies['failed']} block(s): the machine is out of memory")


def count_timer(timer: Any, *, number: int, repeats: int, cuda: bool | None = None) -> MemoryCounts:
    """A Timer's statement counted here: a Python statement through its engine's callable
    (setup run once, now), a C++ statement through its compiled loop (a session of its
    own, closed afterwards: setup's frame unwound); in the Timer's thread setting."""
    from opbench.engines.cpp.engine import CppEngine

    engine = timer.engine
    with set_torch_threads(timer.task_spec.num_threads):
        calls = cpp_calls(engine) if isinstance(engine, CppEngine) else python_calls(
            engine.as_callable())
        try:
            return count(calls, number=number, repeats=repeats, task_spec=timer.task_spec,
                         cuda=cuda)
        finally:
            calls.close()
