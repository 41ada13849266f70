"""The plugin's command-line options (``--opbench-*``), the one that picks tests:
``--opbench-only`` / ``--opbench-skip``, and the arguments that load the plugin in a
pytest of one's own (``load_args``)."""
from __future__ import annotations

import importlib.metadata

import pytest

from opbench import _choices

# The module pytest registers; the entry point of an installed opbench names it.
PLUGIN = "opbench.integrations.pytest_plugin"


def load_args() -> list[str]:
    """The arguments that load opbench's plugin in a pytest this process starts: none
    once opbench is installed (its pytest11 entry point loads it, and ``-p`` again
    would register the module a second time, which pytest refuses), else
    ``["-p", PLUGIN]`` (a source checkout on the path).

    >>> load_args() in ([], ["-p", "opbench.integrations.pytest_plugin"])
    True
    """
    installed = any(ep.value in (PLUGIN, "opbench.pytest_plugin")  # the latter: before 0.2
                    for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]

# Methods of opbench.Timer (or opbench.core.stopping) the fixture measures with.
_METHODS = ("blocked_autorange", "adaptive_autorange", "converge")
_SORT_KEYS = ("name", "median", "iqr", "samples", "ops")
_LATEST = "latest"
# Instruction mode: calls per counted loop, and counted loops per benchmark.
_INSTRUCTION_NUMBER = 100
_INSTRUCTION_REPEATS = 3


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opbench", "opbench benchmarks (the `opbench` fixture)")
    add = group.addoption
    add("--opbench-save", metavar="PATH", default=None,
        help="write the session's results to PATH (opbench JSON), keeping the benchmarks "
             "of a file already there that this run did not measure (default: "
             "$OPBENCH_RESULTS_FILE when set, as in the runs of opbench ab).")
    add("--opbench-autosave", action="store_true", default=False,
        help="save the results as this machine's next numbered run under .opbench/.")
    add("--opbench-compare", metavar="PATH", nargs="?", const=_LATEST, default=None,
        help="compare the results with a saved file (no PATH: this machine's latest "
             "autosaved run).")
    add("--opbench-fail-above", metavar="THRESHOLD", default=None,
        help="with --opbench-compare: fail the session when a benchmark is slower by more "
             "than THRESHOLD ('5%%' or '0.05').")
    add("--opbench-inconclusive", choices=_choices.POLICIES, default="fail",
        help="an undecided benchmark whose medians moved beyond the threshold: fail "
             "(default), warn or pass.")
    add("--opbench-fail-on-missing", action="store_true", default=False,
        help="fail when a benchmark of the baseline did not run.")
    add("--opbench-gate-on", choices=_choices.GATE_METRICS, default="time",
        help="what the gate compares: time (default), or throughput of the declared or "
             "counted work (flops=/bytes=).")
    add("--opbench-base", metavar="REV", default=None,
        help="A/B this suite against git revision REV: runs this same pytest command on REV "
             "and on the working tree in interleaved rounds (python -m opbench ab) and fails "
             "on a regression; --opbench-fail-above sets the threshold (default 5%%).")
    add("--opbench-rounds", type=int, default=_choices.ROUNDS, metavar="N",
        help="with --opbench-base: rounds at most (default %(default)s; fewer once all is decided).")
    add("--opbench-wave", type=int, default=_choices.WAVE, metavar="W",
        help="with --opbench-base: rounds whose processes start at once and take turns "
             "(default %(default)s); the session may stop after each wave.")
    add("--opbench-report", metavar="PATH", default=None,
        help="write the gate's report (--opbench-compare or --opbench-base) to PATH.")
    add("--opbench-format", choices=_choices.FORMATS, default="markdown",
        help="format of --opbench-report: markdown (default: a PR comment), json or text.")
    add("--opbench-mode", choices=_choices.MODES, default="time",
        help="time (default), or count instructions under callgrind (needs valgrind).")
    add("--opbench-instruction-number", type=int, default=_INSTRUCTION_NUMBER, metavar="N",
        help=f"instruction mode: calls per counted loop (default {_INSTRUCTION_NUMBER}).")
    add("--opbench-instruction-repeats", type=int, default=_INSTRUCTION_REPEATS, metavar="R",
        help=f"instruction mode: counted loops per benchmark, the spread the gate allows "
             f"(default {_INSTRUCTION_REPEATS}).")
    add("--opbench-disable", action="store_true", default=False,
        help="run each benchmark once (fast test runs): the fixture returns a Measurement of "
             "that call; nothing is saved or compared.")
    add("--opbench-min-time", type=float, default=0.2, metavar="S",
        help="seconds each benchmark measures at least (default 0.2).")
    add("--opbench-max-time", type=float, default=None, metavar="S",
        help="seconds after which a benchmark stops, samples or not (default: none).")
    add("--opbench-min-samples", type=int, default=10, metavar="K",
        help="blocks each benchmark measures at least (default 10: enough to decide).")
    add("--opbench-only", action="store_true", default=False,
        help="run only the tests that use the opbench fixture.")
    add("--opbench-skip", action="store_true", default=False,
        help="skip the tests that use the opbench fixture.")
    add("--opbench-sort", choices=_SORT_KEYS, default="name",
        help="order of the summary tables (default: name).")
    add("--opbench-no-lock", action="store_true", default=False,
        help="with xdist: let workers time at the same moment (default: a lock serialises "
             "the timed regions).")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only, skip = config.getoption("opbench_only"), config.getoption("opbench_skip")
    if not (only or skip):
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        benchmark = "opbench" in getattr(item, "fixturenames", ())
        (keep if benchmark == bool(only) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
