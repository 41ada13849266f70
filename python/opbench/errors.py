"""Errors and warnings: one base class each, so one ``except`` or one filter covers opbench.

**Errors.** Every exception opbench raises on its own account derives from
``opbench.Error``. Each also keeps the built-in base that code written for
``torch.utils.benchmark`` (or for the standard library) already catches: a
bad results file is a ``ValueError``, a failed callgrind child an ``OSError``
(as torch's ``collect_callgrind`` raises), a CUDA or compiler failure a
``RuntimeError``. An exception raised by the code being timed is never
wrapped: it reaches the caller as itself, with its own traceback.

**Warnings.** Every warning derives from ``BenchmarkWarning``, so
``warnings.simplefilter("ignore", opbench.BenchmarkWarning)`` silences them
all. A warning about a particular result (a power-saving governor while it
was measured, a throttling GPU, a statement the compiler deleted, too few
samples) is also kept on that result, in ``Measurement.info["warnings"]`` as
``{"category": ..., "message": ...}`` records, so a results file carries it
after the console output is gone. Warnings that would repeat on every
measurement of a sweep are shown once per process (``once=``) but recorded
on every result they concern.

Example:
    >>> import warnings
    >>> from opbench.errors import BenchmarkWarning, SampleSizeWarning, recording, warn
    >>> kept = []
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", BenchmarkWarning)
    ...     with recording(kept):
    ...         _ = warn(SampleSizeWarning, "3 samples cannot bound a median")
    >>> kept
    [{'category': 'SampleSizeWarning', 'message': '3 samples cannot bound a median'}]
"""
from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = [
    "BenchmarkWarning",
    "CallgrindError",
    "CallgrindUnavailableError",
    "CompileError",
    "CompilerNotFoundError",
    "CudaError",
    "DisturbanceWarning",
    "ElisionWarning",
    "Error",
    "FuzzerSpecError",
    "GraphCaptureError",
    "KeyCollisionError",
    "LaunchHoldWarning",
    "MachineWarning",
    "MemoryCountError",
    "MemoryUnavailableError",
    "NothingToCompareError",
    "OverheadError",
    "PlacementError",
    "PrecompiledHeaderWarning",
    "RecompileError",
    "ResolutionWarning",
    "ResultsFileError",
    "ResultsFileWarning",
    "SampleSizeWarning",
    "SchedulerUnreachableError",
    "SerializationError",
    "SweepError",
    "ThrottleWarning",
    "UnsafeFolderWarning",
    "UntrustedPathError",
    "UsageError",
    "WarningRecord",
    "attach",
    "recording",
    "warn",
]


# -- errors -------------------------------------------------------------------

class Error(Exception):
    """Base of every exception opbench raises on its own account."""


class ResultsFileError(Error, ValueError):
    """A results file that cannot be loaded: truncated, corrupt, foreign, too new, or
    holding values no Measurement can have. The message names the file, the
    measurement and the field."""


class KeyCollisionError(Error, ValueError):
    """Two different statements share one benchmark key (``TaskSpec.key``) in one set of
    results; saved together they would be pooled into one row. The message names both."""


class OverheadError(Error, ValueError):
    """``Measurement.without_overhead()`` cannot subtract the harness's cost: none was
    calibrated, or it is at least as large as a measured run (the statement is
    indistinguishable from the harness)."""


class NothingToCompareError(Error, ValueError):
    """A regression gate found no benchmark in both sets of results: it compared nothing,
    so it cannot say there is no regression."""


class UsageError(Error):
    """A command line (``python -m opbench ...``, pytest ``--opbench-*`` options) that
    cannot be run as given: printed as ``opbench <command>: error: ...``, exit status 2."""


class CompileError(Error, RuntimeError):
    """The C++ compiler rejected the code. Locations read ``stmt:LINE``, ``setup:LINE``
    or ``global_setup:LINE`` in the user's own numbering."""


class RecompileError(Error, RuntimeError):
    """``torch.compile`` recompiled while ``opbench.analysis.compile.overheads`` was timing a compiled
    call, so the figure would mix compiled calls with compilations. The message names the
    guard that failed (torch's own reason) and the cell being timed."""


class CompilerNotFoundError(Error, RuntimeError):
    """No C++ compiler could be found (set ``$CXX`` or install g++ / clang++)."""


class CudaError(Error, RuntimeError):
    """A CUDA driver call failed, or the driver or GPU is missing. ``code`` is the
    CUresult (-1 when the driver library could not be loaded) and ``function``
    the failing call."""

    code: int = -1
    function: str = ""


class GraphCaptureError(CudaError):
    """Graph mode could not capture the statement into a CUDA graph (it
    synchronizes, copies to the host, or does something else capture forbids)."""


class CallgrindError(Error, OSError):
    """The callgrind child process failed (its stderr and valgrind's log are quoted).
    An ``OSError``, as torch's ``collect_callgrind`` raises, so code catching that
    keeps working."""


class CallgrindUnavailableError(Error, OSError):
    """Instruction counts cannot be collected here: no valgrind on PATH, not Linux,
    or opbench built without valgrind's headers. The message says what to install."""


class MemoryUnavailableError(Error, OSError):
    """Memory cannot be counted here (``Timer.memory``, ``--opbench-mode=memory``): no
    allocation counter for this platform, a process where it was not preloaded, or
    CUDA figures asked for where torch sees no GPU. The message says which, and the fix."""


class MemoryCountError(Error, RuntimeError):
    """A memory count failed for a reason other than the statement's own exception: its
    process died, or the statement started another process while it was counted (that
    process's allocations would be missed)."""


