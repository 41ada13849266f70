"""The session's state (``State``): the options, checked once before any test runs (bad
values and unusable files stop the session), and every result taken or received from
xdist workers. Every module of the plugin reaches it through ``state_of(config)``.

With pytest-xdist, benchmarks on different workers would share the machine's cores while
timing and read each other's load as slowness, so a lock shared by all workers serialises
the timed regions (the controller creates it and hands each worker its path:
``hand_lock_to``), and every worker sends its results to the controller (``State.send``,
``State.receive``), which alone prints, compares and saves them."""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from opbench.integrations.pytest_plugin.options import LATEST

if TYPE_CHECKING:
    from opbench.gate import Report

# Where a run made by opbench.revisions saves its results (= revisions.command.RESULTS_ENV).
_RESULTS_ENV = "OPBENCH_RESULTS_FILE"
# Set by `opbench ab` for two processes that take turns to time (= revisions.turns.ENV_VAR).
_TURNS_ENV = "OPBENCH_AB_TURNS"
# Key under which an xdist worker hands its results to the controller, and the
# controller hands workers the path of the lock.
_WORKER_KEY = "opbench_results"
_LOCK_KEY = "opbench_lock"


class State:
    """The options, checked once, and every result taken (or received from workers)."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.getoption
        # opbench.revisions' runs set $OPBENCH_RESULTS_FILE: where to save the session.
        self.save_path: str | None = opt("opbench_save") or os.environ.get(_RESULTS_ENV) or None
        self.autosave: bool = opt("opbench_autosave")
        self.baseline_path: str | None = opt("opbench_compare")
        self.fail_above: str | None = opt("opbench_fail_above")
        self.inconclusive: str = opt("opbench_inconclusive")
        self.fail_on_missing: bool = opt("opbench_fail_on_missing")
        self.gate_on: str = opt("opbench_gate_on")
        self.mode: str = opt("opbench_mode")
        self.disabled: bool = opt("opbench_disable")
        self.min_time: float = opt("opbench_min_time")
        self.max_time: float | None = opt("opbench_max_time")
        self.min_samples: int = opt("opbench_min_samples")
        self.recover: bool = not opt("opbench_no_recover")
        self.instruction_number: int = opt("opbench_instruction_number")
        self.instruction_repeats: int = opt("opbench_instruction_repeats")
        self.memory_number: int = opt("opbench_memory_number")
        self.memory_repeats: int = opt("opbench_memory_repeats")
        self.sort: str = opt("opbench_sort")
        self.report_path: str | None = opt("opbench_report")
        self.report_format: str = opt("opbench_format")
        self.report_redact: bool = opt("opbench_redact")
        self.is_worker = hasattr(config, "workerinput")
        self.lock_path: str | None = (config.workerinput.get(_LOCK_KEY)  # type: ignore[attr-defined]
                                      if self.is_worker else None)
        self.results: list[Any] = []
        self.baseline: Any = None        # the loaded baseline, before anything is saved
        self.previous: Any = None        # what --opbench-save's file held before this run
        self.threshold = 0.05
        self.report: Report | None = None
        self.gate_error: str | None = None
        self.gate_failed = False  # the gate failed the session (pytest's last line says so)
        self.saved: list[str] = []  # what was written where, for the summary
        self.turns: Any = None  # opbench.revisions.turns.TurnClient in an `opbench ab` round
        if os.environ.get(_TURNS_ENV) and not self.is_worker:
            from opbench.revisions.turns import client_from_environment

            self.turns = client_from_environment()
        if not self.is_worker:
            self._check(config)

    def _check(self, config: pytest.Config) -> None:
        """Bad options and unusable files stop the session before any test runs."""
        self._check_numbers(config)
        if self.fail_above is not None:
            from opbench.integrations.cli import UsageError, parse_fraction

            if self.baseline_path is None and config.getoption("opbench_base") is None:
                raise pytest.UsageError("--opbench-fail-above needs --opbench-compare [BASELINE] "
                                        "or --opbench-base REV")
            try:
                self.threshold = parse_fraction(self.fail_above, "--opbench-fail-above")
            except UsageError as e:
                raise pytest.UsageError(str(e)) from None
        if self.disabled:
            return
        if self.mode == "memory":
            from opbench.integrations.pytest_plugin.reruns import check_counter

            check_counter()
        if self.save_path is not None:
            self.previous = self._existing(self.save_path)
        if self.baseline_path is not None:
            self.baseline = self._baseline()

    def _check_numbers(self, config: pytest.Config) -> None:
        if config.getoption("opbench_only") and config.getoption("opbench_skip"):
            raise pytest.UsageError("--opbench-only and --opbench-skip exclude each other")
        if self.min_time <= 0 or (self.max_time is not None and self.max_time < self.min_time):
            raise pytest.UsageError("--opbench-min-time must be > 0 and --opbench-max-time "
                                    "at least as large")
        if self.min_samples < 1:
            raise pytest.UsageError("--opbench-min-samples must be a positive integer")
        if self.instruction_number < 1 or self.instruction_repeats < 1:
            raise pytest.UsageError("--opbench-instruction-number and --opbench-instruction-"
                                    "repeats must be positive integers")
        if self.memory_number < 1 or self.memory_repeats < 1:
            raise pytest.UsageError("--opbench-memory-number and --opbench-memory-repeats must "
                                    "be positive integers")

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

    def _baseline(self) -> Any:
        path = self.baseline_path
        if path == LATEST:
            from opbench.store import baselines
            found = baselines.latest(root=baseline_root())
            if found is None:
                raise pytest.UsageError(
                    f"--opbench-compare: no saved run of this machine ({baselines.machine_id()}) "
                    f"in {baseline_root()}: run once with --opbench-autosave")
            self.baseline_path = path = str(found)
        assert path is not None
        return _load(path, "--opbench-compare")

    def timed(self) -> contextlib.AbstractContextManager[None]:
        """The lock around a timed region (a no-op without xdist or with --opbench-no-lock)."""
        return _file_lock(self.lock_path) if self.lock_path else contextlib.nullcontext()

    def send(self, config: pytest.Config) -> None:
        """xdist worker: hands this worker's results to the controller (``receive``)."""
        from opbench.store.results import dumps

        config.workeroutput[_WORKER_KEY] = dumps(self.results, environment={})  # type: ignore[attr-defined]

    def receive(self, node: Any) -> None:
        """xdist controller: keeps the results the worker ``node`` sent, if any."""
        text = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if text:
            from opbench.store.results import loads

            self.results.extend(loads(text, source=f"xdist worker {node}").all())


