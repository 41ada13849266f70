"""``opbench history [BENCHMARK...]``: a machine's runs per benchmark, and their change points;
``opbench history run REVS... -- COMMAND``: fill it for past commits.

Reads the runs autosaved under ``.opbench/<machine id>/`` (``--autosave``,
``--opbench-autosave``, ``history run``; ``--root`` or ``$OPBENCH_BASELINE_DIR``
move it) and prints, per benchmark (all, or those named by key), one line per
commit in commit order: the commit, its tag, how many runs it has, its value
(the median of its runs' figures: a run's figure is the 10th percentile of its
per-run times, ``opbench.stats.run_figure``), the range of its runs and its
subject (``--each-run``: one line per run instead), and a line per step with
paired rounds (their count and ratio; ``--each-run``: each round); then the steps and drifts
found in it (``opbench.stats.changepoints``: a penalised fit over commits, a
commit's runs its replicates), each with its size, commits (and tags) and ``z``
(its size in standard errors of the history's run-to-run noise), marked beyond
the noise at ``--z`` (5) or more, within it below.

``--regressions`` prints instead every change that exceeds the noise, in all
benchmarks: first the changes up that still hold at the latest commit (a
regression, largest first), then those a later change undid (named with the
change that undid them: a regression fixed), then the changes down, each with
its commit range (a step: the last commit before it and the first after; a
drift: its first and last commits). The exit status is 1 when a change up still
holds by ``--threshold`` or more at the latest commit: a CI job that fails on a
gradual drift no single comparison would catch, and not on one fixed since.

``history run REVS... [--runs N] [--tags PATTERN] [--only-tagged] -- COMMAND``
runs COMMAND at each commit REVS name (``A..B``: A and the commits after it up
to B on B's first-parent line; a commit, branch or tag; ``--tags`` adds the tags
matching PATTERN, ``--only-tagged`` keeps the tagged commits) in a temporary git
worktree of it (``opbench.revisions.backfill``; the checkout you are in is never
touched), N times each in passes over all commits (3 by default: a commit's runs
are its replicates), and autosaves each run with that commit's facts. Then, up
to 2N times, it runs again at each commit the benchmarks that have fewer than N
runs there at full speed (a run whose fastest blocks shared their core with
another tenant's work does not count; ``--no-makeup`` skips these make-up runs).
Last, each step in doubt (two neighbouring commits whose levels differ by 2.5 or
more standard errors of the run-to-run noise, with no change beyond the noise
between them) gets 3N paired rounds: its two commits' runs back to back, whose
ratio the step is tested on with its levels (``--no-settle`` skips them).
A commit that has its runs already is skipped, so the same command resumes a
backfill cut short. COMMAND saves a results file as for ``opbench ab`` (a pytest command
with opbench's plugin does; a script saves to ``$OPBENCH_RESULTS_FILE``).

``--prune-keep N`` / ``--prune-older-than DAYS`` delete runs beyond the newest N
or saved more than DAYS ago (then print what is left).

Files that are damaged are named on stderr and skipped; what is valid in them
is kept.

Exit status: 0; 1 with --regressions when a change up holds at the threshold,
and for ``run`` when a run failed; 2 for bad input (an unknown benchmark, no
history, a bad option or revision); 130 when ``run`` is interrupted (what was
saved stays).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from opbench._text import printable
from opbench.integrations.cli import UsageError, command_parser, parse_fraction
from opbench.stats import changepoints


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "history",
                       "a machine's autosaved runs per benchmark, change points, regressions",
                       __doc__)
    p.add_argument("benchmarks", nargs="*", metavar="BENCHMARK",
                   help="benchmark keys (default: all)")
    p.add_argument("--root", help="the baselines folder (default $OPBENCH_BASELINE_DIR or "
                                  ".opbench)")
    p.add_argument("--machine", help="machine id (default: this machine's)")
    p.add_argument("--regressions", action="store_true",
                   help="list the changes beyond the noise, largest first; exit 1 when one "
                        "up reaches --threshold")
    p.add_argument("--threshold", default="5%",
                   help="size of a change up that fails --regressions, '5%%' or '0.05' "
                        "(default 5%%)")
    p.add_argument("--z", type=float, default=changepoints.Z_MIN,
                   help="standard errors of the noise a change must reach (default 5)")
    p.add_argument("--prune-keep", type=int, metavar="N", help="delete all but the newest N runs")
    p.add_argument("--prune-older-than", type=float, metavar="DAYS",
                   help="delete runs saved more than DAYS ago")
    p.add_argument("--each-run", action="store_true",
                   help="one line per run instead of one per commit")
    run = p.add_argument_group("history run REVS... -- COMMAND (fill the history for past "
                               "commits)")
    run.add_argument("--runs", type=int, default=3,
                     help="runs per commit, in passes over all commits (default 3)")
    run.add_argument("--tags", metavar="PATTERN",
                     help="also run the tags matching PATTERN ('v*'; git tag --list)")
    run.add_argument("--only-tagged", action="store_true",
                     help="run only the tagged commits among those REVS name")
    run.add_argument("--prepare", help="a command run in each worktree before COMMAND (an "
                                       "install); split on spaces")
    run.add_argument("--timeout", type=float, help="seconds one run of COMMAND may take")
    run.add_argument("--no-makeup", dest="makeup", action="store_false",
                     help="no make-up runs for the benchmarks with fewer than N runs at full "
                          "speed at a commit")
    run.add_argument("--no-settle", dest="settle", action="store_false",
                     help="no paired rounds at the steps in doubt")
    p.set_defaults(command=[])
    return p


def _load(args: argparse.Namespace) -> Any:
    from opbench.store import baselines, history

    machine = args.machine or baselines.machine_id()
    if args.prune_keep is not None or args.prune_older_than is not None:
        if args.prune_keep is not None and args.prune_keep < 0:
            raise UsageError(f"--prune-keep must be >= 0, got {args.prune_keep}")
        removed = history.prune(args.root, machine, keep=args.prune_keep,
                                older_than_days=args.prune_older_than)
        print(f"pruned {len(removed)} run(s)")
    h = history.load(args.root, machine)
    for problem in h.problems:
        print(printable(f"warning: skipped {problem}"), file=sys.stderr)
    if not h.runs and args.prune_keep is None and args.prune_older_than is None:
        known = history.machines(args.root)
        raise UsageError(f"no saved runs of machine {machine} in {baselines.root_dir(args.root)}"
                         + (f" (machines there: {', '.join(known)}; --machine picks one)"
                            if known else ": save some with --autosave first"))
    keys = {k for k, _ in h.benchmarks()}
    unknown = [b for b in args.benchmarks if b not in keys]
    if unknown:
        raise UsageError(f"no benchmark {', '.join(map(repr, unknown))} in this history; it has: "
                         + ", ".join(sorted(keys)))
    return h


def run(args: argparse.Namespace) -> int:
    from opbench.store import history

    if args.benchmarks[:1] == ["run"] and (args.command or len(args.benchmarks) > 1):
        return _backfill(args)
    if args.command:
        raise UsageError("`-- COMMAND` is for `opbench history run REVS -- COMMAND`")
    threshold = parse_fraction(args.threshold, "--threshold")
    h = _load(args)
    found = history.changes(h, args.benchmarks or None, z_min=args.z)
    if args.regressions:
        return _regressions(found, threshold)
    # Names, branches, subjects and commits come from the files: their control characters
    # are shown as escapes (``printable``), never sent to the terminal.
    for series, detection in found:
        groups = series.by_commit()
        most = max(len(points) for _, points in groups)
        print()  # a blank line between benchmarks (printable would show a newline escaped)
        print(printable(f"{series.key} ({series.kind}, noise {detection.noise:.2%} run to "
                        f"run, up to {most} run(s) a commit)"))
        for line in (_runs(series) if args.each_run else _commits(series)):
            print(printable(line))
        for line in _rounds(series, args.each_run):
            print(printable(line))
        for c in detection.changes:
            where = "beyond" if c.exceeds_noise else "within"
            print(printable(f"  change: {history.describe_change(c)} at "
                            f"{history.commit_range(series, c)} ({history.evidence(c)}, {where} the noise)"))
    return 0


def _commits(series: Any) -> list[str]:
    """One line per commit: commit, tag, runs, value (the median of the runs its level is
    made of: those at full speed, where it has some), their range, subject."""
    import statistics

    from opbench.core.formatting import format_value
    from opbench.store.history import counted, short, tag

    lines, groups, left_out = [], series.by_commit(), False
    for commit, points in groups:
        kept = counted(points)
        left_out |= len(kept) < len(points)
        values = sorted(p.value for p in kept)
        git = points[0].run.git
        value = statistics.median(values)
        # One run counted: its own interval (not another run's: one left out reads apart).
        low, high = (values[0], values[-1]) if len(values) > 1 else (kept[0].low, kept[0].high)
        spread = f"[{format_value(low, series.kind)}, {format_value(high, series.kind)}]"
        lines.append(f"  {short(commit):12}  {(tag(points) or '-')[:14]:14}  "
                     f"{'dirty' if git.get('dirty') else '     '}  {len(points):>3} run(s)  "
                     f"{format_value(value, series.kind):>14}  {spread:28}  "
                     f"{(git.get('subject') or '')[:60]}")
    if left_out:
        lines.append("  (runs on a core another tenant slowed are left out where their commit "
                     "has runs at full speed: --each-run shows them)")
    return lines


def _runs(series: Any) -> list[str]:
    """One line per run: number, commit, branch, dirty, time, value and its interval, and
    how much slower than the machine's full speed its core ran, where it was slowed."""
    from opbench.core.formatting import format_value
    from opbench.store.history import short

    return [f"  {p.run.number:>5}  {short(p.run.git.get('commit')):12}  "
            f"{(p.run.git.get('branch') or '-')[:16]:16}  "
            f"{'dirty' if p.run.git.get('dirty') else '     '}  "
            f"{p.run.git.get('commit_time') or p.run.saved_at or '-':20}  "
            f"{format_value(p.value, series.kind):>14}  "
            f"[{format_value(p.low, series.kind)}, {format_value(p.high, series.kind)}]"
            + (f"  on a slowed core ({p.slowdown:.2f}x full speed by the speed probe)"
               if p.slow_core else "")
            for p in series.points]


