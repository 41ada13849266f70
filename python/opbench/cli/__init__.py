"""``python -m opbench <command>``: one module per command under ``opbench.cli``.

Each command module defines ``add_parser(subparsers)`` (registering its
arguments, with help) and ``run(args) -> int`` (the exit status). Errors go to
stderr with a non-zero exit; ``--help`` works on every command.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from opbench.errors import UsageError

__all__ = ["COMMANDS", "UsageError", "command_parser", "build_parser", "main"]

# Command name -> module; modules import what they need only when run, so
# `python -m opbench --help` stays fast and torch-free.
COMMANDS = {
    "demo": "opbench.cli.demo",
    "timeit": "opbench.cli.timeit",
    "compare": "opbench.cli.compare",
    "show": "opbench.cli.show",
}


def command_parser(
    subparsers: argparse._SubParsersAction, name: str, help: str, doc: str | None
) -> argparse.ArgumentParser:
    """A command's parser: ``help`` for the command list, the module's docstring
    (its usage, meaning and exit status) for ``--help``."""
    return subparsers.add_parser(
        name, help=help, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m opbench",
        description="opbench: micro-benchmarks for PyTorch, Python and C++.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            continue  # a command not built yet
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run, _parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UsageError as e:
        args._parser.print_usage(sys.stderr)
        print(f"{args._parser.prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
