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
    --opbench-mode MODE         time (default) or instructions: run the session under
                                callgrind and count each benchmark's instructions per run
                                (no sampling noise: gates a 1% change on a noisy machine).
    --opbench-base REV          A/B: run this same command on git revision REV and on the
                                working tree in interleaved rounds (``opbench ab``; the
                                processes take turns to time) and fail on a regression,
                                decided on runs; --opbench-rounds N (default 5) at most.
    --opbench-report PATH       write the gate's report (--opbench-compare or --opbench-base)
                                to PATH, in --opbench-format markdown (default), json or text.

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
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from opbench.gate import Report

__all__ = ["BenchmarkFixture"]

# Key under which an xdist worker hands its results to the controller, and the
# controller hands workers the path of the lock.
_WORKER_KEY = "opbench_results"
_LOCK_KEY = "opbench_lock"
# Methods of opbench.Timer (or opbench.stopping) the fixture measures with.
_METHODS = ("blocked_autorange", "adaptive_autorange", "converge")
_SORT_KEYS = ("name", "median", "iqr", "samples", "ops")
_LATEST = "latest"
# Set in the environment of a session re-run under callgrind (instruction mode).
_UNDER_CALLGRIND = "OPBENCH_PYTEST_UNDER_CALLGRIND"
_INSTRUCTION_NUMBER = 100
# Re-measurements of a benchmark that looks like a regression, before the gate decides.
_CONFIRMATIONS = 2
_INSTRUCTION_REPEATS = 3
# Where a run made by opbench.revision saves its results (= opbench.revision.RESULTS_ENV).
_RESULTS_ENV = "OPBENCH_RESULTS_FILE"
# Set by `opbench ab` for two processes that take turns to time (= opbench.turns.ENV_VAR).
_TURNS_ENV = "OPBENCH_AB_TURNS"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("opbench", "opbench benchmarks (the `opbench` fixture)")
    add = group.addoption
    add("--opbench-save", metavar="PATH", default=None,
        help="write the session's results to PATH (opbench JSON), keeping the benchmarks "
             "of a file already there that this run did not measure.")
    add("--opbench-autosave", action="store_true", default=False,
        help="save the results as this machine's next numbered run under .opbench/.")
    add("--opbench-compare", metavar="PATH", nargs="?", const=_LATEST, default=None,
        help="compare the results with a saved file (no PATH: this machine's latest "
             "autosaved run).")
    add("--opbench-fail-above", metavar="THRESHOLD", default=None,
        help="with --opbench-compare: fail the session when a benchmark is slower by more "
             "than THRESHOLD ('5%%' or '0.05').")
    add("--opbench-inconclusive", choices=("fail", "warn", "pass"), default="fail",
        help="an undecided benchmark whose medians moved beyond the threshold: fail "
             "(default), warn or pass.")
    add("--opbench-fail-on-missing", action="store_true", default=False,
        help="fail when a benchmark of the baseline did not run.")
    add("--opbench-base", metavar="REV", default=None,
        help="A/B this suite against git revision REV: runs this same pytest command on REV "
             "and on the working tree in interleaved rounds (python -m opbench ab) and fails "
             "on a regression; --opbench-fail-above sets the threshold (default 5%%).")
    add("--opbench-rounds", type=int, default=5, metavar="N",
        help="with --opbench-base: rounds at most (default 5; fewer once all is decided).")
    add("--opbench-report", metavar="PATH", default=None,
        help="write the gate's report (--opbench-compare or --opbench-base) to PATH.")
    add("--opbench-format", choices=("text", "markdown", "json"), default="markdown",
        help="format of --opbench-report: markdown (default: a PR comment), json or text.")
    add("--opbench-mode", choices=("time", "instructions"), default="time",
        help="time (default), or count instructions under callgrind (needs valgrind).")
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


# -- the session's state -----------------------------------------------------------

