"""Notebooks: ``%load_ext opbench`` gives the ``%opbench`` and ``%%opbench`` magics.

They keep ``%timeit``'s habits and time with opbench's Timer::

    %opbench [options] STATEMENT       # one line, in the notebook's names
    %%opbench [options] [SETUP]        # the cell is timed; the rest of the first line is setup

* ``-n N``: runs per block; ``-r R``: blocks (``-n`` alone: 7 blocks, as ``%timeit``;
  ``-r`` alone: R blocks of the automatic size; neither: blocks until
  ``--min-run-time`` seconds and 10 blocks, as ``opbench timeit``);
* ``-o``: return the result (a Measurement, or InstructionCounts with
  ``--callgrind``); ``-q``: do not display it;
* opbench's own: ``--threads N``, ``--min-run-time S``, ``--converge TARGET``
  (``1%``: measure until the median's 95% interval is within +-1%),
  ``--callgrind`` (instruction counts under valgrind; ``-n`` runs, ``-r`` repeats),
  ``--no-recover`` (keep a figure the busy machine disturbed; by default it is
  measured again), ``--label``, ``--sub-label``, ``--description``, ``-v``
  (``Measurement.describe()``).

The statement sees the notebook's names (a copy: what it assigns stays in the
timing). A result displays as HTML (``Measurement._repr_html_``: torch's text,
warnings in red); ``Compare`` and the gates' reports render as HTML too.
A bad option or a statement that does not parse raises ``UsageError`` /
``SyntaxError`` at once; an exception inside the statement shows its own
traceback.
"""
from __future__ import annotations

from typing import Any

from opbench.errors import UsageError
from opbench.integrations.cli import parse_fraction

__all__ = ["load_ipython_extension"]

# %timeit's default number of blocks for a given -n.
_REPEAT = 7
_CALLGRIND_NUMBER = 100
_LONG_OPTIONS = ["threads=", "min-run-time=", "converge=", "callgrind", "no-recover", "label=",
                 "sub-label=", "description="]


def _positive(opts: Any, name: str, kind: type = int) -> Any:
    value = opts.get(name)
    if value is None:
        return None
    try:
        number = kind(value)
    except ValueError:
        raise UsageError(f"-{'-' if len(name) > 1 else ''}{name} must be a positive number, "
                         f"got {value!r}") from None
    if not number > 0:
        raise UsageError(f"-{'-' if len(name) > 1 else ''}{name} must be positive, got {value!r}")
    return number


def run_magic(line: str, cell: str | None, namespace: dict[str, Any], parse: Any) -> Any:
    """What ``%opbench`` / ``%%opbench`` do, apart from IPython: ``parse`` is
    ``Magics.parse_options``; returns the result and the options parsed."""
    from opbench.core.instructions import InstructionCounts
    from opbench.core.recovery import recovered
    from opbench.integrations.cli.timeit import measure
    from opbench.timer import Timer

    opts, rest = parse(line, "n:r:oqv", *_LONG_OPTIONS, posix=False, strict=False)
    stmt, setup = (cell, rest or "pass") if cell is not None else (rest, "pass")
    if not stmt.strip():
        raise UsageError("nothing to time: %opbench STATEMENT, or %%opbench with a cell")
    number, repeat = _positive(opts, "n"), _positive(opts, "r")
    threads = _positive(opts, "threads") or 1
    min_run_time = _positive(opts, "min-run-time", float) or 0.2
    target = None if opts.get("converge") is None else parse_fraction(opts["converge"],
                                                                       "--converge")
    timer = Timer(stmt, setup, globals=namespace, num_threads=threads, label=opts.get("label"),
                  sub_label=opts.get("sub-label"), description=opts.get("description"))
    if "callgrind" in opts:
        stats = timer.collect_callgrind(number=number or _CALLGRIND_NUMBER, repeats=repeat)
        return InstructionCounts.from_callgrind(stats if isinstance(stats, tuple) else (stats,)), opts

    def once() -> Any:
        return measure(timer, number=number, repeat=repeat, min_run_time=min_run_time,
                       target=target, default_repeat=_REPEAT)

    result = once() if "no-recover" in opts else recovered(once)
    return result, opts


def _magics_class() -> type:
    from IPython.core.magic import Magics, line_cell_magic, magics_class

    @magics_class
    class OpbenchMagics(Magics):  # type: ignore[misc]
        """``%opbench`` and ``%%opbench`` (see ``opbench.integrations.notebook``)."""

        @line_cell_magic
        def opbench(self, line: str, cell: str | None = None) -> Any:
            from IPython.display import display

            assert self.shell is not None  # registered with a shell
            result, opts = run_magic(line, cell, self.shell.user_ns, self.parse_options)
            if "q" not in opts:
                if "v" in opts and hasattr(result, "describe"):
                    print(result.describe())
                else:
                    display(result)
            return result if "o" in opts else None

    return OpbenchMagics


def load_ipython_extension(ipython: Any) -> None:
    """Registers the magics (``%load_ext opbench`` calls this through the package)."""
    ipython.register_magics(_magics_class())
