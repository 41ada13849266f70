"""The session's state: the options, checked once before any test runs (bad values and
unusable files stop the session), and every result taken or received from workers."""
from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

import pytest

from opbench.integrations.pytest_plugin.options import _LATEST
from opbench.integrations.pytest_plugin.xdist import _LOCK_KEY, _file_lock

# Where a run made by opbench.gate.revision saves its results (= revision.RESULTS_ENV).
_RESULTS_ENV = "OPBENCH_RESULTS_FILE"
# Set by `opbench ab` for two processes that take turns to time (= opbench.gate.turns.ENV_VAR).
_TURNS_ENV = "OPBENCH_AB_TURNS"

if TYPE_CHECKING:
    from opbench.gate import Report


class _Session:
    """The options, checked once, and every result taken (or received from workers)."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.getoption
        # opbench.gate.revision runs set $OPBENCH_RESULTS_FILE: where to save the session.
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
        self.turns: Any = None  # opbench.gate.turns.TurnClient in an `opbench ab` round
        if os.environ.get(_TURNS_ENV) and not self.is_worker:
            from opbench.gate.turns import client_from_environment

            self.turns = client_from_environment()
        if not self.is_worker:
            self._check(config)

    def _check(self, config: pytest.Config) -> None:
        """Bad options and unusable files stop the session before any test runs."""
        from opbench.integrations.cli import UsageError, parse_fraction

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
        if self.mode == "memory":
            from opbench.integrations.pytest_plugin.memory_rerun import check_counter

            check_counter()
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
            from opbench.store import baselines
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
    from opbench.store.results import load

    try:
        return load(path)
    except (OSError, ResultsFileError) as e:
        raise pytest.UsageError(f"{option}: cannot load {path}: {e}") from None


def _baseline_root(config: pytest.Config) -> str:
    from opbench.store import baselines

    return str(baselines.root_dir())  # where the CLI looks too


_STATE = pytest.StashKey[_Session]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "opbench(group=None, threshold=None): the summary table the test's "
                   "benchmarks appear in; the slowdown that fails their gate ('10%' or 0.1)")
    config.stash[_STATE] = _Session(config)