class _Session:
    """The options, checked once, and every result taken (or received from workers)."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.getoption
        # opbench.revision runs set $OPBENCH_RESULTS_FILE: where to save the session.
        self.save_path: str | None = opt("opbench_save") or os.environ.get(_RESULTS_ENV) or None
        self.autosave: bool = opt("opbench_autosave")
        self.baseline_path: str | None = opt("opbench_compare")
        self.fail_above: str | None = opt("opbench_fail_above")
        self.inconclusive: str = opt("opbench_inconclusive")
        self.fail_on_missing: bool = opt("opbench_fail_on_missing")
        self.mode: str = opt("opbench_mode")
        self.disabled: bool = opt("opbench_disable")
        self.min_time: float = opt("opbench_min_time")
        self.max_time: float | None = opt("opbench_max_time")
        self.min_samples: int = opt("opbench_min_samples")
        self.sort: str = opt("opbench_sort")
        self.report_path: str | None = opt("opbench_report")
        self.report_format: str = opt("opbench_format")
        self.is_worker = hasattr(config, "workerinput")
        self.lock_path: str | None = (config.workerinput.get(_LOCK_KEY)  # type: ignore[attr-defined]
                                      if self.is_worker else None)
        self.results: list[Any] = []
        self.baseline: Any = None        # the loaded baseline, before anything is saved
        self.previous: Any = None        # what --opbench-save's file held before this run
        self.threshold = 0.05
        self.report: Report | None = None
        self.gate_error: str | None = None
        self.saved: list[str] = []  # what was written where, for the summary
        self.turns: Any = None  # opbench.turns.TurnClient in an `opbench ab` round
        if os.environ.get(_TURNS_ENV) and not self.is_worker:
            from opbench.turns import client_from_environment

            self.turns = client_from_environment()
        if not self.is_worker:
            self._check(config)

    def _check(self, config: pytest.Config) -> None:
        """Bad options and unusable files stop the session before any test runs."""
        from opbench.cli import UsageError, parse_fraction

        if config.getoption("opbench_only") and config.getoption("opbench_skip"):
            raise pytest.UsageError("--opbench-only and --opbench-skip exclude each other")
        if self.min_time <= 0 or (self.max_time is not None and self.max_time < self.min_time):
            raise pytest.UsageError("--opbench-min-time must be > 0 and --opbench-max-time "
                                    "at least as large")
        if self.min_samples < 1:
            raise pytest.UsageError("--opbench-min-samples must be a positive integer")
        if self.fail_above is not None:
            if self.baseline_path is None and config.getoption("opbench_base") is None:
                raise pytest.UsageError("--opbench-fail-above needs --opbench-compare [BASELINE] "
                                        "or --opbench-base REV")
            try:
                self.threshold = parse_fraction(self.fail_above, "--opbench-fail-above")
            except UsageError as e:
                raise pytest.UsageError(str(e)) from None
        if self.disabled:
            return
        if self.save_path is not None:
            self.previous = self._existing(self.save_path)
        if self.baseline_path is not None:
            self.baseline = self._baseline(config)

    def _existing(self, path: str) -> Any:
        """What the save path holds now (kept and merged); a file that cannot be read is
        never overwritten."""
        from opbench._files import check_writable

        try:
            check_writable(path)
        except OSError as e:
            raise pytest.UsageError(f"--opbench-save: {e}") from None
        return _load(path, "--opbench-save (the file there would be overwritten)") \
            if os.path.exists(path) else None

    def _baseline(self, config: pytest.Config) -> Any:
        path = self.baseline_path
        if path == _LATEST:
            from opbench import baselines

            found = baselines.latest(root=_baseline_root(config))
            if found is None:
                raise pytest.UsageError(
                    f"--opbench-compare: no saved run of this machine ({baselines.machine_id()}) "
                    f"in {_baseline_root(config)}: run once with --opbench-autosave")
            self.baseline_path = path = str(found)
        assert path is not None
        return _load(path, "--opbench-compare")

    def timed(self) -> contextlib.AbstractContextManager[None]:
        """The lock around a timed region (a no-op without xdist or with --opbench-no-lock)."""
        return _file_lock(self.lock_path) if self.lock_path else contextlib.nullcontext()


def _load(path: str, option: str) -> Any:
    from opbench.errors import ResultsFileError
    from opbench.results import load

    try:
        return load(path)
    except (OSError, ResultsFileError) as e:
        raise pytest.UsageError(f"{option}: cannot load {path}: {e}") from None


def _baseline_root(config: pytest.Config) -> str:
    from opbench import baselines

    env = os.environ.get(baselines.ENV_VAR)
    return env if env else os.path.join(str(config.rootpath), ".opbench")


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    import fcntl

    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_STATE = pytest.StashKey[_Session]()


# -- instruction mode: the whole session under callgrind ----------------------------

# Options of the session that `--opbench-base` runs itself, not passed to its runs.
_AB_OPTIONS = ("--opbench-base", "--opbench-rounds", "--opbench-report", "--opbench-format",
               "--opbench-fail-above", "--opbench-inconclusive", "--opbench-mode")


def _without(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``argv`` less each of ``options`` and its value (``--opt VALUE`` or ``--opt=VALUE``)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def _ab_main(config: pytest.Config, base: str) -> int:
    """``--opbench-base REV``: this pytest command, A/B on REV and the working tree."""
    from opbench._files import atomic_write_text
    from opbench.ab_session import run_ab
    from opbench.cli import UsageError, parse_fraction
    from opbench.revision import RevisionError, sigterm_as_interrupt

    opt = config.getoption
    for clash in ("opbench_compare", "opbench_save", "opbench_autosave"):
        if opt(clash):
            raise pytest.UsageError(f"--opbench-base runs its own rounds: drop "
                                    f"--{clash.replace('_', '-')}")
    if opt("opbench_disable") or opt("numprocesses", None):
        raise pytest.UsageError("--opbench-base times each side in one process a round: drop "
                                "--opbench-disable and -n")
    if opt("opbench_rounds") < 1:
        raise pytest.UsageError("--opbench-rounds must be a positive integer")
    try:
        threshold = (parse_fraction(opt("opbench_fail_above"), "--opbench-fail-above")
                     if opt("opbench_fail_above") else 0.05)
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, "-m", "pytest", *sys.argv[1:]])
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    try:
        with sigterm_as_interrupt():
            report = run_ab(_without(argv, _AB_OPTIONS), base, rounds=opt("opbench_rounds"),
                            mode=opt("opbench_mode"), threshold=threshold,
                            inconclusive=opt("opbench_inconclusive"))
    except RevisionError as e:
        raise pytest.UsageError(f"--opbench-base: {e}") from None
    sys.stdout.write(report.text())
    if opt("opbench_report"):
        atomic_write_text(opt("opbench_report"), report.render(opt("opbench_format")))
        sys.stdout.write(f"opbench: wrote the report to {opt('opbench_report')}\n")
    sys.stdout.flush()
    if report.interrupted:
        return int(pytest.ExitCode.INTERRUPTED)
    return int(pytest.ExitCode.TESTS_FAILED) if report.exit_status else int(pytest.ExitCode.OK)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """With --opbench-base, runs the A/B session (``opbench.ab_session``) and exits with its
    status. In instruction mode, runs this same pytest command under callgrind and exits
    with its status (unless this already is that run)."""
    if config.getoption("opbench_base") is not None:
        return _ab_main(config, config.getoption("opbench_base"))
    if config.getoption("opbench_mode") != "instructions" or os.environ.get(_UNDER_CALLGRIND):
        return None
    if config.getoption("opbench_disable"):
        return None
    if config.getoption("numprocesses", None):
        raise pytest.UsageError("--opbench-mode=instructions counts in one process: drop -n "
                                "(counts do not depend on load, so nothing is lost)")
    from opbench.callgrind.collect import callgrind_unavailable_reason
    from opbench.callgrind.in_process import OUT_PREFIX_ENV

    reason = callgrind_unavailable_reason()
    if reason is not None:
        raise pytest.UsageError(f"--opbench-mode=instructions: {reason}")
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    with tempfile.TemporaryDirectory(prefix="opbench_pytest_callgrind_") as work:
        prefix = os.path.join(work, "callgrind.out")
        # PYTHONHASHSEED fixed: dict and set layouts, hence counts, repeat exactly.
        env = dict(os.environ, **{_UNDER_CALLGRIND: "1", OUT_PREFIX_ENV: prefix,
                                  "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")})
        argv = getattr(sys, "orig_argv", None) or [sys.executable, "-m", "pytest", *sys.argv[1:]]
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                   f"--callgrind-out-file={prefix}", f"--log-file={prefix}.log",
                   sys.executable, *argv[1:]]
        status = subprocess.call(command, env=env)
    return status


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "opbench(group=None, threshold=None): the summary table the test's "
                   "benchmarks appear in; the slowdown that fails their gate ('10%' or 0.1)")
    config.stash[_STATE] = _Session(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: give each worker the path of the lock that serialises timing."""
    config = node.config
    if config.getoption("opbench_no_lock") or config.getoption("opbench_disable"):
        return
    path = getattr(config, "_opbench_lock_path", None)
    if path is None:
        fd, path = tempfile.mkstemp(prefix="opbench_xdist_", suffix=".lock")
        os.close(fd)
        config._opbench_lock_path = path  # type: ignore[attr-defined]
    node.workerinput[_LOCK_KEY] = path


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(_STATE, None)
    if state is None:
        return []
    lines = []
    if state.mode == "instructions":
        lines.append("opbench: counting instructions under callgrind (--opbench-mode)")
    if config.getoption("numprocesses", None):
        lines.append("opbench: xdist workers " + (
            "time at the same moment (--opbench-no-lock): figures may include each other's load"
            if config.getoption("opbench_no_lock") else
            "take turns to time (a shared lock serialises the timed regions; "
            "--opbench-no-lock to allow overlap)"))
    if state.baseline_path:
        lines.append(f"opbench: comparing with {state.baseline_path}")
    return lines


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


