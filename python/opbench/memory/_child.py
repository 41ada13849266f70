"""The memory child: the program ``opbench.memory.collect`` starts with the counter
preloaded, as ``python -c "from opbench.memory._child import main; main()" JOB OUT``.

It reads the job (a pickled dict: the Timer and ``count_timer``'s options), counts
in place (``counting.count_timer``), and writes ``("ok", MemoryCounts)`` or
``("error", exception pickle or None, exception text, traceback text)`` to OUT,
atomically (a child killed half-way leaves no file, which the caller reports).
"""
from __future__ import annotations

import os
import pickle
import sys
import traceback
from typing import Any

from opbench.callgrind._worker_process import exception_pickle
from opbench.errors import MemoryUnavailableError, SerializationError
from opbench.memory import counter, counting


def _load(job_path: str) -> dict[str, Any]:
    try:
        with open(job_path, "rb") as f:
            job: dict[str, Any] = pickle.load(f)
    except Exception as e:
        raise SerializationError(
            f"the memory child cannot rebuild the Timer ({type(e).__name__}: {e}): its "
            "statement, setup or a global is defined where another process cannot import it "
            "(a script's __main__, a notebook). Define it in an importable module, or pass "
            "strings of code.") from e
    return job


def run(job_path: str) -> tuple[Any, ...]:
    """The job's outcome, as the caller reads it."""
    try:
        if not counter.preloaded():
            raise MemoryUnavailableError(
                "the memory child was started without its allocation counter: the dynamic "
                "loader ignored LD_PRELOAD (a set-user-ID Python, or a statically linked one); "
                "run opbench from an ordinary Python build")
        job = _load(job_path)
        timer = job.pop("timer")
        return ("ok", counting.count_timer(timer, **job))
    except BaseException as e:  # the statement's own error, whatever it is
        return ("error", exception_pickle(e), f"{type(e).__name__}: {e}", traceback.format_exc())


def main() -> None:
    job_path, out_path = sys.argv[1], sys.argv[2]
    counter.restore_environment()  # what the statement starts gets the user's LD_PRELOAD
    outcome = run(job_path)
    tmp = f"{out_path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(outcome, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, out_path)
