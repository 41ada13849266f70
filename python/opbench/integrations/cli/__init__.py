"""``opbench <command>`` (or ``python -m opbench <command>``): one module per command.

Each command module defines ``add_parser(subparsers)`` (registering its
arguments, with help) and ``run(args) -> int`` (the exit status). Errors go to
stderr as ``<prog> <command>: error: ...`` after the command's usage, with exit
status 2; ``--help`` works on every command.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from opbench.errors import BenchmarkWarning, UsageError

__all__ = ["COMMANDS", "UsageError", "build_parser", "command_parser", "main", "parse_fraction",
           "use_color"]

# Command name -> module; modules import what they need only when run, so
# `opbench --help` stays fast and torch-free.
COMMANDS = {
    "demo": "opbench.integrations.cli.demo",
    "timeit": "opbench.integrations.cli.timeit",
    "compare": "opbench.integrations.cli.compare",
    "show": "opbench.integrations.cli.show",
    "ab": "opbench.integrations.cli.ab",
    "compile-overheads": "opbench.integrations.cli.compile_overheads",
    "history": "opbench.integrations.cli.history",
    "report": "opbench.integrations.cli.report",
    "find": "opbench.integrations.cli.find",
    "peaks": "opbench.integrations.cli.peaks",
    "check": "opbench.integrations.cli.check",
}


def command_parser(
    subparsers: argparse._SubParsersAction, name: str, help: str, doc: str | None
) -> argparse.ArgumentParser:
    """A command's parser: ``help`` for the command list, the module's docstring
    (its usage, meaning and exit status) for ``--help``."""
    return subparsers.add_parser(  # type: ignore[no-any-return]
        name, help=help, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def parse_fraction(text: str, option: str) -> float:
    """'5%' or '0.05' -> 0.05; raises UsageError, naming ``option``, outside (0, 1).

    >>> parse_fraction("5%", "--threshold"), parse_fraction("0.01", "--converge")
    (0.05, 0.01)
    """
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"{option} must look like '5%' or '0.05', got {text!r}") from None
    if not 0 < value < 1:
        raise UsageError(f"{option} must be between 0% and 100% (exclusive), got {text!r}")
    return value


def add_color_option(parser: argparse.ArgumentParser) -> None:
    """``--color auto|always|never``, the same on every command that colours."""
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the table: on a terminal unless NO_COLOR is set (auto, "
                             "the default), always, or never")


def use_color(choice: str, stream: object = None) -> bool:
    """Whether to colour: ``always``/``never`` as said; ``auto`` on a terminal, unless the
    ``NO_COLOR`` environment variable is set (https://no-color.org)."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream if stream is not None else sys.stdout, "isatty", None)
    return bool(isatty is not None and isatty())


def _program_name() -> str:
    """``opbench`` when run as the installed script, ``python -m opbench`` otherwise."""
    invoked = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "opbench" if invoked == "opbench" else "python -m opbench"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_program_name(),
        description="opbench: micro-benchmarks for PyTorch, Python and C++.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMANDS.values():
        module = importlib.import_module(module_name)
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run, _parser=sub)
    return parser


def _takes_a_command(parser: argparse.ArgumentParser) -> bool:
    """Whether a subcommand ends with a ``-- COMMAND`` of its own (ab, find; history, whose
    ``history run`` takes one: its parser defaults ``command``)."""
    return (any(a.dest == "command" and a.nargs == "*" for a in parser._actions)
            or parser.get_default("command") is not None)


@contextlib.contextmanager
def _warnings_as_lines(prog: str) -> Iterator[None]:
    """opbench's own warnings as ``<prog>: warning: ...`` lines on stderr: they speak to
    the user of the command, not of the source line that raised them (which Python's
    format shows); other warnings as Python formats them. Only the format changes, so
    what records warnings (``pytest.warns``) still records them."""
    formatted = warnings.formatwarning

    def line(message: Any, category: type[Warning], *rest: Any, **kw: Any) -> str:
        if issubclass(category, BenchmarkWarning):
            return f"{prog}: warning: {message}\n"
        return formatted(message, category, *rest, **kw)

    warnings.formatwarning = line
    try:
        yield
    finally:
        warnings.formatwarning = formatted


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(argv)
    if "--" in argv and _takes_a_command(args._parser):
        # `ab`/`find ... [options] -- COMMAND`: argparse would take options written
        # before `--` as part of COMMAND (a REMAINDER swallows them, a `*` stops
        # early), so the options are parsed apart and COMMAND is what follows `--`.
        cut = argv.index("--")
        args, unknown = parser.parse_known_args(argv[:cut])
        args.command = argv[cut + 1:]
    if unknown:  # the command's own usage, not the program's
        args._parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        with _warnings_as_lines(args._parser.prog):
            return int(args._run(args) or 0)
    except UsageError as e:
        args._parser.print_usage(sys.stderr)
        print(f"{args._parser.prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