# -- the fixture --------------------------------------------------------------------

class BenchmarkFixture:
    """The ``opbench`` fixture: call it to time code; see ``__call__``."""

    def __init__(self, node: pytest.Item, state: _Session) -> None:
        self._node_id = node.nodeid
        marker = node.get_closest_marker("opbench")
        self._group = marker.kwargs.get("group") if marker is not None else None
        self._threshold = marker.kwargs.get("threshold") if marker is not None else None
        self._state = state
        self._calls = 0

    def _key(self, name: str | None) -> str:
        index, self._calls = self._calls, self._calls + 1
        if name is not None:
            return f"{self._node_id}::{name}"
        return self._node_id if index == 0 else f"{self._node_id}#{index}"

    def __call__(
        self,
        stmt: str | Callable[[], Any],
        *,
        setup: str | Callable[[], Any] = "pass",
        globals: dict[str, Any] | None = None,
        name: str | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        method: str = "blocked_autorange",
        min_run_time: float | None = None,
        max_run_time: float | None = None,
        min_samples: int | None = None,
        method_kwargs: dict[str, Any] | None = None,
        threshold: float | str | None = None,
        **timer_kwargs: Any,
    ) -> Any:
        """Times ``stmt`` with ``opbench.Timer`` and records the result for the session.

        Args:
            stmt, setup, globals: as for ``opbench.Timer``.
            name: tells this benchmark apart from the test's others; its key is
                ``<node id>::<name>`` (default: the node id, ``#1``, ``#2``... for
                later calls in one test).
            label: defaults to the test's node id (the summary's row).
            sub_label, description: as for ``opbench.Timer``.
            method: ``"blocked_autorange"`` (default: blocks until ``min_run_time``
                seconds and ``min_samples`` blocks), ``"adaptive_autorange"`` or
                ``"converge"``, called with ``min_run_time`` and ``method_kwargs``.
            min_run_time, max_run_time, min_samples: default to the session's
                ``--opbench-min-time``, ``--opbench-max-time``, ``--opbench-min-samples``.
            threshold: the slowdown that fails this benchmark's gate (``"10%"`` or 0.1),
                instead of ``--opbench-fail-above`` (default: the marker's
                ``@pytest.mark.opbench(threshold=...)``); recorded in ``info["threshold"]``,
                which ``opbench compare`` and ``opbench ab`` use too.
            timer_kwargs: more ``opbench.Timer`` arguments (``num_threads``, ``env``, ...).

        Returns:
            The Measurement (under ``--opbench-disable``: of a single call); in
            instruction mode, the InstructionCounts (``.median`` is instructions
            per run).

        Example::

            def test_sum(opbench):
                m = opbench("sum(xs)", setup="xs = list(range(1000))", min_run_time=0.05)
                assert m.median > 0
        """
        if method not in _METHODS:
            raise ValueError(f"method must be one of {', '.join(_METHODS)}; got {method!r}")
        from opbench.timer import Timer

        state = self._state
        own = _threshold(self._threshold if threshold is None else threshold)
        timer = Timer(stmt, setup, globals=globals, name=self._key(name),
                      label=self._node_id if label is None else label,
                      sub_label=sub_label, description=description, **timer_kwargs)
        if state.disabled:
            # One call through the Timer's own engine: same setup, globals and torch
            # handling as a timed run, and the same kind of result.
            return timer.measurement(1, [timer.run(1)])
        with state.timed():
            if state.mode == "instructions":
                result = self._count(timer)
            else:
                # In an `opbench ab` round, the base and head processes take turns to time.
                turns = state.turns
                timed = timer if turns is None else _taking_turns(timer, turns)

                def measure() -> Any:
                    if turns is not None:
                        turns.acquire()
                    return self._time(timed, method, min_run_time, max_run_time, min_samples,
                                      method_kwargs or {})

                try:
                    result = self._confirmed(measure(), measure,
                                             state.threshold if own is None else own)
                finally:
                    if turns is not None:
                        turns.release()
        if self._group is not None:
            result.info["group"] = self._group
        if own is not None:
            result.info["threshold"] = own
        state.results.append(result)
        return result

    def _confirmed(self, result: Any, measure: Callable[[], Any], threshold: float) -> Any:
        """``result``, or all its measurements pooled when the gate would call it a
        regression and it was measured again.

        A burst of load from another process during one measurement reads as a
        slowdown; a real regression is there in every measurement. So a benchmark
        the gate would fail is measured again (up to _CONFIRMATIONS times, while the
        pooled measurements still look like a regression) and every measurement is
        pooled into the result, each with equal weight (``_pooled``): keeping the
        fastest would bias the gate toward passing. ``info["remeasured"]`` says how
        many were pooled, and the report lists them.
        """
        state = self._state
        if state.baseline is None:
            return result
        from opbench import gate

        key = result.task_spec.key
        baseline = [r for r in state.baseline.all() if r.task_spec.key == key]
        taken = [result]
        while baseline and len(taken) <= _CONFIRMATIONS:
            row = gate.compare(baseline, [_pooled(taken)], threshold=threshold).rows
            if not row or row[0].status not in ("regression", "possible regression"):
                break
            taken.append(measure())
        if len(taken) == 1:
            return result
        pooled = _pooled(taken)
        pooled.info["remeasured"] = {"measurements": len(taken), "how": "pooled",
                                     "why": "looked slower than the baseline"}
        return pooled

    def _time(self, timer: Any, method: str, min_run_time: float | None,
              max_run_time: float | None, min_samples: int | None,
              kwargs: dict[str, Any]) -> Any:
        state = self._state
        min_run_time = state.min_time if min_run_time is None else min_run_time
        if method == "blocked_autorange":
            from opbench.stopping import sample

            return sample(timer, min_run_time=min_run_time,
                          min_samples=state.min_samples if min_samples is None else min_samples,
                          max_run_time=state.max_time if max_run_time is None else max_run_time)
        return getattr(timer, method)(min_run_time=min_run_time, **kwargs)

    def _count(self, timer: Any) -> Any:
        from opbench.callgrind import in_process

        return in_process.count(timer.engine.as_callable(), number=_INSTRUCTION_NUMBER,
                                repeats=_INSTRUCTION_REPEATS, task_spec=timer.task_spec,
                                out_prefix=os.environ[in_process.OUT_PREFIX_ENV])


