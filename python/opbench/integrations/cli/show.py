"""``opbench show FILE... [--format text|markdown|csv|html] [--trim] [--color ...] [--verbose]``:
results as tables.

Loads files written by ``opbench.save`` (or ``--opbench-save``, ``opbench
timeit --save``, ``--autosave``) and prints their results as Compare tables:
one per label, a row per sub_label (or statement) and thread count, a column
per description; instruction counts in tables of their own. Several files
are shown together (results from different machines or runs side by side
when their env differs). A line per file says where it was measured.

Options:
    --format    text (Compare's tables, the default), markdown (a heading and a pipe table
                per label, for a PR comment or notebook), csv (one line per cell, medians
                and IQRs in seconds: ``opbench.analysis.export``) or html (escaped ``<table>``s).
                The exports print the tables only, no environment lines; csv's header
                appears once, for times and instruction counts alike.
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
import sys
from typing import Any

from opbench.integrations.cli import UsageError, add_color_option, command_parser, use_color

# The environment facts worth one line above the tables, in this order.
_SUMMARY_KEYS = ("hostname", "cpu_model", "python", "torch", "device")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "show", "print a saved results file as Compare tables", __doc__)
    p.add_argument("files", nargs="+", metavar="FILE", help="results files (opbench.save)")
    p.add_argument("--trim", action="store_true",
                   help="trim values to the significant figures their spread supports")
    p.add_argument("--format", choices=("text", "markdown", "csv", "html"), default="text",
                   help="text tables (default), or an export: markdown, csv or html")
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


def _export(groups: list[list[Any]], args: argparse.Namespace) -> str:
    from opbench.analysis import export
    from opbench.analysis.compare import Compare

    parts: list[str] = []
    for group in groups:
        table = Compare(group)
        if args.trim:
            table.trim_significant_figures()
        text = {"markdown": export.to_markdown, "csv": export.to_csv,
                "html": export.to_html}[args.format](table)
        if args.format == "csv" and parts:  # one header for the whole file
            text = text.split("\n", 1)[1]
        parts.append(text)
    return ("" if args.format == "csv" else "\n").join(parts)


def run(args: argparse.Namespace) -> int:
    loaded = [(path, _load(path)) for path in args.files]  # all or nothing: check every file
    if args.format != "text":
        if args.verbose:
            raise UsageError("--verbose prints the text tables' statistics: use it with "
                             "--format text")
        groups = [[m for _, r in loaded for m in r], [c for _, r in loaded for c in r.instructions]]
        sys.stdout.write(_export([g for g in groups if g], args))
        return 0
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
