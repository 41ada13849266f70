"""The plugin's command-line options (``--opbench-*``), what picks tests
(``--opbench-only`` / ``--opbench-skip``, and ``$OPBENCH_SELECT``: the benchmarks an
``opbench find`` run needs), and the arguments that load the plugin in a
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
    installed = any(ep.value == PLUGIN for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]


# Methods of opbench.Timer (or opbench.core.stopping) the fixture measures with.
METHODS = ("blocked_autorange", "adaptive_autorange", "converge")
_SORT_KEYS = ("name", "median", "iqr", "samples", "ops")
# What --opbench-compare without a path compares with: this machine's latest autosaved run.
LATEST = "latest"
# Instruction mode: calls per counted loop, and counted loops per benchmark.
_INSTRUCTION_NUMBER = 100
_INSTRUCTION_REPEATS = 3
# Memory mode: calls counted per window, and windows per benchmark (Timer.memory's).
_MEMORY_NUMBER = 100
_MEMORY_REPEATS = 3
# Blocks a benchmark takes at least: a run counts by its 10th percentile, whose 95%
# interval (opbench.stats.run_figure) needs 36 blocks; a few more for the gate to decide.
_MIN_SAMPLES = 40


def add_options(parser: pytest.Parser) -> None:
    """Registers every ``--opbench-*`` option with its help: the one table of them
    (``pytest --help`` shows it, and docs/pytest-options.rst is generated from it)."""
    group = parser.getgroup("opbench", "opbench benchmarks (the `opbench` fixture)")
    add = group.addoption
    add("--opbench-save", metavar="PATH", default=None,
        help="write the session's results to PATH (opbench JSON), keeping the benchmarks "
             "of a file already there that this run did not measure (default: "
             "$OPBENCH_RESULTS_FILE when set, as in the runs of opbench ab).")
    add("--opbench-autosave", action="store_true", default=False,
        help="save the results as this machine's next numbered run under .opbench/.")
    add("--opbench-compare", metavar="PATH", nargs="?", const=LATEST, default=None,
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
    add("--opbench-redact", action="store_true", default=False,
        help="--opbench-report without host names or absolute paths (a public PR comment).")
    add("--opbench-mode", choices=_choices.MODES, default="time",
        help="time (default), count instructions under callgrind (needs valgrind), or "
             "memory: allocations, bytes, peak and leak per call (the session runs again with "
             "opbench's allocation counter preloaded).")
    add("--opbench-instruction-number", type=int, default=_INSTRUCTION_NUMBER, metavar="N",
        help=f"instruction mode: calls per counted loop (default {_INSTRUCTION_NUMBER}).")
    add("--opbench-instruction-repeats", type=int, default=_INSTRUCTION_REPEATS, metavar="R",
        help=f"instruction mode: counted loops per benchmark, the spread the gate allows "
             f"(default {_INSTRUCTION_REPEATS}).")
    add("--opbench-memory-number", type=int, default=_MEMORY_NUMBER, metavar="N",
        help=f"memory mode: calls counted per window (default {_MEMORY_NUMBER}).")
    add("--opbench-memory-repeats", type=int, default=_MEMORY_REPEATS, metavar="R",
        help=f"memory mode: windows counted per benchmark, which must agree (default "
             f"{_MEMORY_REPEATS}).")
    add("--opbench-disable", action="store_true", default=False,
        help="run each benchmark once (fast test runs): the fixture returns a Measurement of "
             "that call; nothing is saved or compared.")
    add("--opbench-min-time", type=float, default=0.2, metavar="S",
        help="seconds each benchmark measures at least (default 0.2).")
    add("--opbench-max-time", type=float, default=None, metavar="S",
        help="seconds after which a benchmark stops, samples or not (default: none).")
    add("--opbench-min-samples", type=int, default=_MIN_SAMPLES, metavar="K",
        help=f"blocks each benchmark measures at least (default {_MIN_SAMPLES}: the 10th "
             "percentile, what the gate compares, has a 95%% interval from 36 on).")
    add("--opbench-no-recover", action="store_true", default=False,
        help="keep a figure the busy machine disturbed (default: measure it again, within as "
             "long again as it took; either way it is marked in the summary).")
    add("--opbench-only", action="store_true", default=False,
        help="run only the tests that use the opbench fixture.")
    add("--opbench-skip", action="store_true", default=False,
        help="skip the tests that use the opbench fixture.")
    add("--opbench-sort", choices=_SORT_KEYS, default="name",
        help="order of the summary tables (default: name).")
    add("--opbench-no-lock", action="store_true", default=False,
        help="with xdist: let workers time at the same moment (default: a lock serialises "
             "the timed regions).")


# Set by `opbench find` (= opbench.revisions.bisection.SELECT_ENV): the benchmark keys (a JSON
# list) a run needs; every test that holds none of them is deselected.
_SELECT_ENV = "OPBENCH_SELECT"
# The fixtures that make a test a benchmark (pytest-benchmark's, served by opbench when
# pytest-benchmark is not there: benchmark_compat).
_BENCHMARK_FIXTURES = ("opbench", "benchmark")


def _selected(nodeid: str, keys: list[str]) -> bool:
    """Whether the test ``nodeid`` holds one of ``keys`` (a key is the node id, or it
    followed by ``::name`` or ``#N``: opbench.core.identity.pytest_key)."""
    return any(k == nodeid or k.startswith((f"{nodeid}::", f"{nodeid}#")) for k in keys)


def _select_keys() -> list[str] | None:
    import json
    import os

    text = os.environ.get(_SELECT_ENV)
    if not text:
        return None
    try:
        keys = json.loads(text)
    except ValueError:
        raise pytest.UsageError(f"${_SELECT_ENV} must be a JSON list of benchmark keys, got "
                                f"{text[:80]!r}") from None
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise pytest.UsageError(f"${_SELECT_ENV} must be a JSON list of benchmark keys")
    return keys


def select_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects what ``--opbench-only``, ``--opbench-skip`` and ``$OPBENCH_SELECT`` leave out."""
    only, skip = config.getoption("opbench_only"), config.getoption("opbench_skip")
    keys = _select_keys()
    if not (only or skip or keys is not None):
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        benchmark = any(f in getattr(item, "fixturenames", ()) for f in _BENCHMARK_FIXTURES)
        wanted = (benchmark == bool(only)) if (only or skip) else True
        if keys is not None:
            wanted = wanted and _selected(item.nodeid, keys)
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
