"""pytest plugin: an ``opbench`` fixture that times code inside tests, plus session options.

Registered through the ``pytest11`` entry point, so it loads in every pytest
run once opbench is installed; it therefore imports nothing of opbench (and
never torch) until a benchmark runs or an ``--opbench-*`` option is given.

The fixture times a callable or a statement and returns the Measurement::

    def test_sort(opbench):
        m = opbench(sorted, setup=..., min_run_time=0.1)   # or opbench("sorted(xs)", ...)
        assert m.median > 0

Its results are labelled with the test's node id (unless ``label=`` says
otherwise), so the same benchmark matches across runs by TaskSpec. At the end
of the session a Compare table of everything measured is printed.

Options:
    --opbench-save PATH        write the session's Measurements as an opbench results file.
    --opbench-compare PATH     compare them, by TaskSpec, against a saved baseline
                               (``python -m opbench compare``'s table and verdicts).
    --opbench-fail-above PCT   with --opbench-compare: fail the session when a benchmark
                               is significantly slower than the baseline by more than PCT.
    --opbench-disable          run each benchmarked code once, untimed; the fixture then
                               returns None, and nothing is saved or compared.

With pytest-xdist, every worker sends its Measurements to the controller,
which alone prints, saves and compares them.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from opbench.measurement import Measurement

__all__ = ["BenchmarkFixture"]

# Key under which an xdist worker hands its results to the controller.
_WORKER_KEY = "opbench_results"
# Methods of opbench.Timer that take min_run_time and decide the sample size themselves.
_METHODS = ("blocked_autorange", "adaptive_autorange", "converge")


class _SessionState:
    """The session's options and every Measurement taken (or received from workers)."""

    def __init__(self, config: pytest.Config) -> None:
        self.save_path: str | None = config.getoption("opbench_save")
        self.baseline: str | None = config.getoption("opbench_compare")
        fail_above: str | None = config.getoption("opbench_fail_above")
        self.disabled: bool = config.getoption("opbench_disable")
        self.is_worker = hasattr(config, "workerinput")
        self.results: list[Measurement] = []
        self.threshold = 0.05  # for verdicts when only --opbench-compare is given
        self.fail_on_regression = fail_above is not None
        self.comparison: str | None = None
        self.regressed: list[str] = []
        if self.is_worker:
            return  # the controller validated the options already
        if fail_above is not None:
            if self.baseline is None:
                raise pytest.UsageError("--opbench-fail-above needs --opbench-compare BASELINE")
            self.threshold = _parse_threshold(fail_above)
        if self.save_path is not None:
            directory = os.path.dirname(os.path.abspath(self.save_path))
            if not os.path.isdir(directory):
                raise pytest.UsageError(f"--opbench-save: directory {directory} does not exist")
        if self.baseline is not None and not self.disabled:
            # Fail before running the tests, not after: a missing or corrupt baseline.
            _load(self.baseline, "--opbench-compare")


def _parse_threshold(text: str) -> float:
    from opbench.cli import UsageError
    from opbench.cli.compare import parse_threshold

    try:
        return parse_threshold(text, "--opbench-fail-above")
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None


def _load(path: str, option: str) -> Any:
    from opbench.results import ResultsFileError, load

    try:
        return load(path)
    except (OSError, ResultsFileError) as e:
        raise pytest.UsageError(f"{option}: cannot load {path}: {e}") from None


_STATE = pytest.StashKey[_SessionState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opbench", "opbench benchmarks (the `opbench` fixture)")
    group.addoption("--opbench-save", metavar="PATH", default=None,
                    help="write every Measurement of the session to PATH (opbench JSON).")
    group.addoption("--opbench-compare", metavar="PATH", default=None,
                    help="compare the session's Measurements with a saved baseline file.")
    group.addoption("--opbench-fail-above", metavar="THRESHOLD", default=None,
                    help="with --opbench-compare: fail the session when a benchmark is "
                         "significantly slower by more than THRESHOLD ('5%%' or '0.05').")
    group.addoption("--opbench-disable", action="store_true", default=False,
                    help="run benchmarked code once without timing (fast test runs); "
                         "the fixture returns None and nothing is saved or compared.")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STATE] = _SessionState(config)