def _rounds(series: Any, each_run: bool) -> list[str]:
    """One line per step with paired rounds (``opbench.revisions.backfill``): its commits,
    how many rounds count (both runs at full speed) of those run, and the after/before
    ratio's geometric mean and range over them; ``each_run`` adds a line per round."""
    import statistics

    from opbench.core.formatting import format_value
    from opbench.store.history import counted_rounds, label

    lines = []
    for pairs in series.rounds.values():
        ratios = [b.value / a.value for a, b in counted_rounds(pairs)]
        line = (f"  rounds {label([pairs[0][0]])}..{label([pairs[0][1]])}: "
                f"{len(ratios)} of {len(pairs)} at full speed")
        if ratios:
            mean = statistics.geometric_mean(ratios)
            line += f", after/before {mean - 1:+.1%} [{min(ratios) - 1:+.1%}, {max(ratios) - 1:+.1%}]"
        lines.append(line)
        if each_run:
            lines += [f"    {format_value(a.value, series.kind):>14}  "
                      f"{format_value(b.value, series.kind):>14}  {b.value / a.value - 1:+7.1%}"
                      + ("  on a slowed core" if a.slow_core or b.slow_core else "")
                      for a, b in pairs]
    return lines


def _regressions(found: list[Any], threshold: float) -> int:
    """The changes beyond the noise: those up that hold (failing at the threshold), those
    a later change undid, then those down."""
    from opbench.store.history import commit_range, describe_change, evidence, standing

    rows = []
    for series, detection in found:
        for c in detection.changes:
            if c.exceeds_noise:
                rows.append((series, c, standing(detection, c)))
    holding = sorted((r for r in rows if r[1].size > 0 and r[2].holds), key=lambda r: -r[1].size)
    undone = sorted((r for r in rows if r[1].size > 0 and not r[2].holds),
                    key=lambda r: -r[1].size)
    down = sorted((r for r in rows if r[1].size <= 0), key=lambda r: r[1].size)
    if not rows:
        print("no change beyond the noise in any benchmark")
    failing = 0
    for series, c, where in holding:
        fails = where.still >= threshold
        failing += fails
        print(printable(f"{'REGRESSION' if fails else 'slower':10}  {series.key}  "
                        f"({series.kind})  {describe_change(c)}  commits "
                        f"{commit_range(series, c)}  {evidence(c)}; still {where.still:+.1%} at "
                        "the latest commit"))
    for series, c, where in undone:
        assert where.undone_by is not None
        print(printable(f"{'fixed':10}  {series.key}  ({series.kind})  {describe_change(c)}  "
                        f"commits {commit_range(series, c)}  {evidence(c)}; undone at "
                        f"{commit_range(series, where.undone_by)} "
                        f"({describe_change(where.undone_by)})"))
    for series, c, _ in down:
        print(printable(f"{'faster':10}  {series.key}  ({series.kind})  {describe_change(c)}  "
                        f"commits {commit_range(series, c)}  {evidence(c)}"))
    if failing:
        print(f"\n{failing} change(s) up of {threshold:.1%} or more still hold at the latest "
              "commit", file=sys.stderr)
        return 1
    return 0


