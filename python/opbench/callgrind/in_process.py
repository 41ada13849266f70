"""Instruction counts of a callable in *this* process, which must be running under callgrind.

``collect_callgrind`` starts a child under valgrind and sends it the statement;
that cannot work for code that lives only inside a running test (closures over
fixtures, objects built by the test). The pytest plugin's instruction mode
(``--opbench-mode=instructions``) instead runs the whole session under
``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`` and
counts each benchmark where it is: instrumentation is switched on only around
each measured loop by callgrind's client requests, and each loop ends in a
named dump that this module reads back with opbench's own parser.

Counts repeat exactly, from run to run and from process to process, when
every loop starts from the same state, whatever the process did before (its
environment's size, its working directory, the tests before it). So, as
collect_callgrind's worker does: the loops run on a fresh thread (its own
malloc arena, see ``_on_fresh_thread``); each repeat runs a fresh copy of the
loop's code once uncounted (CPython specialises bytecode as it runs it) before
the counted run, after a garbage collection and a ``malloc_trim``, with
CPython's small-object pools primed (``_counted``) and the collector off while
it counts (as ``timeit`` times); the pytest plugin also fixes
``PYTHONHASHSEED``, sets torch's thread count to the Timer's and lets idle
OpenMP workers sleep. Code that allocates much can still differ by a fraction
of a percent between repeats; ``info["spread"]`` reports it and the gate's
verdict allows for it (``opbench.stats.decide.counts``). The empty-call loop is counted the
same way and reported as the baseline (``empty_call_like``: an empty call of the
statement's own kind, so ``per_run`` never falls below zero by the harness's cost).
For Python code, one more loop runs with ``opbench._C.python_frames`` on, and
``info["python_functions"]`` keeps its counts per Python function
(``opbench.callgrind.python_functions``), for ``opbench ab`` to say which function's
own cost changed.

Example (only under valgrind; see ``opbench.integrations.pytest_plugin``)::

    counts = count(lambda: sorted(xs), number=100, repeats=3, task_spec=spec,
                   out_prefix=os.environ[OUT_PREFIX_ENV])
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import statistics
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from opbench import _C
from opbench.callgrind import python_functions
from opbench.callgrind._parse import parse_callgrind_out
from opbench.callgrind.function_counts import FunctionCount, FunctionCounts
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import TaskSpec
from opbench.engines.python import is_python_code
from opbench.errors import CallgrindError, CallgrindUnavailableError

__all__ = ["OUT_PREFIX_ENV", "count", "empty_call_like", "running"]

# Set by whoever starts valgrind (the pytest plugin): callgrind's --callgrind-out-file,
# where the dumps this process asks for are written (as PREFIX.1, PREFIX.2, ...).
OUT_PREFIX_ENV = "OPBENCH_CALLGRIND_OUT"

_LOOP = "def loop(fn, runs):\n    for _ in runs:\n        fn()\n"
_T = TypeVar("_T")
# Calls of a loop's fresh copy run uncounted before its counted run: CPython 3.11+
# quickens a code object after a few executions and specialises each instruction on
# its first run after that (retrying failures on a fixed backoff, the same in every
# process). A few dozen calls reach that state; the whole `number` would make
# instruction mode pay every counted loop twice, under callgrind.
_SPECIALISE_CALLS = 16


def running() -> bool:
    """Whether this process runs under valgrind with opbench's client requests built in."""
    return bool(_C.callgrind.available() and _C.callgrind.running_on_valgrind())


def _trim() -> None:
    # glibc consolidates its free lists at moments that depend on the heap's
    # history; trimming before each loop starts every repeat from the same heap.
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _noop() -> None:
    pass


def empty_call_like(fn: Callable[[], Any]) -> Callable[[], Any]:
    """The baseline's empty call, of ``fn``'s kind: a Python no-op for Python code, a C
    no-op for a C callable (calling one costs less than entering a Python frame, so
    a Python baseline would exceed a cheap C callable's whole count)."""
    return _noop if is_python_code(fn) else _C.noop


