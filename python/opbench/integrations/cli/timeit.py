"""``opbench timeit [-s SETUP]... [options] STMT...``: time a statement from the shell.

Like ``python -m timeit``, with opbench's Timer and statistics. Several STMT
(or -s SETUP) arguments are joined as lines of one block. By default the
statement is timed in blocks of torch's size until both --min-run-time seconds
and --min-samples blocks are measured (enough for a regression gate to
decide); ``-n N -r R`` times exactly R blocks of N runs, ``-r R`` alone R
blocks of the automatic size, and ``--converge`` measures until the median's
95% confidence interval is within the target. The result prints as a
Measurement (``--verbose``: with std, median CI and outliers); ``--save``
writes it to a results file, ``--autosave`` as this machine's next numbered
run under .opbench/ (compare with ``opbench compare --latest``).

``--flops`` / ``--bytes`` give the work of one run (a number, or ``count``
to count it from the torch ops the statement runs): the result then says
its GB/s and TFLOP/s, and whether it is memory- or compute-bound against
this machine's measured peaks (``opbench peaks``).

A measurement the busy machine disturbed (its threads waited for CPUs, or its
core ran slow; ``opbench.core.disturbance``) is measured again, within as long
again as it took (``--no-recover`` keeps the first); if it stays disturbed, its
text says so and why.

``--callgrind`` counts instructions instead of timing (valgrind, Linux):
``-n`` runs under callgrind (default 100), ``-r`` repeats; with ``--save`` the
counts go to the results file for an exact instruction-count gate.

``--memory`` counts memory per call instead (Linux with glibc): allocations, bytes,
peak and leak of Python objects, the native heap and CUDA, in a child process with
opbench's allocation counter preloaded (``Timer.memory``); ``-n`` calls counted
(default 100), ``-r`` repeats (default 3); with ``--save`` the counts go to the
results file for an exact memory gate.

Examples:
    opbench timeit -s "xs = list(range(1000))" "sorted(xs)"
    opbench timeit --name sort --save new.json "sorted(xs)" -s "xs = list(range(1000))"
    opbench timeit --converge 1% --verbose "sum(range(100))"
    opbench timeit --callgrind -n 1000 --save counts.json "x = 1 + 1"
    opbench timeit --bytes count --flops count -s "x = torch.rand(1 << 24)" "x + x"
    opbench timeit --memory -s "a = torch.ones(1000)" "a + a"

Exit status: 0 on success, 1 when the statement raises or callgrind or the memory
count fails, 2 for bad input (a statement that does not parse or needs what is
missing, bad options, an unwritable --save path, no valgrind, no allocation counter).
"""
from __future__ import annotations

import argparse
import sys
import traceback
from typing import TYPE_CHECKING, Any

from opbench.integrations.cli import UsageError, command_parser, parse_fraction

if TYPE_CHECKING:
    from opbench.core.measurement import Measurement
    from opbench.timer import Timer

_CALLGRIND_NUMBER = 100
_MEMORY_NUMBER = 100
_MEMORY_REPEATS = 3
_MIN_SAMPLES = 10


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(
        subparsers,
        "timeit",
        "time a Python statement (like python -m timeit, with opbench's statistics)",
        __doc__,
    )
    p.add_argument("stmt", nargs="*", metavar="STMT",
                   help="statement to time; several are joined as lines (default: pass)")
    p.add_argument("-s", "--setup", action="append", default=[], metavar="SETUP",
                   help="code run before timing; repeatable, joined as lines")
    p.add_argument("-n", "--number", type=int, default=None, metavar="N",
                   help="runs per block (timing: with -r blocks; --callgrind: runs counted, "
                        f"default {_CALLGRIND_NUMBER})")
    p.add_argument("-r", "--repeat", type=int, default=None, metavar="R",
                   help="blocks to time (with -n: of N runs; alone: of the automatic size; "
                        "default 5 with -n); --callgrind: repeats of the count")
    p.add_argument("--min-run-time", type=float, default=0.2, metavar="S",
                   help="seconds of measurement by default and for --converge (default 0.2)")
    p.add_argument("--min-samples", type=int, default=_MIN_SAMPLES, metavar="K",
                   help=f"blocks to measure at least by default (default {_MIN_SAMPLES}: "
                        "enough for a regression gate to decide)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch threads while timing (default 1)")
    p.add_argument("--converge", default=None, metavar="TARGET",
                   help="measure until the median's 95%% CI is within +-TARGET "
                        "('1%%' or '0.01')")
    p.add_argument("--callgrind", action="store_true",
                   help="count instructions under callgrind (needs valgrind) instead of timing")
    p.add_argument("--memory", action="store_true",
                   help="count memory per call (allocations, bytes, peak, leak; Python, native "
                        "heap, CUDA) instead of timing")
    p.add_argument("--flops", default=None, metavar="N|count",
                   help="FLOPs of one run, or 'count' to count them from the torch ops it "
                        "runs; prints FLOP/s and where it sits under this machine's peaks")
    p.add_argument("--bytes", default=None, metavar="N|count",
                   help="bytes one run reads and writes, or 'count'; prints GB/s")
    p.add_argument("--no-recover", dest="recover", action="store_false",
                   help="keep a measurement the busy machine disturbed (default: measure it "
                        "again, within three quarters as long again as it took)")
    p.add_argument("--label", default=None, help="label of the result (default: the statement)")
    p.add_argument("--name", default=None,
                   help="the benchmark's name, which a regression gate matches files on "
                        "(default: the label, else the statement)")
    p.add_argument("--save", default=None, metavar="PATH",
                   help="write the result to PATH as an opbench results file")
    p.add_argument("--autosave", action="store_true",
                   help="save the result as this machine's next run under .opbench/")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="full statistics (Measurement.describe()); with --callgrind, the "
                        "functions with the most instructions")
    return p