def _backfill(args: argparse.Namespace) -> int:
    """``history run REVS... -- COMMAND``."""
    from opbench.revisions import RevisionError, backfill
    from opbench.revisions.command import sigterm_as_interrupt

    revs = args.benchmarks[1:]
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("give the command after --, e.g. opbench history run v1.0..main -- "
                         "python -m pytest benchmarks/")
    if not revs and args.tags is None:
        raise UsageError("give the revisions to run (A..B, commits, tags) or --tags PATTERN")
    if args.runs < 1:
        raise UsageError(f"--runs must be a positive integer, got {args.runs}")
    try:
        with sigterm_as_interrupt():
            done = backfill.backfill(revs, command, runs=args.runs, root=args.root,
                                     tags=args.tags, only_tagged=args.only_tagged,
                                     prepare=args.prepare.split() if args.prepare else None,
                                     timeout=args.timeout, makeup=args.makeup,
                                     settle=args.settle,
                                     progress=lambda line: print(printable(line), flush=True))
    except RevisionError as e:
        raise UsageError(str(e)) from None
    print(f"{len(done.saved)} run(s) saved over {len(done.commits)} commit(s) ({done.makeup} "
          f"make-up, {done.rounds} paired round(s)), {done.skipped} already in the history, "
          f"{len(done.failed)} failed")
    if done.interrupted:
        return 130
    return 1 if done.failed else 0