def _take_dump(prefix: str, keep: str | None = None) -> int:
    """The denoised total of the one numbered dump under ``prefix`` (PREFIX.N), which is
    then deleted (each dump is read right after it is written, so exactly one is there),
    or moved to ``keep`` for its per-function counts to be read after all loops ran
    (reading them now would keep allocations alive into the next loop's heap)."""
    folder, base = os.path.split(prefix)
    found = [name for name in os.listdir(folder or ".")
             if name.startswith(base + ".") and name[len(base) + 1:].isdigit()]
    if len(found) != 1:
        raise CallgrindError(f"expected one new callgrind dump under {prefix}, found "
                             f"{len(found)}: is this process running under valgrind with "
                             f"--callgrind-out-file={prefix}?")
    path = os.path.join(folder, found[0])
    with open(path) as f:
        profile = parse_callgrind_out(f.read().splitlines())
    if keep is None:
        os.unlink(path)
    else:
        os.replace(path, keep)
    rows = tuple(FunctionCount(c, fn) for fn, c in profile.exclusive.items() if c)
    return FunctionCounts(rows, inclusive=False).denoise().sum()


def _counted(fn: Callable[[], Any], number: int, prefix: str, label: str,
             keep: str | None = None) -> int:
    """One counted loop of ``number`` calls, its code fresh and run once uncounted, from
    a heap made the same as before every other loop (as collect_callgrind's worker).

    Where earlier allocations left CPython's small-object pools decides whether a
    loop that allocates and frees pays pool bookkeeping on every call (+4.3% for a
    loop of int additions, in one session of ten): that is the process's history
    (its environment, its working directory, the tests before), not the code's.
    ``prime_small_objects`` puts a half-full pool of blocks kept alive at the head
    of every size class, so every run takes the fast path whatever ran before.
    """
    namespace: dict[str, Any] = {}
    exec(compile(_LOOP, f"<opbench {label}>", "exec"), namespace)
    loop = namespace["loop"]
    loop(fn, range(min(number, _SPECIALISE_CALLS)))  # specialise this copy, uncounted
    gc.collect()
    _trim()
    cg = _C.callgrind
    cg.prime_small_objects()
    # The collector off while counting, as timeit times: when a collection runs
    # depends on every allocation since the process started (the environment,
    # the command line), so it would move counts between sessions of one code.
    gc.disable()
    try:
        cg.toggle_collect()
        loop(fn, range(number))
        cg.toggle_collect()
    finally:
        gc.enable()
        cg.release_small_objects()
    cg.dump_stats(f"opbench {label}")
    return _take_dump(prefix, keep)


def _torch_thread_state() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """What makes a new thread run torch code as this one does: its grad and inference
    modes (thread-local in torch) and its thread count."""
    torch = sys.modules.get("torch")
    if torch is None:
        return contextlib.nullcontext
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()
    threads = torch.get_num_threads()

    @contextlib.contextmanager
    def state() -> Iterator[None]:
        torch.set_num_threads(threads)
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            yield

    return state


_PARKED = threading.Event()  # never set: counting threads wait on it once done


def _on_fresh_thread(fn: Callable[[], _T]) -> _T:
    """``fn()`` on a new thread, which then parks until the process exits.

    A new thread gets a malloc arena of its own, holding only what the counted
    code puts there: torch's CPU allocator (posix_memalign) carves every tensor
    from its arena's free chunks, and the main thread's arena holds the start-up,
    whose allocations follow the environment's size, the working directory and
    the tests that ran before. A thread that exited would hand its arena, with
    its history, to the next new one: so it parks instead (glibc makes up to 8
    arenas per core; later threads share them). torch's thread-local modes are
    carried over (``torch.no_grad()`` around the benchmark holds in its loops).
    """
    state = _torch_thread_state()
    outcome: list[Any] = []
    done = threading.Event()

    def body() -> None:
        try:
            with state():
                outcome.append((True, fn()))
        except BaseException as e:  # the statement's own error, raised in the caller
            outcome.append((False, e))
        done.set()
        _PARKED.wait()

    threading.Thread(target=body, name="opbench-count", daemon=True).start()
    done.wait()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def count(fn: Callable[[], Any], *, number: int, repeats: int, task_spec: TaskSpec,
          out_prefix: str) -> InstructionCounts:
    """Counts ``repeats`` loops of ``number`` calls of ``fn`` (and of an empty call).

    Raises:
        CallgrindUnavailableError: not running under valgrind (or built without
            valgrind's headers).
        CallgrindError: callgrind wrote no dump where ``out_prefix`` says.
    """
    if not running():
        raise CallgrindUnavailableError(
            "in-process instruction counts need this process to run under valgrind "
            "(`valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no ...`); "
            "the pytest plugin's --opbench-mode=instructions starts it for you")
    _C.callgrind.pad_heap_top()
    return _on_fresh_thread(lambda: _count_here(fn, number, repeats, task_spec, out_prefix))


