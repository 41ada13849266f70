"""pytest plugin: an ``opbench`` fixture that times code inside tests, and a regression gate.

Registered through the ``pytest11`` entry point, so it loads in every pytest
run once opbench is installed; it therefore imports nothing of opbench (and
never torch) until a benchmark runs or an ``--opbench-*`` option is given.

The fixture times a callable or a statement and returns the Measurement::

    def test_sort(opbench):
        m = opbench(lambda: sorted(xs), min_run_time=0.1)   # or opbench("sorted(xs)", ...)
        assert m.median > 0

Each benchmark's key (what a gate matches across runs) is the test's node id,
plus ``name=`` when given or ``#1``, ``#2``, ... for the second and later
calls in one test; the function's own name plays no part, so renaming it
keeps its history. A benchmark takes at least ``--opbench-min-time`` seconds
*and* ``--opbench-min-samples`` blocks (enough for the gate to decide), at
most ``--opbench-max-time``. At the end of the session a table per group
(``@pytest.mark.opbench(group="...")``) shows median, IQR, samples and ops/s.

Options (the gate):
    --opbench-save PATH         write the session's results to PATH; a file already there
                                keeps the benchmarks this run did not measure (-k, failures,
                                Ctrl-C), so a partial run never loses the rest. Default:
                                $OPBENCH_RESULTS_FILE when set (runs made by opbench ab).
    --opbench-autosave          save them as this machine's next run under .opbench/.
    --opbench-compare [PATH]    compare with a results file (default: this machine's latest
                                autosaved run), before anything is saved.
    --opbench-fail-above PCT    with --opbench-compare: fail the session on a regression
                                beyond PCT (and, per --opbench-inconclusive, on a possible one).
    --opbench-inconclusive P    fail (default), warn or pass an undecided benchmark whose
                                medians moved beyond the threshold.
    --opbench-fail-on-missing   fail when a baseline benchmark did not run.
    --opbench-gate-on METRIC    time (default), byte_rate or flop_rate: gate on throughput
                                (time per unit of the work declared or counted: flops=/bytes=).
    --opbench-mode MODE         time (default) or instructions: run the session under
                                callgrind and count each benchmark's instructions per run
                                (no sampling noise: gates a 1% change on a noisy machine).
    --opbench-instruction-number N / --opbench-instruction-repeats R
                                instruction mode: R counted loops of N calls per benchmark
                                (100 and 3; per benchmark: the fixture's
                                instruction_number= and instruction_repeats=).
    --opbench-mode memory       run the session again with opbench's allocation counter
                                preloaded and count each benchmark's allocations, bytes,
                                peak and leak per call (exact: gates one extra allocation);
                                --opbench-memory-number N / --opbench-memory-repeats R
                                (100 and 3; the fixture's memory_number= / memory_repeats=).
                                One benchmark alone: the fixture's mode="memory".
    --opbench-base REV          A/B: run this same command on git revision REV and on the
                                working tree in interleaved rounds (``opbench ab``; the
                                processes take turns to time) and fail on a regression,
                                decided on runs; --opbench-rounds N (default 3) at most,
                                --opbench-wave W (default 3) of them at once.
    --opbench-report PATH       write the gate's report (--opbench-compare or --opbench-base)
                                to PATH, in --opbench-format markdown (default), json or text;
                                --opbench-redact leaves host names and absolute paths out.

A benchmark's own threshold: ``opbench(fn, threshold="10%")`` or
``@pytest.mark.opbench(threshold=0.1)``; it is saved with the result and the gates use it.
Options (running):
    --opbench-disable           run each benchmark once, untimed-in-earnest: the fixture
                                returns a Measurement of that one call; nothing is saved.
    --opbench-min-time S / --opbench-max-time S / --opbench-min-samples K
    --opbench-only / --opbench-skip   run only the benchmarks / every test but them.
    --opbench-sort KEY          order of the summary: name, median, iqr, samples or ops.
    --opbench-no-lock           let xdist workers time at the same moment (see below).

With pytest-xdist, benchmarks on different workers would share the machine's
cores while timing and read each other's load as slowness; a lock shared by
all workers serialises the timed regions (workers still run the other tests
in parallel), and every worker sends its results to the controller, which
alone prints, compares and saves them.

One module per concern: ``options`` (and test selection), ``session`` (the
options checked, the results), ``ab`` (``--opbench-base``: the A/B of two
revisions), ``callgrind_rerun`` (instruction mode),
``xdist`` (the lock, workers' results), ``fixture``, ``memory_rerun`` (memory mode), ``policy`` (confirming a
regression by pooled re-measurements; thresholds), ``saving`` (gate, save and the
report file at the end), ``report`` (what it prints), ``benchmark_compat``
(pytest-benchmark's ``benchmark`` fixture, marker and options, registered as a plugin
of its own only where pytest-benchmark is not active: ``-p no:benchmark``, or not
installed).
pytest registers this module: its hooks and fixture are imported here.
"""
from __future__ import annotations

import pytest

from opbench.integrations.pytest_plugin import benchmark_compat, options
from opbench.integrations.pytest_plugin.ab import pytest_cmdline_main
from opbench.integrations.pytest_plugin.fixture import BenchmarkFixture, opbench
from opbench.integrations.pytest_plugin.options import pytest_collection_modifyitems
from opbench.integrations.pytest_plugin.report import pytest_report_header, pytest_terminal_summary
from opbench.integrations.pytest_plugin.saving import pytest_sessionfinish, pytest_testnodedown
from opbench.integrations.pytest_plugin.session import pytest_configure
from opbench.integrations.pytest_plugin.xdist import pytest_configure_node

__all__ = ["BenchmarkFixture", "opbench", "pytest_addoption", "pytest_cmdline_main",
           "pytest_collection_modifyitems", "pytest_configure", "pytest_configure_node",
           "pytest_report_header", "pytest_sessionfinish", "pytest_terminal_summary",
           "pytest_testnodedown"]


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """The ``--opbench-*`` options; and pytest-benchmark's fixture, marker and options where
    pytest-benchmark will not serve them (``benchmark_compat``)."""
    options.pytest_addoption(parser)
    benchmark_compat.register(pluginmanager)
