"""``opbench find BENCHMARK GOOD BAD [options] -- COMMAND...``: the commit that made it slower.

Bisects the commits from GOOD to BAD (BAD's first-parent line) for the first one at
BAD's level of BENCHMARK (its key in the results COMMAND saves). COMMAND runs in a
temporary git worktree of each commit tested (``opbench.revisions.checkout``, as ``opbench ab``
runs it: the commit's code first on PYTHONPATH, extension modules copied or built)
and must save a results file: a pytest command with opbench's plugin does
(``--opbench-save`` is added), a script saves to ``$OPBENCH_RESULTS_FILE``.

GOOD and BAD are measured first (three runs each at least), to learn the two levels
and the run-to-run noise; then each step measures the middle commit of the range left and keeps the half
the step is in: N commits take about log2(N) steps. A commit whose value is too
close to the middle of the two levels to tell is run again (``--runs`` at
first, doubling up to ``--max-runs``). See ``opbench.revisions.bisection``.

Exit status: 0 when the commit is found; 1 when GOOD and BAD do not differ beyond
the noise (nothing to find); 2 for bad input (revisions, a command that fails or
saves no such benchmark); 130 on Ctrl-C or SIGTERM (the command is stopped and the
worktree removed).
"""
from __future__ import annotations

import argparse

from opbench.integrations.cli import UsageError, command_parser


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "find", "bisect commits for the one that changed a benchmark",
                       __doc__)
    p.add_argument("benchmark", metavar="BENCHMARK", help="the benchmark's key in the results")
    p.add_argument("good", metavar="GOOD", help="a commit at the old level (older)")
    p.add_argument("bad", metavar="BAD", help="a commit at the new level (newer)")
    p.add_argument("--runs", type=int, default=1, help="runs of COMMAND per commit at first "
                                                       "(default 1)")
    p.add_argument("--max-runs", type=int, default=8,
                   help="most runs at one commit when its level is unclear (default 8)")
    p.add_argument("--timeout", type=float, help="seconds one run of COMMAND may take")
    p.add_argument("--prepare", help="a command run once in each worktree before COMMAND "
                                     "(an install); split on spaces")
    p.add_argument("command", nargs="*", metavar="-- COMMAND",
                   help="the command that measures and saves a results file")
    return p


def run(args: argparse.Namespace) -> int:
    from opbench.revisions import RevisionError, bisection
    from opbench.revisions.command import sigterm_as_interrupt

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("give the command after --, e.g. -- python -m pytest benchmarks/")
    if args.runs < 1 or args.max_runs < max(args.runs, 2):
        raise UsageError(f"need 1 <= --runs <= --max-runs and --max-runs >= 2, got {args.runs} "
                         f"and {args.max_runs}")
    try:
        # A CI runner's cancel (SIGTERM) stops the runs and removes the worktree, as Ctrl-C.
        with sigterm_as_interrupt():
            found = bisection.find(args.benchmark, args.good, args.bad, command,
                                   runs=args.runs, max_runs=args.max_runs, timeout=args.timeout,
                                   prepare=args.prepare.split() if args.prepare else None,
                                   progress=print)
    except bisection.BisectError as e:
        if str(e).startswith("no step"):
            print(f"opbench find: {e}")
            return 1
        raise UsageError(str(e)) from None
    except RevisionError as e:
        raise UsageError(str(e)) from None
    first = found.first_bad
    print(f"\nfirst commit at the new level ({found.size:+.1%}): {first.commit} {first.subject}")
    print(f"last at the old level: {found.last_good.commit} {found.last_good.subject}")
    print(f"{found.steps} bisection step(s), {len(found.probes)} commits measured "
          f"(GOOD and BAD included), run-to-run noise {found.noise:.2%}")
    if any(p.uncertain for p in found.probes):
        print("warning: some commits stayed within the noise of both levels after --max-runs "
              "runs (marked uncertain above): check the answer with more runs")
    return 0