def _load(path: str, option: str) -> Any:
    from opbench.errors import ResultsFileError
    from opbench.store.results import load

    try:
        return load(path)
    except (OSError, ResultsFileError) as e:
        raise pytest.UsageError(f"{option}: cannot load {path}: {e}") from None


def baseline_root() -> str:
    """Where autosaved runs go, and ``--opbench-compare`` without a path looks: where the
    CLI looks too."""
    from opbench.store import baselines

    return str(baselines.root_dir())


_KEY = pytest.StashKey[State]()


def start(config: pytest.Config) -> State:
    """Checks the options and keeps the session's state in ``config`` (``state_of``)."""
    state = config.stash[_KEY] = State(config)
    return state


def state_of(config: pytest.Config) -> State | None:
    """The session's state; None before ``start`` made it (or when its checks stopped the
    session)."""
    return config.stash.get(_KEY, None)


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    import fcntl

    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def hand_lock_to(node: Any) -> None:
    """xdist controller: gives the worker ``node`` the path of the lock that serialises
    timing, one file for every worker (none with --opbench-no-lock or --opbench-disable)."""
    config = node.config
    if config.getoption("opbench_no_lock") or config.getoption("opbench_disable"):
        return
    path = getattr(config, "_opbench_lock_path", None)
    if path is None:
        fd, path = tempfile.mkstemp(prefix="opbench_xdist_", suffix=".lock")
        os.close(fd)
        config._opbench_lock_path = path  # type: ignore[attr-defined]
    node.workerinput[_LOCK_KEY] = path
