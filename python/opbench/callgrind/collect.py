"""collect_callgrind and collect_callgrind_all: instruction counts of Timers under callgrind.

``Timer.collect_callgrind`` runs one statement in a worker of its own, which
exits afterwards (as torch's child does); ``collect_callgrind_all`` runs a
sweep of Timers through the worker its process shares, paying valgrind's and
Python's start and ``import torch`` once (see ``worker.py``).

Why it is fast: the worker runs under valgrind with instrumentation off except
around the measured loops (``--instr-atstart=no``), so ``import torch`` and
setup run at valgrind's uninstrumented speed, and only the loops are collected
(``--collect-atstart=no`` + toggles). Output files are read directly.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from typing import Any, Union

from opbench._checks import check_count
from opbench.callgrind import _child
from opbench.callgrind._parse import parse_callgrind_out
from opbench.callgrind.function_counts import FunctionCount, FunctionCounts
from opbench.callgrind.stats import CallgrindStats
from opbench.callgrind.worker import StatementCrashed, StatementFailed, Worker, WorkerDied
from opbench.errors import CallgrindError, CallgrindUnavailableError

__all__ = ["callgrind_unavailable_reason", "collect_callgrind", "collect_callgrind_all"]

def callgrind_unavailable_reason() -> str | None:
    """Why collect_callgrind cannot run here, or None when it can.

    >>> callgrind_unavailable_reason() is None or "valgrind" in callgrind_unavailable_reason()
    True
    """
    if not sys.platform.startswith("linux"):
        return f"collect_callgrind needs Linux (valgrind); this is {sys.platform}."
    if shutil.which("valgrind") is None:
        return ("collect_callgrind needs valgrind, which is not on PATH. Install it, e.g. "
                "`apt-get install valgrind` (Debian/Ubuntu package `valgrind`).")
    try:
        from opbench import _C
    except ImportError as e:
        return f"collect_callgrind needs opbench's native extension, which failed to import: {e}"
    if not _C.callgrind.available():
        return ("opbench._C was built without valgrind's headers (valgrind/callgrind.h), so it "
                "cannot send callgrind client requests. Install the Debian package `valgrind` "
                "(it ships the headers) and rebuild opbench.")
    return None


def _check_available() -> None:
    reason = callgrind_unavailable_reason()
    if reason is not None:
        raise CallgrindUnavailableError(reason)


def _read(path: str, retain: bool) -> tuple[FunctionCounts, FunctionCounts, str | None]:
    with open(path) as f:
        text = f.read()
    os.remove(path)  # a long sweep would otherwise fill the disk with them
    profile = parse_callgrind_out(text.splitlines())

    def counts(by_fn: dict[str, int], inclusive: bool) -> FunctionCounts:
        # As torch (via callgrind_annotate): drop zero rows, and inclusive rows equal
        # to the program total (top-level frames that only restate it). torch drops
        # such exclusive rows too, which empties a C++ statement the compiler inlined
        # whole into the loop (one function holds every instruction): counts of 0.
        rows = (FunctionCount(c, fn) for fn, c in by_fn.items()
                if c and not (inclusive and c == profile.total))
        return FunctionCounts(tuple(sorted(rows, reverse=True)), inclusive=inclusive)

    raw = text if retain else None
    return counts(profile.inclusive, True), counts(profile.exclusive, False), raw


def _built_with_debug_symbols() -> bool:
    # torch's warning is about torch's build; only relevant where torch is loaded.
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    found = re.search("BUILD_TYPE=(.+),", torch.__config__.show())
    return found is not None and found.group(1).split(",")[0] == "RelWithDebInfo"


def _job(timer: Any, data_dir: str, *, number: int, repeats: int, collect_baseline: bool,
         where: str = "") -> _child.Job:
    from opbench.engines.cpp.engine import CppEngine  # here: engines.cpp is slow to import

    if isinstance(timer.engine, CppEngine):
        return _child.cpp_job(timer, number=number, repeats=repeats)
    return _child.python_job(timer, data_dir, number=number, repeats=repeats,
                             collect_baseline=collect_baseline, where=where)


def _stats(timer: Any, job: _child.Job, files: list[str],
           retain_out_file: bool) -> tuple[CallgrindStats, ...]:
    """One CallgrindStats per repeat from the job's dump files (baseline last)."""
    results = [_read(path, retain_out_file) for path in files]
    if job.collect_baseline:
        base_incl, base_excl, _ = results.pop()
    else:
        base_incl = FunctionCounts((), inclusive=True)
        base_excl = FunctionCounts((), inclusive=False)
    debug = _built_with_debug_symbols()
    return tuple(
        CallgrindStats(
            task_spec=timer.task_spec,
            number_per_run=job.number,
            built_with_debug_symbols=debug,
            baseline_inclusive_stats=base_incl,
            baseline_exclusive_stats=base_excl,
            stmt_inclusive_stats=incl,
            stmt_exclusive_stats=excl,
            stmt_callgrind_out=raw,
        )
        for incl, excl, raw in results
    )