def _check_args(args: argparse.Namespace) -> float | None:
    """Validates the options together, before anything runs; returns the --converge target."""
    for option, value in (("--number", args.number), ("--repeat", args.repeat),
                          ("--threads", args.threads), ("--min-samples", args.min_samples)):
        if value is not None and value < 1:
            raise UsageError(f"{option} must be a positive integer, got {value}")
    if not args.min_run_time > 0:
        raise UsageError(f"--min-run-time must be > 0, got {args.min_run_time}")
    target = None if args.converge is None else parse_fraction(args.converge, "--converge")
    if target is not None and (args.number is not None or args.repeat is not None):
        raise UsageError("--converge chooses the block size and count itself: drop -n/-r")
    if args.callgrind and target is not None:
        raise UsageError("--callgrind counts instructions: it takes no --converge")
    if args.memory and (target is not None or args.callgrind):
        raise UsageError("--memory counts memory: it takes no --converge or --callgrind")
    for option in ("flops", "bytes"):
        setattr(args, option, _work(getattr(args, option), f"--{option}"))
    if args.save is not None:
        from opbench._files import check_writable

        try:
            check_writable(args.save)
        except OSError as e:
            raise UsageError(f"--save: {e}") from None
    return target


def _work(text: str | None, option: str) -> float | str | None:
    """``--flops`` / ``--bytes``: a number >= 0, or ``count``."""
    if text is None or text == "count":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise UsageError(f"{option} must be a number >= 0 or 'count', got {text!r}")
    return int(value) if value.is_integer() else value


def _make_timer(args: argparse.Namespace) -> Timer:
    from opbench.timer import Timer

    stmt = "\n".join(args.stmt) or "pass"
    setup = "\n".join(args.setup) or "pass"
    try:
        return Timer(stmt, setup, num_threads=args.threads, label=args.label, name=args.name,
                     flops=args.flops, bytes=args.bytes)
    except SyntaxError as e:
        # The filename is "<stmt>" or "<setup>": say which argument is wrong, and where.
        where = (e.filename or "code").strip("<>")
        code = f": {e.text.strip()}" if e.text else ""
        raise UsageError(f"{where} does not parse: {e.msg} (line {e.lineno}){code}") from None
    except ImportError as e:  # the statement names torch, which is not installed
        raise UsageError(str(e)) from None


def _without_object_line(text: str) -> str:
    """A result's text without its first line, ``<opbench... object at 0x...>``."""
    return text.split("\n", 1)[1] if text.startswith("<") else text


_TOP_FUNCTIONS = 25


def _top_functions(stats: Any) -> str:
    """The functions that ran the most instructions, names in full (``FunctionCounts``'
    own text, torch's, opens with an object address and cuts names to the print width,
    which leaves a C++ function only its library's path)."""
    rows = list(stats.as_standardized().stats(inclusive=False))[:_TOP_FUNCTIONS]
    width = max((len(f"{c.count:,}") for c in rows), default=1)
    return "\n".join([f"Top functions (instructions in {stats.number_per_run} runs, "
                      "exclusive, paths standardized):",
                      *(f"  {c.count:>{width},}  {c.function}" for c in rows)])


