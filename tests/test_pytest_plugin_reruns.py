"""opbench.integrations.pytest_plugin.reruns: sessions this pytest command hands to other
processes. ``--opbench-base`` runs it as an A/B session (its options checked, its own options
dropped from the runs, the report's status as the session's; the end-to-end run on a real
git repository is in tests/test_pytest_plugin.py); instruction mode re-runs it under
callgrind, memory mode with the allocation counter preloaded, each exiting with the re-run's
status (the re-run's command is checked here; real runs are in tests/test_pytest_plugin.py
and below)."""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

import opbench.callgrind.collect
import opbench.revisions.session
import preloaded
from conftest import PYTEST_PLUGIN_ARGS
from opbench.integrations.pytest_plugin import reruns
from opbench.memory import counter
from opbench.revisions.layout import LAYOUT_ENV
from plugin_doubles import FakeConfig

# The variable that marks each mode's re-run session.
_MARKERS = {"instructions": "OPBENCH_PYTEST_UNDER_CALLGRIND", "memory": "OPBENCH_PYTEST_MEMORY"}


class _Launched:
    """What the re-run was started with: ``subprocess.call`` recorded, not run."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.command: list[str] = []
        self.env: dict[str, str] = {}

    def __call__(self, command: list[str], env: dict[str, str]) -> int:
        self.command, self.env = command, env
        return self.status


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> _Launched:
    """This pytest command is ``python -m pytest -k bench``; no re-run session is marked;
    the re-run's process is recorded and exits 3."""
    for marker in _MARKERS.values():
        monkeypatch.delenv(marker, raising=False)
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pytest", "-k", "bench"])
    fake = _Launched(3)
    monkeypatch.setattr(subprocess, "call", fake)
    return fake


def _take_over(**options: Any) -> int | None:
    return reruns.take_over(FakeConfig(**options))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["instructions", "memory"])
