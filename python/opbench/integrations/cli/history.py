"""``opbench history [BENCHMARK...]``: a machine's runs per benchmark, and their change points.

Reads the runs autosaved under ``.opbench/<machine id>/`` (``--autosave``,
``--opbench-autosave``; ``--root`` or ``$OPBENCH_BASELINE_DIR`` move it) and
prints, per benchmark (all, or those named by key), one line per run in commit
order: run number, commit, branch, dirty flag, commit time, the median and its
interval; then the steps and drifts found in it (``opbench.stats.changepoints``: a
penalised piecewise-linear fit over commits), each with its size, commits and
``z`` (its size in standard errors of the history's run-to-run noise), marked
beyond the noise at ``--z`` (5) or more, within it below.

``--regressions`` prints instead every change that exceeds the noise, in all
benchmarks, largest first, up (slower: a regression) and down, with its commit
range (a step: the last commit before it and the first after; a drift: its first
and last commits). The exit status is 1 when a change up reaches
``--threshold``: a CI job that fails on a gradual drift no single comparison
would catch.

``--prune-keep N`` / ``--prune-older-than DAYS`` delete runs beyond the newest N
or saved more than DAYS ago (then print what is left).

Files that are damaged are named on stderr and skipped; what is valid in them
is kept.

Exit status: 0; 1 with --regressions when a change up reaches the threshold;
2 for bad input (an unknown benchmark, no history, a bad option).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from opbench.integrations.cli import UsageError, command_parser, parse_fraction


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
    p.add_argument("--z", type=float, default=5.0,
                   help="standard errors of the noise a change must reach (default 5)")
    p.add_argument("--prune-keep", type=int, metavar="N", help="delete all but the newest N runs")
    p.add_argument("--prune-older-than", type=float, metavar="DAYS",
                   help="delete runs saved more than DAYS ago")
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
        print(f"warning: skipped {problem}", file=sys.stderr)
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
    from opbench.store.history import commit_range, describe_change, format_value, short

    threshold = parse_fraction(args.threshold, "--threshold")
    h = _load(args)
    found = history.changes(h, args.benchmarks or None, z_min=args.z)
    if args.regressions:
        return _regressions(found, threshold)
    for series, detection in found:
        print(f"\n{series.key} ({series.kind}, noise {detection.noise:.2%} run to run)")
        for p in series.points:
            git = p.run.git
            print(f"  {p.run.number:>5}  {short(git.get('commit')):10}  "
                  f"{(git.get('branch') or '-')[:16]:16}  {'dirty' if git.get('dirty') else '     '}"
                  f"  {git.get('commit_time') or p.run.saved_at or '-':20}  "
                  f"{format_value(p.value, series.kind):>14}  "
                  f"[{format_value(p.low, series.kind)}, {format_value(p.high, series.kind)}]")
        for c in detection.changes:
            where = "beyond" if c.exceeds_noise else "within"
            print(f"  change: {describe_change(c)} at {commit_range(series, c)} "
                  f"(z={c.z:.1f}, {where} the noise)")
    return 0


def _regressions(found: list[Any], threshold: float) -> int:
    from opbench.store.history import commit_range, describe_change
    rows = [(s, c) for s, d in found for c in d.changes if c.exceeds_noise]
    rows.sort(key=lambda sc: -abs(sc[1].size))
    failing = [c for _, c in rows if c.size >= threshold]
    if not rows:
        print("no change beyond the noise in any benchmark")
    for series, c in rows:
        verdict = ("REGRESSION" if c.size >= threshold else
                   "slower" if c.size > 0 else "faster")
        print(f"{verdict:10}  {series.key}  ({series.kind})  {describe_change(c)}  "
              f"commits {commit_range(series, c)}  z={c.z:.1f}")
    if failing:
        print(f"\n{len(failing)} change(s) up of {threshold:.1%} or more", file=sys.stderr)
        return 1
    return 0