def _pooled(measurements: list[Any]) -> Any:
    """One Measurement of ``measurements`` (same statement) pooled with equal weight: each
    gives as many per-run times as the smallest has blocks (evenly spaced order
    statistics), so a measurement of many small blocks cannot outvote the others."""
    if len(measurements) == 1:
        return measurements[0]
    from opbench.measurement import Measurement

    n = min(len(m.times) for m in measurements)
    times = []
    for m in measurements:
        ordered = sorted(m.times)
        step = (len(ordered) - 1) / max(n - 1, 1)
        times += [ordered[round(i * step)] for i in range(n)]
    first = measurements[0]
    return Measurement(1, times, first.task_spec, metadata=first.metadata,
                       overhead=first.overhead, clock=first.clock, info=dict(first.info))


def _threshold(value: Any) -> float | None:
    """A per-benchmark threshold ('10%' or 0.1) as a fraction; None when not given."""
    if value is None:
        return None
    from opbench.cli import UsageError, parse_fraction

    try:
        return parse_fraction(str(value), "threshold")
    except UsageError as e:
        raise ValueError(str(e)) from None


def _taking_turns(timer: Any, turns: Any) -> Any:
    from opbench.turns import TakingTurns

    return TakingTurns(timer, turns)


@pytest.fixture
def opbench(request: pytest.FixtureRequest) -> BenchmarkFixture:
    """Times code inside a test: ``opbench(fn_or_stmt, ...)`` returns the Measurement."""
    return BenchmarkFixture(request.node, request.config.stash[_STATE])