def _callgrind(args: argparse.Namespace, timer: Timer) -> tuple[int, Any]:
    from opbench.core.instructions import InstructionCounts
    from opbench.errors import CallgrindError, CallgrindUnavailableError

    try:
        stats = timer.collect_callgrind(number=args.number or _CALLGRIND_NUMBER,
                                        repeats=args.repeat)
    except CallgrindUnavailableError as e:  # valgrind (or its headers) missing: nothing to run
        print(f"opbench timeit: error: {e}", file=sys.stderr)
        return 2, None
    except CallgrindError as e:
        print(f"opbench timeit: error: callgrind failed: {e}", file=sys.stderr)
        return 1, None
    repeats = stats if isinstance(stats, tuple) else (stats,)
    print(_without_object_line(repr(repeats[0])))
    if args.verbose:
        print(_top_functions(repeats[0]))
    counts = InstructionCounts.from_callgrind(repeats)
    print(f"{counts.per_run:,.1f} instructions per run (noise symbols removed, baseline "
          "subtracted)")
    return 0, counts


def _memory(args: argparse.Namespace, timer: Timer) -> tuple[int, Any]:
    from opbench.errors import MemoryCountError, MemoryUnavailableError, SerializationError

    try:
        counts = timer.memory(args.number or _MEMORY_NUMBER, repeats=args.repeat or _MEMORY_REPEATS)
    except (MemoryUnavailableError, SerializationError) as e:  # nothing could run
        print(f"opbench timeit: error: {e}", file=sys.stderr)
        return 2, None
    except MemoryCountError as e:
        print(f"opbench timeit: error: the memory count failed: {e}", file=sys.stderr)
        return 1, None
    except Exception as e:  # the statement's own error, with the child's traceback
        traceback.print_exception(e)
        print(f"opbench timeit: error: the statement raised {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1, None
    print(counts.describe())
    return 0, counts


def measure(timer: Timer, *, number: int | None = None, repeat: int | None = None,
            min_run_time: float = 0.2, min_samples: int = _MIN_SAMPLES,
            target: float | None = None, default_repeat: int = 5) -> Measurement:
    """A Measurement as ``timeit``'s options ask (the notebook magics share it): until the
    median's interval is within ``target``; ``repeat`` blocks of ``number`` runs
    (``default_repeat`` of them without ``repeat``); ``repeat`` blocks of the automatic
    size; or, by default, blocks until ``min_run_time`` seconds and ``min_samples`` blocks."""
    from opbench.core.stopping import sample

    if target is not None:
        return timer.converge(target, min_run_time=min_run_time)
    if number is not None:
        return timer.repeat(repeat=repeat or default_repeat, number=number)
    if repeat is not None:  # R blocks of the automatic size
        size = timer.block_size(min_run_time)
        return timer.measurement(size, [timer.run(size) for _ in range(repeat)])
    return sample(timer, min_run_time=min_run_time, min_samples=min_samples)


def _measure(args: argparse.Namespace, timer: Timer, target: float | None) -> Measurement:
    return measure(timer, number=args.number, repeat=args.repeat, min_run_time=args.min_run_time,
                   min_samples=args.min_samples, target=target)


def _save(args: argparse.Namespace, result: Any) -> int:
    from opbench.store.baselines import autosave
    from opbench.store.results import save

    try:
        if args.save is not None:
            save(result, args.save)
            print(f"saved to {args.save}")
        if args.autosave:
            print(f"saved to {autosave(result)}")
    except OSError as e:
        print(f"opbench timeit: error: cannot write the results: {e}", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    target = _check_args(args)
    timer = _make_timer(args)
    if args.callgrind or args.memory:
        status, counts = (_callgrind if args.callgrind else _memory)(args, timer)
        return status if counts is None else _save(args, counts)
    try:
        if args.recover:
            from opbench.core.recovery import recovered

            m = recovered(lambda: _measure(args, timer, target))
        else:
            m = _measure(args, timer, target)
    # The user's statement may raise anything: show where, as python -m timeit does.
    except Exception as e:
        traceback.print_exc()
        print(f"opbench timeit: error: the statement raised {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    print(_without_object_line(m.describe() if args.verbose else repr(m)))
    if not args.verbose:
        from opbench.core import throughput

        work = throughput.describe(m)
        if work:
            print(work)
    return _save(args, m)