def test_time_mode_disabled_runs_and_the_rerun_itself_run_here(
        mode: str, launched: _Launched, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _take_over() is None
    assert _take_over(opbench_mode=mode, opbench_disable=True) is None
    monkeypatch.setenv(_MARKERS[mode], "1")
    assert _take_over(opbench_mode=mode) is None
    assert launched.command == []


@pytest.mark.parametrize("mode", ["instructions", "memory"])
def test_xdist_is_a_usage_error(mode: str, launched: _Launched) -> None:
    with pytest.raises(pytest.UsageError, match=f"--opbench-mode={mode} counts in one process: "
                                                "drop -n"):
        _take_over(opbench_mode=mode, numprocesses=2)


def test_a_mode_this_machine_cannot_count_is_a_usage_error(
        launched: _Launched, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opbench.callgrind.collect, "callgrind_unavailable_reason",
                        lambda: "valgrind is not installed")
    with pytest.raises(pytest.UsageError, match="instructions: valgrind is not installed"):
        _take_over(opbench_mode="instructions")
    monkeypatch.setattr(counter, "unavailable_reason", lambda: "not on this OS")
    with pytest.raises(pytest.UsageError, match="memory: not on this OS"):
        _take_over(opbench_mode="memory")
    assert launched.command == []


def test_the_rerun_is_this_command_under_callgrind(launched: _Launched,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    # A layout pad (what a run at a revision gets) is dropped: counts must repeat exactly.
    monkeypatch.setenv(LAYOUT_ENV, "." * 700)
    monkeypatch.setattr(opbench.callgrind.collect, "callgrind_unavailable_reason", lambda: None)
    assert _take_over(opbench_mode="instructions") == 3  # the re-run's status is the session's
    command, env = launched.command, launched.env
    assert command[:2] == ["valgrind", "--tool=callgrind"] and "--collect-atstart=no" in command
    assert command[-4:] == ["-m", "pytest", "-k", "bench"]
    assert env[_MARKERS["instructions"]] == "1" and env["PYTHONHASHSEED"] == "0"
    assert LAYOUT_ENV not in env


def test_the_rerun_is_this_command_with_the_counter_preloaded(launched: _Launched) -> None:
    preloaded.needs_counter()
    assert _take_over(opbench_mode="memory") == 3
    assert launched.command == [sys.executable, "-m", "pytest", "-k", "bench"]
    assert launched.env["LD_PRELOAD"].split()[0] == str(counter.library_path())
    assert launched.env[_MARKERS["memory"]] == "1"


def test_a_rerun_whose_loader_ignored_the_counter_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_MARKERS["memory"], "1")
    with pytest.raises(pytest.UsageError, match="ignored it"):
        reruns.check_counter()


def test_a_memory_session_counts_each_benchmark_and_saves_the_counts(tmp_path):
    preloaded.needs_counter()
    (tmp_path / "test_bench.py").write_text(
        "def test_rep(opbench):\n"
        "    xs = [0]\n"
        "    counts = opbench(lambda: xs * 100, name='rep')\n"
        "    assert counts.allocations == 1 and counts.bytes == 800\n")
    saved = tmp_path / "memory.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", *PYTEST_PLUGIN_ARGS, "-p", "no:cacheprovider",
                           "-q", "--opbench-mode=memory", "--opbench-memory-number=20",
                           f"--opbench-save={saved}", "test_bench.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Allocs / bytes per call" in proc.stdout and "1 / 800 B" in proc.stdout
    (entry,) = json.loads(saved.read_text())["memory"]
    assert entry["number_per_run"] == 20 and entry["counts"]["python"]["bytes"] == [16_000] * 3


def test_the_ab_options_and_their_values_are_dropped_from_the_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["python", "-m", "pytest", "--opbench-base", "HEAD~1", "-k", "bench",
            "--opbench-rounds=3", "--opbench-wave", "2", "--opbench-report", "r.md",
            "--opbench-min-time", "0.1", "tests"]
    monkeypatch.setattr(sys, "orig_argv", argv)
    seen: dict[str, Any] = {}

    def run_ab(argv: list[str], base: str, **kwargs: Any) -> Any:
        seen.update(argv=argv)
        return _fake_report(0)
    monkeypatch.setattr(opbench.revisions.session, "run_ab", run_ab)
    _take_over(opbench_base="HEAD~1")
    assert seen["argv"] == ["python", "-m", "pytest", "-k", "bench", "--opbench-min-time", "0.1",
                            "tests"]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"opbench_compare": "base.json"}, "drop --opbench-compare"),
    ({"opbench_save": "new.json"}, "drop --opbench-save"),
    ({"numprocesses": 2}, "drop --opbench-disable and -n"),
    ({"opbench_disable": True}, "drop --opbench-disable and -n"),
    ({"opbench_rounds": 0}, "--opbench-rounds must be a positive integer"),
    ({"opbench_wave": 0}, "--opbench-wave must be a positive integer"),
    ({"opbench_fail_above": "lots"}, "--opbench-fail-above"),
])
def test_options_that_cannot_go_with_a_base_are_usage_errors(overrides: dict, message: str) -> None:
    with pytest.raises(pytest.UsageError, match=message):
        _take_over(opbench_base="HEAD", **overrides)


def _fake_report(exit_status: int, interrupted: bool = False) -> Any:
    return SimpleNamespace(exit_status=exit_status, interrupted=interrupted,
                           text=lambda: "the A/B report\n",
                           render=lambda fmt: f"report as {fmt}\n")


@pytest.mark.parametrize(("exit_status", "interrupted", "expected"), [
    (0, False, pytest.ExitCode.OK), (1, False, pytest.ExitCode.TESTS_FAILED),
    (0, True, pytest.ExitCode.INTERRUPTED)])
def test_the_ab_sessions_status_is_the_sessions(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                capsys: pytest.CaptureFixture[str], exit_status: int,
                                                interrupted: bool, expected: int) -> None:
    seen: dict[str, Any] = {}

    def run_ab(argv: list[str], base: str, **kwargs: Any) -> Any:
        seen.update(argv=argv, base=base, **kwargs)
        return _fake_report(exit_status, interrupted)
    monkeypatch.setattr(opbench.revisions.session, "run_ab", run_ab)
    monkeypatch.setattr(sys, "orig_argv", ["py", "-m", "pytest", "--opbench-base", "v1", "-x"])
    report = tmp_path / "ab.json"
    assert _take_over(opbench_base="v1", opbench_fail_above="10%", opbench_report=str(report),
                      opbench_format="json") == expected
    assert seen["argv"] == ["py", "-m", "pytest", "-x"] and seen["base"] == "v1"
    assert seen["threshold"] == pytest.approx(0.10) and (seen["rounds"], seen["wave"]) == (3, 3)
    assert report.read_text() == "report as json\n"
    assert "the A/B report" in capsys.readouterr().out
