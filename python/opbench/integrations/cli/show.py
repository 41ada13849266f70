"""``opbench show FILE... [--format text|markdown|csv|html] [--columns LIST] [--trim] [--color ...]
[--verbose]``: results as tables.

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
    --format    text (Compare's tables, the default), markdown (a heading and a pipe table
                per table, for a PR comment or notebook), csv (one line per cell, medians
                and IQRs in seconds: ``opbench.analysis.export``) or html (escaped ``<table>``s).
                The exports print the tables only, no environment lines; csv's header
                appears once, for times and instruction counts alike.
    --trim      show each value only to the significant figures its spread supports.
    --columns   what each cell shows, comma-separated: time (default), GB/s, TFLOP/s,
                "% of peak" (from the work the results declared or counted).
    --color     colour each value against the best of its column: auto (on a terminal,
                unless NO_COLOR is set; the default), always or never.
    --verbose   also the full environment and each Measurement's statistics
                (Measurement.describe(): std, median CI, outliers).
    --redact    leave out host names and absolute paths (a file as its name), for output
                that is published.

Names are printed as text: on a terminal their control characters as escapes
(``\\x1b``), in Markdown escaped (no heading, link, HTML or mention of theirs), in
CSV a name that opens with ``=``, ``+``, ``-`` or ``@`` with a leading ``'``.

Exit status: 0, or 2 when a file is missing, corrupt or from a newer opbench.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
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
    p.add_argument("--columns", default="time", metavar="LIST",
                   help="comma-separated metrics per cell: time (default), GB/s, TFLOP/s, "
                        "'%% of peak'")
    add_color_option(p)
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print the environment and every Measurement's statistics")
    p.add_argument("--redact", action="store_true",
                   help="leave out host names and absolute paths (names, files, environment)")
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


def _keyed(result: Any, title: str, column: str, shown: Callable[[str], str] = str) -> Any:
    """``result`` placed in the table by its gate key (row) and its file (column), both
    as ``shown`` writes them."""
    import dataclasses

    from opbench.core import identity
    from opbench.core.measurement import TaskSpec

    key = shown(identity.key(result))
    spec = result.task_spec
    return dataclasses.replace(result, task_spec=TaskSpec(
        stmt=key, setup="pass", label=title, sub_label=key, description=shown(column),
        flops=spec.flops, bytes=spec.bytes))  # declared work: for the throughput columns


def _printable_spec(result: Any) -> Any:
    """``result`` with every name of its TaskSpec ``printable``, for ``describe()``."""
    import dataclasses

    from opbench._text import printable

    spec = result.task_spec
    return dataclasses.replace(result, task_spec=dataclasses.replace(spec, **{
        f.name: printable(getattr(spec, f.name)) for f in dataclasses.fields(spec)
        if isinstance(getattr(spec, f.name), str)}))


def _print_table(results: list[Any], args: argparse.Namespace) -> None:
    from opbench.analysis.compare import Compare

    table = Compare(results, columns=args.columns)
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


def _instructions(results: Any) -> list[Any]:
    return list(results.instructions)


def _memory(results: Any) -> list[Any]:
    return list(results.memory)


def _groups(loaded: list[tuple[str, Any]], shown: Callable[[str], str] = str,
            ) -> list[list[Any]]:
    """The tables' contents: times, then instruction counts, then memory counts, keyed by
    benchmark and file (the names as ``shown`` writes them)."""
    groups = []
    for title, kind in (("times", list), ("instructions per run", _instructions),
                        ("memory per call", _memory)):
        group = [_keyed(r, title, path, shown) for path, results in loaded
                 for r in kind(results)]
        if group:
            groups.append(group)
    return groups


def run(args: argparse.Namespace) -> int:
    from opbench import _redact
    from opbench._text import printable
    from opbench.analysis.columns import check

    check(args.columns)  # a bad --columns fails before any file is read
    loaded = [(path, _load(path)) for path in args.files]  # all or nothing: check every file
    hosts = _redact.hosts_of(*(results.environment for _, results in loaded))

    def hidden(text: str) -> str:
        return _redact.text(text, hosts) if args.redact else text

    if args.redact:
        for _, results in loaded:
            results.environment = _redact.environment(results.environment)
    if args.format != "text":
        if args.verbose:
            raise UsageError("--verbose prints the text tables' statistics: use it with "
                             "--format text")
        sys.stdout.write(_export(_groups(loaded, hidden), args))
        return 0
    # A terminal: names, paths and facts from the files have their control characters
    # shown as escapes, never sent (they could rewrite the screen).
    for path, results in loaded:
        print(printable(f"{hidden(path)}: {len(results)} measurement(s)"
                        + (f", {len(results.instructions)} instruction count(s)"
                           if results.instructions else "")
                        + (f", {len(results.memory)} memory count(s)" if results.memory else "")))
        print(printable(_environment_line(results.environment)))
        if args.verbose:
            print("environment: " + json.dumps(results.environment, sort_keys=True))
    for group in _groups(loaded, lambda text: printable(hidden(text))):
        _print_table(group, args)
    if args.verbose:
        for m in (m for _, results in loaded for m in results):
            print()
            print(_printable_spec(m).describe())
    return 0
