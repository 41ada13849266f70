"""``opbench ab --base REV [--rounds N] [--wave W] [--mode time|instructions|memory] -- COMMAND...``: is the
working tree slower than REV?

Checks REV out in a temporary git worktree (its code first on PYTHONPATH, its
compiled modules copied or built: see opbench.revisions.checkout), then runs COMMAND on
REV ("base") and on the working tree as it is, uncommitted edits included
("head"), in up to N rounds (default 3). COMMAND is a pytest run of benchmark
tests (its results are saved with --opbench-save) or any script that saves
opbench results to $OPBENCH_RESULTS_FILE. For a pytest command the base and
head processes of W rounds (a wave, default 3) run at once and take turns to
time in ~20 ms slices, so the machine's drift lands on every run alike
(--interleave runs: one round after the other, each in ABBA order). Every
run is one replicate: per benchmark, each run gives the 10th percentile of
its per-run times (--run-statistic median: its median),
the interval of the ratio head / base includes the variance between runs,
the suite's error is held by Holm's step-down, and the rounds stop early once
every benchmark is decided (looks after each wave). --mode instructions counts
instructions under callgrind instead: one round decides, and the report lists
the functions whose counts changed most, grouped by where they live. --mode memory
counts each benchmark's allocations, bytes, peak and leak per call (the allocation
counter preloaded): exact too, one round decides, and one extra allocation per call
is a regression.

A run that fails is reported and its round not counted; Ctrl-C (or SIGTERM)
stops the runs and reports the rounds that finished (exit status 130).
--redact leaves host names and absolute paths out of the report (a public PR
comment); in Markdown every name is escaped (no heading, link, HTML or mention of
its own).

Exit status: 0 when no benchmark regressed; 1 on a regression or a possible
regression (--inconclusive fail, the default), or when no round completed;
2 for bad input (no command, an unknown revision, a bad option); 130 on Ctrl-C.

Example:
    python -m opbench ab --base main -- pytest benchmarks/ -q
"""
from __future__ import annotations

import argparse
import shlex
import sys

from opbench import _choices
from opbench.integrations.cli import UsageError, command_parser, parse_fraction


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "ab",
                       "A/B two revisions: interleaved runs of a benchmark command, decided "
                       "on runs", __doc__)
    p.add_argument("--base", required=True, metavar="REV",
                   help="the revision to compare the working tree with (main, HEAD~1, a commit)")
    p.add_argument("--rounds", type=int, default=_choices.ROUNDS, metavar="N",
                   help="rounds (a base and a head run each) at most (default %(default)s)")
    p.add_argument("--wave", type=int, default=_choices.WAVE, metavar="W",
                   help="with turns: rounds whose processes start at once and take turns "
                        "(default %(default)s); the session may stop after each wave")
    p.add_argument("--mode", choices=_choices.MODES, default="time",
                   help="time (default), instructions (callgrind) or memory (allocations, bytes, "
                        "peak and leak per call); counts: one round decides")
    p.add_argument("--threshold", default="5%",
                   help="the slowdown that matters, e.g. 5%% (default) or 0.05; a "
                        "benchmark's own (fixture threshold=) wins")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="for the whole session, all benchmarks and rounds (default 0.95)")
    p.add_argument("--inconclusive", choices=_choices.POLICIES, default="fail",
                   help="an undecided benchmark that looks slower: fail (default), warn or pass")
    p.add_argument("--interleave", choices=_choices.INTERLEAVES, default="auto",
                   help="turns: both processes at once, taking turns to time (pytest); runs: "
                        "one after the other; auto (default): turns when both sides can")
    p.add_argument("--format", choices=_choices.FORMATS, default="text",
                   help="the report's format on stdout (default text)")
    p.add_argument("--output", metavar="PATH",
                   help="also write the report (in --format) to PATH")
    p.add_argument("--prepare", metavar="CMD",
                   help="a command run once in the base's checkout (e.g. an install)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds each run may take (default: no limit)")
    p.add_argument("--keep", metavar="DIR", help="keep every run's results file in DIR")
    p.add_argument("--redact", action="store_true",
                   help="leave host names and absolute paths out of the report (a public PR "
                        "comment)")
    p.add_argument("--run-statistic", choices=_choices.RUN_STATISTICS, default="p10",
                   help="what a run contributes per benchmark: the 10th percentile of its "
                        "per-run times (default: the code's cost when the machine let it "
                        "run) or its median")
    p.add_argument("command", nargs="*", metavar="-- COMMAND",
                   help="the benchmark command (after --)")
    return p


def run(args: argparse.Namespace) -> int:
    from opbench._files import atomic_write_text, check_writable
    from opbench.revisions import RevisionError
    from opbench.revisions.command import sigterm_as_interrupt
    from opbench.revisions.session import run_ab

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("give the benchmark command after --, e.g. `-- pytest benchmarks/ -q`")
    for option, value in (("--rounds", args.rounds), ("--wave", args.wave)):
        if value < 1:
            raise UsageError(f"{option} must be a positive integer, got {value}")
    if not 0 < args.confidence < 1:
        raise UsageError(f"--confidence must be in (0, 1), got {args.confidence!r}")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    threshold = parse_fraction(args.threshold, "--threshold")
    if args.output:
        try:
            check_writable(args.output)  # before the session, not after it
        except OSError as e:
            raise UsageError(f"--output {args.output}: {e}") from None
    try:
        with sigterm_as_interrupt():
            report = run_ab(command, args.base, rounds=args.rounds, mode=args.mode,
                            threshold=threshold, confidence=args.confidence,
                            inconclusive=args.inconclusive, interleave=args.interleave,
                            prepare=shlex.split(args.prepare) if args.prepare else None,
                            timeout=args.timeout, keep=args.keep,
                            statistic=args.run_statistic, wave=args.wave)
    except RevisionError as e:
        raise UsageError(str(e)) from None
    except ValueError as e:  # run_ab's arguments (--keep: a folder it cannot make)
        raise UsageError(str(e)) from None
    text = (report.redacted() if args.redact else report).render(args.format)
    sys.stdout.write(text)
    sys.stdout.flush()
    if args.output:
        atomic_write_text(args.output, text)
    return 130 if report.interrupted else report.exit_status
