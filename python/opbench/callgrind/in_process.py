"""Instruction counts of a callable in *this* process, which must be running under callgrind.

``collect_callgrind`` starts a child under valgrind and sends it the statement;
that cannot work for code that lives only inside a running test (closures over
fixtures, objects built by the test). The pytest plugin's instruction mode
(``--opbench-mode=instructions``) instead runs the whole session under
``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`` and
counts each benchmark where it is: instrumentation is switched on only around
each measured loop by callgrind's client requests, and each loop ends in a
named dump that this module reads back with opbench's own parser.

Counts repeat exactly from run to run when the loop starts from the same
state each time, so each repeat runs a fresh copy of the loop's code once
uncounted (CPython specialises bytecode as it runs it) before the counted run,
after a garbage collection and a ``malloc_trim``, with the collector off while
it counts (as ``timeit`` times), and takes the least count over a few shifts of
the allocator's pools (see ``_HEAP_OFFSETS``); the pytest plugin also fixes
``PYTHONHASHSEED``. Code that allocates much can still differ by a fraction of
a percent between repeats; ``info["spread"]`` reports it and the gate's verdict
allows for it (``opbench.stats.decide.counts``). The empty-call loop is counted the
same way and reported as the baseline.

Example (only under valgrind; see ``opbench.integrations.pytest_plugin``)::

    counts = count(lambda: sorted(xs), number=100, repeats=3, task_spec=spec,
                   out_prefix=os.environ[OUT_PREFIX_ENV])
"""
from __future__ import annotations

import ctypes
import gc
import os
import statistics
from collections.abc import Callable
from typing import Any

from opbench import _C
from opbench.callgrind._parse import parse_callgrind_out
from opbench.callgrind.function_counts import FunctionCount, FunctionCounts
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import TaskSpec
from opbench.errors import CallgrindError, CallgrindUnavailableError

__all__ = ["OUT_PREFIX_ENV", "count", "running"]

# Set by whoever starts valgrind (the pytest plugin): callgrind's --callgrind-out-file,
# where the dumps this process asks for are written (as PREFIX.1, PREFIX.2, ...).
OUT_PREFIX_ENV = "OPBENCH_CALLGRIND_OUT"

_LOOP = "def loop(fn, runs):\n    for _ in runs:\n        fn()\n"


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


def _take_dump(prefix: str) -> tuple[int, dict[str, dict[str, int]]]:
    """The denoised total of the one numbered dump under ``prefix`` (PREFIX.N), which is
    then deleted (each dump is read right after it is written, so exactly one is there),
    and its largest functions' counts (``_functions``)."""
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
    os.unlink(path)
    rows = tuple(FunctionCount(c, fn) for fn, c in profile.exclusive.items() if c)
    return FunctionCounts(rows, inclusive=False).denoise().sum(), _functions(profile)


# Functions kept per result (by inclusive count): enough for a diff's top 15 either way.
_KEPT_FUNCTIONS = 60


def _functions(profile: Any) -> dict[str, dict[str, int]]:
    """The exclusive and inclusive counts of the functions with the largest inclusive or
    exclusive counts: what ``opbench ab --mode instructions`` diffs between revisions."""
    def top(counts: dict[str, int]) -> list[str]:
        return sorted((f for f in counts if counts[f]), key=lambda f: -counts[f])[:_KEPT_FUNCTIONS]

    names = set(top(profile.inclusive)) | set(top(profile.exclusive))
    return {"exclusive": {f: profile.exclusive.get(f, 0) for f in sorted(names)},
            "inclusive": {f: profile.inclusive.get(f, 0) for f in sorted(names)}}


# Where the previous allocations left CPython's small-object pools decides whether a
# loop that allocates and frees pays pool bookkeeping on every call: a block freed
# into a full pool relinks the pool, one emptied returns it to its arena (measured:
# +4.3% for a loop of int additions, in one session of ten). That work is the
# heap's history, not the code's, and only ever adds, so each repeat is the least
# of loops counted with every pool size class shifted by 0, 1, ... blocks.
_HEAP_OFFSETS = 3


def _shift_pools(blocks: int) -> list[Any]:
    """``blocks`` live objects in each of pymalloc's size classes (16 to 512 bytes)."""
    return [[object() for _ in range(blocks)], [2**40 + i for i in range(blocks)],
            *([bytes(size - 33) for _ in range(blocks)] for size in range(48, 513, 16))]


def _counted(fn: Callable[[], Any], number: int, prefix: str,
             label: str) -> tuple[int, dict[str, dict[str, int]]]:
    """One repeat: the least count of ``number`` calls over ``_HEAP_OFFSETS`` heap offsets,
    with that loop's functions."""
    totals = []
    for blocks in range(_HEAP_OFFSETS):
        shift = _shift_pools(blocks)  # held live while the loop is counted
        totals.append(_counted_once(fn, number, prefix, label))
        del shift
    return min(totals, key=lambda t: t[0])


def _counted_once(fn: Callable[[], Any], number: int, prefix: str,
                  label: str) -> tuple[int, dict[str, dict[str, int]]]:
    """One counted loop of ``number`` calls, its code fresh and run once uncounted."""
    namespace: dict[str, Any] = {}
    exec(compile(_LOOP, f"<opbench {label}>", "exec"), namespace)
    loop = namespace["loop"]
    loop(fn, range(number))  # specialise this copy's bytecode, uncounted
    gc.collect()
    _trim()
    cg = _C.callgrind
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
    cg.dump_stats(f"opbench {label}")
    return _take_dump(prefix)


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
    for _ in range(min(number, 10)):  # first-call costs (imports, caches), uncounted
        fn()
    frozen = gc.get_freeze_count()
    gc.freeze()  # what exists now is not re-scanned inside the counted loops
    _C.callgrind.start_instrumentation()
    try:
        repeated = [_counted(fn, number, out_prefix, "stmt") for _ in range(repeats)]
        counts = tuple(total for total, _ in repeated)
        baseline = _counted(_noop, number, out_prefix, "baseline")[0]
    finally:
        _C.callgrind.stop_instrumentation()
        if not frozen:
            gc.unfreeze()
    return InstructionCounts(number, counts, task_spec, baseline=baseline,
                             info={"denoised": True, "collected": "in process",
                                   "spread": (max(counts) - min(counts))
                                   / max(statistics.median(counts), 1),
                                   # The least repeat's functions, for a per-function diff.
                                   "functions": min(repeated, key=lambda t: t[0])[1]})
