"""opbench.integrations.pytest_plugin.callgrind_rerun: instruction mode re-runs the session
under callgrind and exits with its status (the command is checked here; the real run is in
tests/test_pytest_plugin.py)."""
from __future__ import annotations

from typing import Any

import pytest

import opbench.callgrind.collect
from opbench.integrations.pytest_plugin import callgrind_rerun
from plugin_doubles import FakeConfig


def test_time_mode_disabled_runs_and_the_rerun_itself_run_here(monkeypatch: pytest.MonkeyPatch) -> None:
    assert callgrind_rerun.rerun_under_callgrind(FakeConfig()) is None  # type: ignore[arg-type]
    instructions = FakeConfig(opbench_mode="instructions", opbench_disable=True)
    assert callgrind_rerun.rerun_under_callgrind(instructions) is None  # type: ignore[arg-type]
    monkeypatch.setenv(callgrind_rerun._UNDER_CALLGRIND, "1")
    assert callgrind_rerun.rerun_under_callgrind(  # type: ignore[arg-type]
        FakeConfig(opbench_mode="instructions")) is None


def test_xdist_and_a_missing_valgrind_are_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(callgrind_rerun._UNDER_CALLGRIND, raising=False)
    with pytest.raises(pytest.UsageError, match="drop -n"):
        callgrind_rerun.rerun_under_callgrind(  # type: ignore[arg-type]
            FakeConfig(opbench_mode="instructions", numprocesses=2))
    monkeypatch.setattr(opbench.callgrind.collect, "callgrind_unavailable_reason",
                        lambda: "valgrind is not installed")
    with pytest.raises(pytest.UsageError, match="instructions: valgrind is not installed"):
        callgrind_rerun.rerun_under_callgrind(FakeConfig(opbench_mode="instructions"))  # type: ignore[arg-type]


def test_the_rerun_is_this_command_under_callgrind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(callgrind_rerun._UNDER_CALLGRIND, raising=False)
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    monkeypatch.setattr(opbench.callgrind.collect, "callgrind_unavailable_reason", lambda: None)
    monkeypatch.setattr(callgrind_rerun.sys, "orig_argv", ["python", "-m", "pytest", "-k", "bench"])
    seen: dict[str, Any] = {}

    def call(command: list[str], env: dict[str, str]) -> int:
        seen.update(command=command, env=env)
        return 3
    monkeypatch.setattr(callgrind_rerun.subprocess, "call", call)
    status = callgrind_rerun.rerun_under_callgrind(FakeConfig(opbench_mode="instructions"))  # type: ignore[arg-type]
    assert status == 3  # the re-run's status is the session's
    command, env = seen["command"], seen["env"]
    assert command[:2] == ["valgrind", "--tool=callgrind"] and "--collect-atstart=no" in command
    assert command[-4:] == ["-m", "pytest", "-k", "bench"]
    assert env[callgrind_rerun._UNDER_CALLGRIND] == "1" and env["PYTHONHASHSEED"] == "0"