class SerializationError(Error, ValueError):
    """A value that must cross into another process (a callgrind child, a distributed
    worker) does not serialize; the message names the global and its type."""


class FuzzerSpecError(Error, ValueError, AssertionError):
    """A malformed fuzzer specification. Also an ``AssertionError``, which torch raises
    for the same mistakes, so ``except AssertionError`` written against torch works."""


class SweepError(Error, RuntimeError):
    """Tasks of a distributed sweep (``run_all(executor=...)``) failed; the others ran.

    ``results`` holds every result in the order of the timers (None where a task
    failed), ``failures`` one ``opbench.sweep.TaskFailure`` per failed task (its
    error, traceback, worker and attempts). The results file, if any, holds them too."""

    def __init__(self, message: str, results: list[Any] | None = None,
                 failures: list[Any] | None = None) -> None:
        super().__init__(message)
        self.results = results or []
        self.failures = failures or []


class PlacementError(Error, RuntimeError):
    """No worker of the cluster can give a task the slot it needs (cores, a GPU): the
    message names what the task needs and what the workers offer."""


class SchedulerUnreachableError(Error, ConnectionError):
    """The cluster's scheduler (Dask) or head node (Ray) cannot be reached; the message
    names the address. A ``ConnectionError`` (an ``OSError``)."""


class UnsupportedError(Error, NotImplementedError):
    """A ``torch.utils.benchmark`` function that opbench keeps under torch's name but does
    not implement; the message names what to use instead. A ``NotImplementedError``."""


class UntrustedPathError(Error, PermissionError):
    """A folder or file that opbench would load code from, or lock, is owned by another
    user or can be written by others (a compile cache, the sweep's slot folder): the
    message names it, what is wrong with it and what to do. A ``PermissionError``."""


# -- warnings -----------------------------------------------------------------

class BenchmarkWarning(UserWarning):
    """Base of every warning opbench issues: a condition that makes figures unreliable."""


class MachineWarning(BenchmarkWarning):
    """The machine skews every figure: a CPU governor other than ``performance``, a
    debug build of Python, torch or opbench."""


class DisturbanceWarning(BenchmarkWarning):
    """Other work on the machine pushed a figure up: the measuring threads waited for
    CPUs (``opbench.core.disturbance``), or more threads were asked for than are free."""


class SampleSizeWarning(BenchmarkWarning):
    """Too few samples for the requested confidence: no interval could be formed."""


class ElisionWarning(BenchmarkWarning):
    """A C++ statement adds no measurable time: the compiler probably deleted it."""


class ThrottleWarning(BenchmarkWarning, RuntimeWarning):
    """The GPU's clocks dropped while it was being measured (power or thermal limits)."""


class LaunchHoldWarning(BenchmarkWarning, RuntimeWarning):
    """The CUDA launch hold was switched off; later figures include launch gaps."""


class ResolutionWarning(BenchmarkWarning):
    """The figure is within a few ticks of the clock it was read from (e.g. CUDA event
    timestamps): it measures the clock's resolution as much as the code."""


class ResultsFileWarning(BenchmarkWarning):
    """Part of a result could not be written to a results file and was left out."""


class UnsafeFolderWarning(BenchmarkWarning):
    """A report is written into a folder other users can write to: they could change
    or replace what is published."""


class PrecompiledHeaderWarning(BenchmarkWarning):
    """torch's headers could not be precompiled, or the compiler would not use the
    precompiled header: C++ code that uses torch is built without it (correct, slower)."""


# -- warning records ----------------------------------------------------------

WarningRecord = dict  # {"category": str, "message": str}: JSON-able, survives save/load

# The lists that warnings are recorded into right now (innermost last). A
# Timer pushes its own while it measures, so what its engine warns about lands
# on its Measurement and on no other.
_sinks: contextvars.ContextVar[tuple[list[WarningRecord], ...]] = contextvars.ContextVar(
    "opbench_warning_sinks", default=()
)
# Keys of `once=` warnings already shown in this process.
_shown: set[str] = set()


@contextlib.contextmanager
def recording(sink: list[WarningRecord]) -> Iterator[list[WarningRecord]]:
    """Records every opbench warning issued inside the block into ``sink`` (each record
    once), as well as showing it as usual."""
    token = _sinks.set((*_sinks.get(), sink))
    try:
        yield sink
    finally:
        _sinks.reset(token)


def warn(category: type[BenchmarkWarning], message: str, *, once: str | None = None,
         stacklevel: int = 2) -> WarningRecord:
    """Issues ``message`` as ``category`` and records it in the active ``recording`` lists.

    With ``once``, the warning is shown only the first time that key is seen in
    this process (a sweep would otherwise bury its output in copies), but it is
    still recorded every time: each result it concerns carries it. Returns the
    record.
    """
    if not (isinstance(category, type) and issubclass(category, BenchmarkWarning)):
        raise TypeError(f"category must be a BenchmarkWarning subclass, got {category!r}")
    record: WarningRecord = {"category": category.__name__, "message": message}
    for sink in _sinks.get():
        if record not in sink:
            sink.append(record)
    if once is not None:
        if once in _shown:
            return record
        _shown.add(once)
    warnings.warn(message, category, stacklevel=stacklevel + 1)
    return record


def attach(info: dict[str, Any], record: WarningRecord) -> None:
    """Adds ``record`` to ``info["warnings"]`` (a Measurement's info) unless it is there."""
    kept = info.setdefault("warnings", [])
    if record not in kept:
        kept.append(record)
