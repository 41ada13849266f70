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

The modules, around one state object:

* ``state``: the session's ``State`` (the options checked, the results, the xdist lock and
  the workers' results), reached through ``state_of(config)``;
* ``options``: the option table, test selection, ``load_args``;
* ``fixture``: the ``opbench`` fixture (and confirming a regression by pooled
  re-measurements; thresholds);
* ``reruns``: sessions handed to other processes (``--opbench-base``'s A/B, instruction
  mode under callgrind, memory mode with the allocation counter);
* ``summary``: the gate, saving, the report file and what the plugin prints;
* ``benchmark_compat``: pytest-benchmark's ``benchmark`` fixture, marker and options,
  registered as a plugin of its own only where pytest-benchmark is not active
  (``-p no:benchmark``, or not installed).

pytest registers this module: the hooks are here, each handing its work to one of those.
"""
from __future__ import annotations

from typing import Any

import pytest

from opbench.integrations.pytest_plugin import benchmark_compat, options, reruns, state, summary
from opbench.integrations.pytest_plugin.fixture import BenchmarkFixture, opbench

__all__ = ["BenchmarkFixture", "opbench", "pytest_addoption", "pytest_cmdline_main",
           "pytest_collection_modifyitems", "pytest_configure", "pytest_configure_node",
           "pytest_report_header", "pytest_sessionfinish", "pytest_terminal_summary",
           "pytest_testnodedown"]


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """The ``--opbench-*`` options; and pytest-benchmark's fixture, marker and options where
    pytest-benchmark will not serve them (``benchmark_compat``)."""
    options.add_options(parser)
    benchmark_compat.register(pluginmanager)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """With --opbench-base, or in instruction or memory mode, the session runs in other
    processes and this one exits with their status (``reruns``)."""
    return reruns.take_over(config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "opbench(group=None, threshold=None): the summary table the test's "
                   "benchmarks appear in; the slowdown that fails their gate ('10%' or 0.1)")
    state.start(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    options.select_tests(config, items)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: give each worker the path of the lock that serialises timing."""
    state.hand_lock_to(node)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: a worker finished; keep the results it sent."""
    found = state.state_of(node.config)
    assert found is not None  # made by pytest_configure
    found.receive(node)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return summary.header_lines(config)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    summary.finish(session)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    summary.write(terminalreporter, config)
