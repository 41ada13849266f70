"""``opbench show FILE... [--trim] [--color auto|always|never] [--verbose]``: results as tables.

Loads files written by ``opbench.save`` (or ``--opbench-save``, ``opbench
timeit --save``, ``--autosave``) and prints their results as Compare tables:
one per label, a row per sub_label (or statement) and thread count, a column
per description; instruction counts in tables of their own. Several files
are shown together (results from different machines or runs side by side
when their env differs). A line per file says where it was measured.

Options:
    --trim      show each value only to the significant figures its spread supports.
    --color     colour each value against the best of its column: auto (on a terminal,
                unless NO_COLOR is set; the default), always or never.
    --verbose   also the full environment and each Measurement's statistics
                (Measurement.describe(): std, median CI, outliers).

Exit status: 0, or 2 when a file is missing, corrupt or from a newer opbench.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from opbench.integrations.cli import UsageError, add_color_option, command_parser, use_color

# The environment facts worth one line above the tables, in this order.
_SUMMARY_KEYS = ("hostname", "cpu_model", "python", "torch", "device")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "show", "print a saved results file as Compare tables", __doc__)
    p.add_argument("files", nargs="+", metavar="FILE", help="results files (opbench.save)")
    p.add_argument("--trim", action="store_true",
                   help="trim values to the significant figures their spread supports")
    add_color_option(p)
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print the environment and every Measurement's statistics")
    return p


def _environment_line(environment: dict[str, object]) -> str:
    facts = [f"{key}={environment[key]}" for key in _SUMMARY_KEYS
             if environment.get(key) is not None]
    return "measured on: " + (", ".join(facts) if facts else "(no environment recorded)")


def _load(path: str) -> Any:
    from opbench.errors import ResultsFileError
    from opbench.store.results import load

    try:
        return load(path)
    except (OSError, ResultsFileError) as e:
        raise UsageError(f"cannot load {path}: {e}") from None


def _print_table(results: list[Any], args: argparse.Namespace) -> None:
    from opbench.analysis.compare import Compare

    table = Compare(results)
    if args.trim:
        table.trim_significant_figures()
    if use_color(args.color):
        table.colorize()
    print()
    print(table)


def run(args: argparse.Namespace) -> int:
    loaded = [(path, _load(path)) for path in args.files]  # all or nothing: check every file
    for path, results in loaded:
        print(f"{path}: {len(results)} measurement(s)"
              + (f", {len(results.instructions)} instruction count(s)"
                 if results.instructions else ""))
        print(_environment_line(results.environment))
        if args.verbose:
            print("environment: " + json.dumps(results.environment, sort_keys=True))
    measurements = [m for _, results in loaded for m in results]
    counts = [c for _, results in loaded for c in results.instructions]
    for group in (measurements, counts):
        if group:
            _print_table(group, args)
    if args.verbose:
        for m in measurements:
            print()
            print(m.describe())
    return 0
