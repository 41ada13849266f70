"""``python -m opbench timeit [-s SETUP]... [options] STMT...``: time a statement from the shell.

Like ``python -m timeit``, with opbench's Timer and statistics. Several STMT
(or -s SETUP) arguments are joined as lines of one block. By default the
statement is timed with ``blocked_autorange``; ``-n`` times ``-r`` blocks of
exactly N runs instead, and ``--converge`` measures until the median's 95%
confidence interval is within the target. The result prints as a
Measurement (``--verbose``: with std, median CI and outliers), and
``--save`` writes it as an opbench results file.

``--callgrind`` counts instructions instead of timing (valgrind, Linux):
``-n`` runs under callgrind (default 100).

Examples:
    python -m opbench timeit -s "xs = list(range(1000))" "sorted(xs)"
    python -m opbench timeit --converge 1% --verbose "sum(range(100))"
    python -m opbench timeit --callgrind -n 1000 "x = 1 + 1"

Exit status: 0 on success, 1 when the statement raises or callgrind fails,
2 for bad input (a statement that does not parse, bad options, no valgrind).
"""
from __future__ import annotations

import argparse
import sys
import traceback
from typing import TYPE_CHECKING

from opbench.cli import UsageError, command_parser

if TYPE_CHECKING:
    from opbench.measurement import Measurement
    from opbench.timer import Timer

_CALLGRIND_NUMBER = 100


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
    p.add_argument("-r", "--repeat", type=int, default=5, metavar="R",
                   help="with -n: how many blocks to time (default 5)")
    p.add_argument("--min-run-time", type=float, default=0.2, metavar="S",
                   help="seconds of measurement for autorange / --converge (default 0.2)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch threads while timing (default 1)")
    p.add_argument("--converge", default=None, metavar="TARGET",
                   help="measure until the median's 95%% CI is within +-TARGET "
                        "('1%%' or '0.01')")
    p.add_argument("--callgrind", action="store_true",
                   help="count instructions under callgrind (needs valgrind) instead of timing")
    p.add_argument("--label", default=None, help="label of the result (default: the statement)")
    p.add_argument("--save", default=None, metavar="PATH",
                   help="write the Measurement to PATH as an opbench results file")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="full statistics (Measurement.describe()); with --callgrind, the "
                        "functions with the most instructions")
    return p


def _fraction(text: str, option: str) -> float:
    """'1%' or '0.01' -> 0.01, with compare's parser; errors name ``option``."""
    from opbench.cli.compare import parse_threshold

    return parse_threshold(text, option)


def _check_args(args: argparse.Namespace) -> float | None:
    """Validates the options together; returns the --converge target, if any."""
    for option, value in (("--number", args.number), ("--repeat", args.repeat),
                          ("--threads", args.threads)):
        if value is not None and value < 1:
            raise UsageError(f"{option} must be a positive integer, got {value}")
    if not args.min_run_time > 0:
        raise UsageError(f"--min-run-time must be > 0, got {args.min_run_time}")
    target = None if args.converge is None else _fraction(args.converge, "--converge")
    if target is not None and args.number is not None:
        raise UsageError("--converge chooses the block size itself: drop -n/--number")
    if args.callgrind and (args.converge is not None or args.save is not None):
        raise UsageError("--callgrind counts instructions: it takes neither --converge nor --save")
    return target


def _make_timer(args: argparse.Namespace) -> Timer:
    from opbench.timer import Timer

    stmt = "\n".join(args.stmt) or "pass"
    setup = "\n".join(args.setup) or "pass"
    try:
        return Timer(stmt, setup, num_threads=args.threads, label=args.label)
    except SyntaxError as e:
        # The filename is "<stmt>" or "<setup>": say which argument is wrong, and where.
        where = (e.filename or "code").strip("<>")
        code = f": {e.text.strip()}" if e.text else ""
        raise UsageError(f"{where} does not parse: {e.msg} (line {e.lineno}){code}") from None


def _callgrind(args: argparse.Namespace, timer: Timer) -> int:
    from opbench.errors import CallgrindError, CallgrindUnavailableError

    try:
        stats = timer.collect_callgrind(number=args.number or _CALLGRIND_NUMBER)
    except CallgrindUnavailableError as e:  # valgrind (or its headers) missing: nothing to run
        print(f"python -m opbench timeit: error: {e}", file=sys.stderr)
        return 2
    except CallgrindError as e:
        print(f"python -m opbench timeit: error: callgrind failed: {e}", file=sys.stderr)
        return 1
    print(stats)
    if args.verbose:
        print(stats.stats(inclusive=False))
    return 0


def _measure(args: argparse.Namespace, timer: Timer, target: float | None) -> Measurement:
    if target is not None:
        return timer.converge(target, min_run_time=args.min_run_time)
    if args.number is not None:
        return timer.repeat(repeat=args.repeat, number=args.number)
    return timer.blocked_autorange(min_run_time=args.min_run_time)


def run(args: argparse.Namespace) -> int:
    target = _check_args(args)
    timer = _make_timer(args)
    if args.callgrind:
        return _callgrind(args, timer)
    try:
        m = _measure(args, timer, target)
    # The user's statement may raise anything: show where, as python -m timeit does.
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        print(f"python -m opbench timeit: error: the statement raised {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    print(m.describe() if args.verbose else repr(m))
    if args.save is not None:
        from opbench.results import save

        try:
            save(m, args.save)
        except OSError as e:
            print(f"python -m opbench timeit: error: cannot write {args.save}: {e}",
                  file=sys.stderr)
            return 1
        print(f"saved to {args.save}")
    return 0
