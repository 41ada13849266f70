"""``Timer.memory``: a statement's memory per call, counted in a process started with the
allocation counter (or in this one, when it was).

The counter must be loaded before the C library's allocator is first used, so a
process that was not started with it cannot count its native heap. ``measure``
therefore starts ``python -c "...memory._child..."`` with ``LD_PRELOAD`` naming the
counter, hands it the Timer (pickled: its arguments, as ``Timer.__reduce__``
gives them; a C++ statement is compiled here first, so the child finds it in the
cache), and reads back the MemoryCounts, or the statement's exception with the
child's traceback as its cause. A process that was started with the counter
(``pytest --opbench-mode=memory``, a script run under ``counter.preload_env()``)
counts in place, which is also the only way for a statement that does not pickle.

Example:
    >>> import opbench
    >>> counts = opbench.Timer("[0] * 100").memory(number=10)  # doctest: +SKIP
    >>> counts.allocations, counts.bytes  # doctest: +SKIP
    (1.0, 856.0)
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
from typing import Any

from opbench._checks import check_count
from opbench.callgrind.worker import child_env
from opbench.core.memory import MemoryCounts
from opbench.errors import MemoryCountError, MemoryUnavailableError, SerializationError
from opbench.memory import counter, counting

__all__ = ["ChildTraceback", "measure"]

_TAIL = 4000  # characters of the child's output quoted when it dies


class ChildTraceback(Exception):
    """The memory child's traceback, shown as the cause of the statement's error."""

    def __str__(self) -> str:
        return "\n\n(in the memory child process)\n" + self.args[0].rstrip()


def _job(timer: Any, **options: Any) -> bytes:
    """The pickled job; SerializationError names the argument that does not pickle."""
    try:
        return pickle.dumps({"timer": timer, **options}, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as whole:  # pickle raises several types; all mean the same here
        culprit = "an argument"
        kwargs = timer.kwargs
        parts = [("stmt", kwargs["stmt"]), ("setup", kwargs["setup"]),
                 *((f"global {k!r}", v) for k, v in (kwargs.get("globals") or {}).items())]
        for what, value in parts:
            try:
                pickle.dumps(value)
            except Exception:
                culprit = f"{what} ({type(value).__name__})"
                break
        raise SerializationError(
            f"Timer.memory counts in a child process started with the allocation counter, and "
            f"{culprit} cannot be sent to it: it does not pickle ({type(whole).__name__}: "
            f"{whole}). Define it at module level, build it in setup, or count in a process "
            f"started with the counter (pytest --opbench-mode=memory).") from whole


def _tail(text: str) -> str:
    text = text[-_TAIL:]
    return f"--- its output (last {_TAIL} characters) ---\n{text}" if text.strip() else ""


def _rebuilt(error: Any) -> BaseException:
    _, pickled, text, trace = error
    exc: BaseException | None = None
    if pickled is not None:
        try:
            exc = pickle.loads(pickled)
        except Exception:  # a class this process cannot import: the text will do
            exc = None
    if exc is None:
        exc = MemoryCountError(f"the statement raised {text}")
    exc.__cause__ = ChildTraceback(trace)
    return exc


def measure(timer: Any, *, number: int = 100, repeats: int = 3, cuda: bool | None = None) -> MemoryCounts:
    """The memory of ``number`` calls of ``timer``'s statement, ``repeats`` times
    (``opbench.memory.counting`` says how a repeat counts).

    Raises:
        ValueError: ``number`` or ``repeats`` not a positive int.
        MemoryUnavailableError: no allocation counter on this platform, or CUDA figures
            required (``cuda=True``) where torch sees no GPU.
        SerializationError: the statement or a global does not pickle (module doc).
        MemoryCountError: the child died, or the statement started a process.
        the statement's own exception, with the child's traceback as its cause.
    """
    check_count("number", number)
    check_count("repeats", repeats)
    if counter.preloaded():
        return counting.count_timer(timer, number=number, repeats=repeats, cuda=cuda)
    reason = counter.unavailable_reason()
    if reason is not None:
        raise MemoryUnavailableError(reason)
    timer.engine.prepare()  # a C++ statement compiles here, where its errors belong
    job = _job(timer, number=number, repeats=repeats, cuda=cuda)
    with tempfile.TemporaryDirectory(prefix="opbench_memory_") as folder:
        job_path, out_path = os.path.join(folder, "job.pickle"), os.path.join(folder, "out.pickle")
        with open(job_path, "wb") as f:
            f.write(job)
        proc = subprocess.run(
            [sys.executable, "-c", "from opbench.memory._child import main; main()", job_path,
             out_path], env=counter.preload_env(child_env()), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        try:
            with open(out_path, "rb") as f:
                outcome = pickle.load(f)
        except FileNotFoundError:
            rc = proc.returncode
            how = (f"killed by signal {signal.Signals(-rc).name}" if rc < 0
                   else f"exit status {rc}, without a result")
            raise MemoryCountError(
                f"Timer.memory: the memory child process failed ({how}).\n"
                + _tail(proc.stdout.decode(errors="replace"))) from None
    if outcome[0] == "ok":
        return outcome[1]
    raise _rebuilt(outcome)
