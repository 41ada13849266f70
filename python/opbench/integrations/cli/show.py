"""``opbench show FILE... [--trim] [--color auto|always|never] [--verbose]``: results as tables.

Loads files written by ``opbench.save`` (or ``--opbench-save``, ``opbench
timeit --save``, ``--autosave``) and prints their results as Compare tables,
times and instruction counts each in a table of their own: a row per
benchmark, keyed as the regression gate keys it (``opbench.core.identity.key``:
its name, else its labels, else its statement; threads, env, clock), and a
column per file. So every benchmark of every file appears, two benchmarks of
one test stay two rows, and files side by side are runs side by side.
Replicates of a key in one file pool, as the gate pools them. A line per
file says where it was measured.

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


def _keyed(result: Any, title: str, column: str) -> Any:
    """``result`` placed in the table by its gate key (row) and its file (column)."""
    import dataclasses

    from opbench.core import identity
    from opbench.core.measurement import TaskSpec

    key = identity.key(result)
    return dataclasses.replace(result, task_spec=TaskSpec(
        stmt=key, setup="pass", label=title, sub_label=key, description=column))


def _print_table(results: list[Any], args: argparse.Namespace) -> None:
    from opbench.analysis.compare import Compare

    table = Compare(results)
    if args.trim:
        table.trim_significant_figures()
    if use_color(args.color):
        table.colorize()
    print()
    print(table)


def _instructions(results: Any) -> list[Any]:
    return list(results.instructions)


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
    for title, kind in (("times", list), ("instructions per run", _instructions)):
        group = [_keyed(r, title, path) for path, results in loaded for r in kind(results)]
        if group:
            _print_table(group, args)
    if args.verbose:
        for m in measurements:
            print()
            print(m.describe())
    return 0
