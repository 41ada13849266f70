"""``opbench compare BASELINE NEW`` (or ``--latest NEW``): did anything regress?

Matches the benchmarks of two results files by key (a benchmark's name=, else
its labels, else its statement; replicates pooled) and prints, per
benchmark and worst first, both sides' figures (a run's 10th percentile of
per-run time; several runs a side: the geometric mean of theirs), the ratio
NEW / BASELINE they make, its confidence interval and a verdict: "regression" /
"improvement" when the whole interval lies beyond the threshold, "same" within
it (or within it at the 90% of an equivalence test, shown), "inconclusive" when
it straddles it or too few samples formed no interval. A file pytest-benchmark
saved (--benchmark-json, or --benchmark-save-data) is read as results too. An inconclusive
benchmark whose ratio of medians is beyond the threshold is a "possible
regression", which fails the gate unless --inconclusive says otherwise.
Instruction counts (timeit --callgrind --save, pytest --opbench-mode
instructions) are compared exactly. Benchmarks found in one file only are
listed; a baseline benchmark missing from NEW fails with --fail-on-missing.

--gate-on byte_rate (flop_rate) gates on throughput: time per byte (FLOP) of
the work the results declared or counted (Timer(flops=..., bytes=...)).

--latest compares NEW with the latest run this machine saved with
--autosave (.opbench/, see opbench.store.baselines).

Names are printed as text: in Markdown escaped (they add no heading, link, HTML or
mention), on a terminal with their control characters as escapes. --redact leaves
out host names and absolute paths (for a public PR comment).

Exit status: 0 when the gate passes; 1 on a regression, a possible
regression (--inconclusive fail, the default) or a missing benchmark
(--fail-on-missing); 2 for bad input: a missing, corrupt or newer file, no
benchmark in common, a bad option.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from opbench import _choices
from opbench.integrations.cli import UsageError, command_parser, parse_fraction


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(
        subparsers, "compare",
        "compare two results files: ratios, confidence intervals, verdicts, an exit status",
        __doc__,
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="BASELINE NEW, or NEW alone with --latest")
    p.add_argument("--latest", action="store_true",
                   help="use this machine's latest autosaved run (.opbench/) as the baseline")
    p.add_argument("--threshold", default="5%",
                   help="relative change that matters, '5%%' or '0.05' (default 5%%)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence level of the intervals (default 0.95)")
    p.add_argument("--inconclusive", choices=_choices.POLICIES, default="fail",
                   help="what an undecided benchmark whose medians moved beyond the threshold "
                        "does: fail the gate (default), warn, or pass")
    p.add_argument("--fail-on-missing", action="store_true",
                   help="fail when a baseline benchmark is missing from NEW")
    p.add_argument("--gate-on", choices=_choices.GATE_METRICS, default="time",
                   help="what is gated: time (default), or throughput of the declared or "
                        "counted work")
    p.add_argument("--format", choices=_choices.FORMATS, default="text",
                   help="output: text (default), markdown (a PR comment) or json")
    p.add_argument("--redact", action="store_true",
                   help="leave out host names and absolute paths (a public PR comment)")
    return p


def _load(path: str) -> Any:
    from opbench.errors import ResultsFileError
    from opbench.store.results import load

    try:
        return load(path)
    except (OSError, ResultsFileError) as e:
        raise UsageError(f"cannot load {path}: {e}") from None


def _files(args: argparse.Namespace) -> tuple[str, str]:
    if args.latest:
        if len(args.files) != 1:
            raise UsageError("with --latest give only NEW (the baseline is the latest run)")
        from opbench.store.baselines import latest, machine_id, root_dir

        found = latest()
        if found is None:
            raise UsageError(f"--latest: no saved run of this machine ({machine_id()}) in "
                             f"{root_dir()}: save one with --autosave first")
        return str(found), args.files[0]
    if len(args.files) != 2:
        raise UsageError("give BASELINE and NEW (or --latest NEW)")
    return args.files[0], args.files[1]


def run(args: argparse.Namespace) -> int:
    from opbench import gate
    from opbench.errors import NothingToCompareError

    threshold = parse_fraction(args.threshold, "--threshold")
    if not 0 < args.confidence < 1:
        raise UsageError(f"--confidence must be in (0, 1), got {args.confidence!r}")
    baseline, new = _files(args)
    if baseline == new:
        raise UsageError(f"BASELINE and NEW are the same file ({new}): that compares a run "
                         "with itself")
    try:
        report = gate.compare(_load(baseline), _load(new), threshold=threshold,
                              confidence=args.confidence, inconclusive=args.inconclusive,
                              fail_on_missing=args.fail_on_missing, metric=args.gate_on)
    except NothingToCompareError as e:
        raise UsageError(f"{baseline} vs {new}: {e}") from None
    if args.redact:
        report = report.redacted()
    elif args.latest and args.format == "text":
        print(f"baseline: {baseline}")
    print(report.render(args.format))
    sys.stdout.flush()
    return report.exit_status