def _count_here(fn: Callable[[], Any], number: int, repeats: int, task_spec: TaskSpec,
                out_prefix: str) -> InstructionCounts:
    for _ in range(min(number, 10)):  # first-call costs (imports, caches), uncounted
        fn()
    frozen = gc.get_freeze_count()
    gc.freeze()  # what exists now is not re-scanned inside the counted loops
    _C.callgrind.start_instrumentation()
    try:
        kept = out_prefix + ".functions"
        counts = tuple(_counted(fn, number, out_prefix, "stmt",
                                keep=kept if i == repeats - 1 else None) for i in range(repeats))
        baseline = _counted(empty_call_like(fn), number, out_prefix, "baseline")
        python = _python_functions(fn, number, out_prefix)
    finally:
        _C.callgrind.stop_instrumentation()
        if not frozen:
            gc.unfreeze()
    info = {"denoised": True, "collected": "in process",
            "spread": (max(counts) - min(counts)) / max(statistics.median(counts), 1),
            # The last repeat's functions, for a per-function diff.
            "functions": _functions_of(kept)}
    if python is not None:
        info["python_functions"] = python
    return InstructionCounts(number, counts, task_spec, baseline=baseline, info=info)


def _python_functions(fn: Callable[[], Any], number: int,
                      out_prefix: str) -> dict[str, dict[str, int]] | None:
    """Per Python function, the counts of one more loop run with ``opbench._C.python_frames``
    on (``opbench.callgrind.python_functions``); None on a CPython the trampolines do not
    support. A C callable counts too: ``sorted`` calls its items' ``__lt__``. After the
    gated loops: the hook slows calls."""
    frames = _C.python_frames
    if not frames.available():
        return None
    kept = out_prefix + ".python"
    frames.start()
    try:
        _counted(fn, number, out_prefix, "python functions", keep=kept)
    finally:
        frames.stop()
    with open(kept) as f:
        profile = parse_callgrind_out(f.read().splitlines())
    os.unlink(kept)
    table = python_functions.counts(profile, python_functions.names(
        frames.slots(), slots=frames.SLOTS, harness=(__file__,)))
    return _top(table)


# Functions kept per result (by inclusive count): enough for a diff's top 15 either way.
_KEPT_FUNCTIONS = 60


def _functions_of(path: str) -> dict[str, dict[str, int]]:
    """The exclusive and inclusive counts of a dump's largest functions (by either), the
    dump then deleted: what ``opbench ab --mode instructions`` diffs between revisions."""
    with open(path) as f:
        profile = parse_callgrind_out(f.read().splitlines())
    os.unlink(path)

    return _top({"exclusive": profile.exclusive, "inclusive": profile.inclusive})


def _top(table: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The ``_KEPT_FUNCTIONS`` largest functions of a table by either count, each with all
    its fields (exclusive, inclusive, lines)."""
    def top(counts: dict[str, int]) -> list[str]:
        return sorted((f for f in counts if counts[f]), key=lambda f: -counts[f])[:_KEPT_FUNCTIONS]

    names = set(top(table["inclusive"])) | set(top(table["exclusive"]))
    return {field: {f: values[f] for f in sorted(names) if f in values}
            if field == "lines" else {f: values.get(f, 0) for f in sorted(names)}
            for field, values in table.items()}
