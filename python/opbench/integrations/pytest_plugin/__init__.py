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

The options (``--opbench-save``, ``--opbench-compare``, ``--opbench-fail-above``,
``--opbench-base``, ``--opbench-mode``, ...) are registered, with their help, in
``options`` alone: ``pytest --help`` lists them, and the documentation's reference
(docs/pytest-options.rst) is generated from that table. A benchmark's own threshold:
``opbench(fn, threshold="10%")`` or ``@pytest.mark.opbench(threshold=0.1)``; it is
saved with the result and the gates use it.

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
