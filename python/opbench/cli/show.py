"""``python -m opbench show FILE [--trim] [--color] [--verbose]``: a results file as tables.

Loads a file written by ``opbench.save`` (or ``--opbench-save``, or
``python -m opbench timeit --save``) and prints its Measurements as Compare
tables: one per label, a row per sub_label (or statement) and thread count,
a column per description. A line above them says where the numbers were
measured.

Options:
    --trim      show each value only to the significant figures its spread supports.
    --color     colour each value against the best of its column (ANSI colours).
    --verbose   also the full environment and each Measurement's statistics
                (Measurement.describe(): std, median CI, outliers).

Exit status: 0, or 2 when the file is missing, corrupt or from a newer opbench.
"""
from __future__ import annotations

import argparse
import json

from opbench.cli import UsageError, command_parser

# The environment facts worth one line above the tables, in this order.
_SUMMARY_KEYS = ("hostname", "cpu_model", "python", "torch", "device")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "show", "print a saved results file as Compare tables", __doc__)
    p.add_argument("file", metavar="FILE", help="results file (opbench.save)")
    p.add_argument("--trim", action="store_true",
                   help="trim values to the significant figures their spread supports")
    p.add_argument("--color", action="store_true",
                   help="colour values against the best of their column")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print the environment and every Measurement's statistics")
    return p


def _environment_line(environment: dict[str, object]) -> str:
    facts = [f"{key}={environment[key]}" for key in _SUMMARY_KEYS
             if environment.get(key) is not None]
    return "measured on: " + (", ".join(facts) if facts else "(no environment recorded)")


def run(args: argparse.Namespace) -> int:
    from opbench.compare import Compare
    from opbench.results import ResultsFileError, load

    try:
        results = load(args.file)
    except (OSError, ResultsFileError) as e:
        raise UsageError(f"cannot load {args.file}: {e}") from None
    print(f"{args.file}: {len(results)} measurement(s)")
    print(_environment_line(results.environment))
    if args.verbose:
        print("environment: " + json.dumps(results.environment, sort_keys=True))
    if not results:
        return 0
    print()
    table = Compare(results)
    if args.trim:
        table.trim_significant_figures()
    if args.color:
        table.colorize()
    print(table)
    if args.verbose:
        for m in results:
            print()
            print(m.describe())
    return 0