class BenchmarkFixture:
    """The ``opbench`` fixture: call it to time code; see ``__call__``."""

    def __init__(self, node_id: str, state: _SessionState) -> None:
        self._node_id = node_id
        self._state = state

    def __call__(
        self,
        stmt: str | Callable[[], Any],
        *,
        setup: str | Callable[[], Any] = "pass",
        globals: dict[str, Any] | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        method: str = "blocked_autorange",
        min_run_time: float = 0.2,
        method_kwargs: dict[str, Any] | None = None,
        **timer_kwargs: Any,
    ) -> Measurement | None:
        """Times ``stmt`` with ``opbench.Timer`` and records the Measurement for the session.

        Args:
            stmt, setup, globals: as for ``opbench.Timer``.
            label: defaults to the test's node id, so results match across runs.
            sub_label, description: name several benchmarks of one test apart.
            method: ``"blocked_autorange"`` (default), ``"adaptive_autorange"`` or
                ``"converge"``, called with ``min_run_time`` and ``method_kwargs``.
            timer_kwargs: more ``opbench.Timer`` arguments (``num_threads``, ``env``, ...).

        Returns:
            The Measurement; None under ``--opbench-disable``, where ``setup`` and
            ``stmt`` run once, untimed.

        Example::

            def test_sum(opbench):
                m = opbench("sum(xs)", setup="xs = list(range(1000))", min_run_time=0.05)
                assert m is None or m.median > 0
        """
        if method not in _METHODS:
            raise ValueError(f"method must be one of {', '.join(_METHODS)}; got {method!r}")
        from opbench.timer import Timer

        timer = Timer(stmt, setup, globals=globals,
                      label=self._node_id if label is None else label,
                      sub_label=sub_label, description=description, **timer_kwargs)
        if self._state.disabled:
            # The Timer's own statement runner: same setup, globals and torch
            # handling as a timed run, but a single call.
            timer.run(1)
            return None
        m = getattr(timer, method)(min_run_time=min_run_time, **(method_kwargs or {}))
        self._state.results.append(m)
        return m


@pytest.fixture
def opbench(request: pytest.FixtureRequest) -> BenchmarkFixture:
    """Times code inside a test: ``opbench(fn_or_stmt, ...)`` returns the Measurement."""
    return BenchmarkFixture(request.node.nodeid, request.config.stash[_STATE])


# -- moving results between processes (xdist) ---------------------------------

@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: a worker finished; keep the Measurements it sent."""
    text = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if text:
        from opbench.results import loads

        node.config.stash[_STATE].results.extend(loads(text, source=f"xdist worker {node}"))


# -- end of session -----------------------------------------------------------

def _compare(state: _SessionState) -> None:
    """Compares the session's results with the baseline; notes the regressed rows."""
    from opbench.cli.compare import compare_results
    from opbench.results import load

    assert state.baseline is not None
    state.comparison, state.regressed = compare_results(
        load(state.baseline), state.results, state.threshold
    )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None or state.disabled:
        return
    if state.is_worker:
        from opbench.results import dumps

        session.config.workeroutput[_WORKER_KEY] = dumps(state.results, environment={})  # type: ignore[attr-defined]
        return
    if state.save_path is not None and state.results:
        from opbench.results import save

        save(state.results, state.save_path)
    if state.baseline is not None and state.results:
        _compare(state)
        if state.regressed and state.fail_on_regression and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or state.is_worker:
        return
    write = terminalreporter.write_line
    if state.disabled:
        if state.save_path or state.baseline:
            terminalreporter.write_sep("-", "opbench")
            write("opbench: --opbench-disable: nothing timed, saved or compared")
        return
    if not state.results:
        return
    from opbench.compare import Compare

    terminalreporter.write_sep("-", f"opbench: {len(state.results)} benchmark(s)")
    table = Compare(state.results)
    table.trim_significant_figures()
    write(str(table))
    if state.save_path is not None:
        write(f"opbench: saved {len(state.results)} measurement(s) to {state.save_path}")
    if state.comparison is not None:
        terminalreporter.write_sep("-", f"opbench: compared with {state.baseline}")
        write(state.comparison)
    if state.regressed:
        verb = "FAILED" if state.fail_on_regression else "warning"
        write(f"opbench {verb}: significantly slower than the baseline by more than "
              f"{state.threshold:.1%}:", red=state.fail_on_regression)
        for row in state.regressed:
            write(f"  {row}", red=state.fail_on_regression)