# -- moving results between processes (xdist) ---------------------------------------

@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: a worker finished; keep the results it sent."""
    text = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if text:
        from opbench.results import loads

        node.config.stash[_STATE].results.extend(
            loads(text, source=f"xdist worker {node}").all())


# -- end of session -----------------------------------------------------------------

def _gate(state: _Session) -> None:
    """Compares the session's results with the baseline (before anything is saved)."""
    from opbench import gate
    from opbench.errors import NothingToCompareError

    try:
        state.report = gate.compare(state.baseline, state.results, threshold=state.threshold,
                                    inconclusive=state.inconclusive,
                                    fail_on_missing=state.fail_on_missing,
                                    enforced=state.fail_above is not None)
    except NothingToCompareError as e:
        state.gate_error = str(e)


def _save(state: _Session, config: pytest.Config) -> list[str]:
    from opbench import baselines
    from opbench.results import merge, save

    written = []
    if state.save_path is not None:
        kept = merge(state.previous.all(), state.results) if state.previous else state.results
        save(kept, state.save_path)
        written.append(f"saved {len(state.results)} result(s) to {state.save_path}"
                       + (f" ({len(kept) - len(state.results)} kept from before)"
                          if len(kept) > len(state.results) else ""))
    if state.autosave:
        written.append(f"saved this run as {baselines.autosave(state.results, _baseline_root(config))}")
    return written


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(_STATE, None)
    if state is None or state.disabled:
        return
    if state.is_worker:
        from opbench.results import dumps

        config.workeroutput[_WORKER_KEY] = dumps(state.results, environment={})  # type: ignore[attr-defined]
        return
    if not state.results:
        if state.baseline is not None:
            state.gate_error = "no benchmark ran, so nothing was compared with the baseline"
        return
    if state.baseline is not None:
        _gate(state)  # compare first: the save below may overwrite the baseline's file
    state.saved = _save(state, config)
    if state.report is not None and state.report_path:
        from opbench._files import atomic_write_text

        atomic_write_text(state.report_path, state.report.render(state.report_format))
        state.saved.append(f"wrote the gate's report ({state.report_format}) to "
                           f"{state.report_path}")
    failed = state.gate_error is not None or (state.report is not None
                                              and state.report.exit_status != 0)
    if failed and state.fail_above is not None and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _summary_rows(state: _Session) -> dict[str | None, list[list[str]]]:
    """Per group: name, median, IQR, samples and ops/s of each benchmark, in --opbench-sort
    order (numbers ascending, except samples and ops/s: most first)."""
    from opbench.gate import format_value
    from opbench.instructions import InstructionCounts

    groups: dict[str | None, list[tuple[Any, list[str]]]] = {}
    for r in state.results:
        counts = isinstance(r, InstructionCounts)
        kind = "instructions" if counts else "time"
        samples = len(r.counts) if counts else len(r.times)
        iqr = 0.0 if counts else r.iqr
        ops = 0.0 if counts or r.median <= 0 else 1 / r.median
        row = [r.task_spec.key, format_value(r.median, kind),
               "-" if counts else format_value(iqr, kind), str(samples),
               f"{ops:,.1f}" if ops else "-"]
        sort_key = {"name": r.task_spec.key, "median": r.median, "iqr": iqr,
                    "samples": -samples, "ops": -ops}[state.sort]
        groups.setdefault(r.info.get("group"), []).append((sort_key, row))
    return {g: [row for _, row in sorted(rows, key=lambda x: x[0])] for g, rows in groups.items()}


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or state.is_worker:
        return
    write = terminalreporter.write_line
    if state.disabled:
        if state.save_path or state.baseline_path or state.autosave:
            terminalreporter.write_sep("-", "opbench")
            write("opbench: --opbench-disable: each benchmark ran once; nothing saved or compared")
        return
    if not state.results and not state.gate_error:
        return
    from opbench._text import text_table

    for group, rows in _summary_rows(state).items():
        title = f"opbench: {len(rows)} benchmark(s)" + (f", group {group!r}" if group else "")
        terminalreporter.write_sep("-", title)
        write(text_table(["Benchmark", "Median", "IQR", "Samples", "ops/s"], rows,
                         [False, True, True, True, True], github=False))
    for line in state.saved:
        write(f"opbench: {line}")
    if state.report is not None or state.gate_error is not None:
        terminalreporter.write_sep("-", f"opbench: compared with {state.baseline_path}")
        fails = state.fail_above is not None
        if state.gate_error is not None:
            write(f"opbench {'FAILED' if fails else 'warning'}: {state.gate_error}", red=True)
        else:
            assert state.report is not None
            write(state.report.text())