def collect_callgrind(
    timer: Any,
    *,
    number: int,
    repeats: int | None,
    collect_baseline: bool,
    retain_out_file: bool,
) -> CallgrindStats | tuple[CallgrindStats, ...]:
    """Counts the instructions of ``number`` runs of the timer's statement, ``repeats`` times,
    in a worker of its own. Any failure of the child, the statement's included, raises
    CallgrindError (an OSError, as torch raises) quoting the child's traceback or stderr.

    Example (needs valgrind):
        >>> import opbench  # doctest: +SKIP
        >>> t = opbench.Timer("x + 1", setup="x = 1")  # doctest: +SKIP
        >>> t.collect_callgrind(number=100).counts()  # doctest: +SKIP
    """
    from opbench.progress import Progress

    _check_available()
    n_repeats = 1 if repeats is None else repeats
    with tempfile.TemporaryDirectory(prefix="opbench_callgrind_job_") as data:
        job = _job(timer, data, number=number, repeats=n_repeats,
                   collect_baseline=collect_baseline)
        # Each loop ends with a dump, so counting them gives a progress bar (shown
        # on a terminal, for more than one dump; see opbench.progress).
        with Progress(job.dumps, desc="callgrind", enabled=None if job.dumps > 1 else False) \
                as bar:
            try:
                with Worker(torch=job.import_torch) as worker:
                    files = worker.run(job, on_dump=lambda n: bar.update(n - bar.done))
                    bar.update(job.dumps - bar.done)
                    stats = _stats(timer, job, files, retain_out_file)
            except StatementFailed as e:
                raise CallgrindError(
                    "collect_callgrind: the callgrind child process failed: the statement "
                    f"raised {e.text}\n--- its traceback ---\n{e.traceback}") from None
            except (StatementCrashed, WorkerDied) as e:
                raise CallgrindError(
                    f"collect_callgrind: the callgrind child process failed ({e.how}).\n"
                    f"{e.details}") from None
    return stats[0] if repeats is None else stats


Result = Union[CallgrindStats, tuple[CallgrindStats, ...], BaseException]


def collect_callgrind_all(
    timers: Iterable[Any],
    number: int = 100,
    repeats: int = 1,
    collect_baseline: bool = True,
    *,
    return_exceptions: bool = False,
) -> list[Any]:
    """Instruction counts of many Timers, served by one callgrind worker.

    Each argument means what it means to ``Timer.collect_callgrind``; the
    result is one CallgrindStats per Timer, in order (a tuple of ``repeats``
    of them when ``repeats > 1``), with a progress bar over the sweep (on a
    terminal; see ``opbench.progress``). Python and C++ Timers may be mixed.
    The worker, and the ``import torch`` it did, serve later sweeps in this
    process while it lives, so only the first sweep pays valgrind's start.

    Before the worker starts, every statement runs once here (a statement that
    cannot run fails at once, as in ``collect_callgrind``), every global is
    serialized (one that does not serialize raises SerializationError naming
    it) and C++ statements are compiled. What those first runs imported
    (``torch._dynamo`` for a ``torch.compile``, say) a new worker imports
    once, rather than every statement under valgrind.

    Faults: a statement that raises in the worker raises its own exception,
    with the worker's traceback as its ``__cause__``; the worker stays up for
    the next statement. A statement whose process dies (a crash in a C
    extension), or a worker that dies, raises CallgrindError naming the
    statement. With ``return_exceptions=True`` the sweep goes on instead: the
    exception takes the statement's place in the list, and a dead worker is
    replaced for the rest of the sweep. Ctrl-C ends the worker and removes its
    files. Sweeps from several threads take turns.

    Example (needs valgrind):
        >>> import opbench
        >>> timers = [opbench.Timer(f"sorted(range({n}))") for n in (10, 1000)]
        >>> small, large = opbench.collect_callgrind_all(timers, number=10)
        >>> small.number_per_run, small.counts() < large.counts()
        (10, True)
    """
    from opbench.callgrind import worker as workers
    from opbench.progress import Progress

    timers = list(timers)
    check_count("number", number)
    check_count("repeats", repeats)
    _check_available()
    before = set(sys.modules)
    for t in timers:
        t.run(1)  # fail fast, here, on a statement that cannot run at all
    # Seconds each under valgrind: paid once per worker instead of once per statement.
    preload = [m for m in list(sys.modules) if m not in before]
    results: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="opbench_callgrind_sweep_") as data:
        jobs = []
        for i, t in enumerate(timers):
            job_dir = os.path.join(data, str(i))
            os.mkdir(job_dir)
            jobs.append(_job(t, job_dir, number=number, repeats=repeats,
                             collect_baseline=collect_baseline, where=f"timers[{i}]: "))
        # One worker for the sweep, with torch imported if any statement needs it.
        torch = any(job.import_torch for job in jobs)
        with workers.lock, Progress(len(jobs), desc="callgrind") as bar:
            for i, (timer, job) in enumerate(zip(timers, jobs)):
                bar.set_item(job.title)
                results.append(_collect_one(i, timer, job, torch, preload, return_exceptions))
                bar.update()
    return results


def _collect_one(i: int, timer: Any, job: _child.Job, torch: bool, preload: list[str],
                 return_exceptions: bool) -> Result:
    """One statement of a sweep on the shared worker (``worker.lock`` held)."""
    from opbench.callgrind import worker as workers

    try:
        worker = workers.shared(torch, preload)
    except WorkerDied as e:
        raise CallgrindError(f"collect_callgrind_all: the callgrind worker failed to start "
                             f"({e.how}).\n{e.details}") from None
    error: BaseException
    try:
        files = worker.run(job)
    except StatementFailed as e:
        error = e.exception()
    except (StatementCrashed, WorkerDied) as e:
        if isinstance(e, WorkerDied):
            workers.discard_shared()
        error = CallgrindError(
            f"collect_callgrind_all: the callgrind process running timers[{i}], {job.title}, "
            f"died ({e.how}).\n{e.details}")
    except BaseException:
        workers.kill_shared()  # Ctrl-C mid-statement: its state is unknown
        raise
    else:
        stats = _stats(timer, job, files, retain_out_file=False)
        return stats[0] if job.repeats == 1 else stats
    if not return_exceptions:
        raise error
    return error
