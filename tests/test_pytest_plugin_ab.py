"""opbench.integrations.pytest_plugin.ab: ``--opbench-base`` runs this pytest command as an
A/B session (its options checked, its own options dropped from the runs, the report's
status as the session's); without it, instruction mode's rerun decides. The end-to-end
run on a real git repository is in tests/test_pytest_plugin.py."""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

import opbench.gate.ab_session
from opbench.integrations.pytest_plugin import ab
from plugin_doubles import FakeConfig


def test_the_ab_options_and_their_values_are_dropped_from_the_runs() -> None:
    argv = ["python", "-m", "pytest", "--opbench-base", "HEAD~1", "-k", "bench",
            "--opbench-rounds=3", "--opbench-wave", "2", "--opbench-report", "r.md",
            "--opbench-min-time", "0.1", "tests"]
    assert ab._without(argv, ab._AB_OPTIONS) == \
        ["python", "-m", "pytest", "-k", "bench", "--opbench-min-time", "0.1", "tests"]


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
        ab.pytest_cmdline_main(FakeConfig(opbench_base="HEAD", **overrides))  # type: ignore[arg-type]


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
    monkeypatch.setattr(opbench.gate.ab_session, "run_ab", run_ab)
    monkeypatch.setattr(sys, "orig_argv", ["py", "-m", "pytest", "--opbench-base", "v1", "-x"])
    report = tmp_path / "ab.json"
    config = FakeConfig(opbench_base="v1", opbench_fail_above="10%", opbench_report=str(report),
                        opbench_format="json")
    assert ab.pytest_cmdline_main(config) == expected  # type: ignore[arg-type]
    assert seen["argv"] == ["py", "-m", "pytest", "-x"] and seen["base"] == "v1"
    assert seen["threshold"] == pytest.approx(0.10) and (seen["rounds"], seen["wave"]) == (3, 3)
    assert report.read_text() == "report as json\n"
    assert "the A/B report" in capsys.readouterr().out


def test_without_a_base_instruction_mode_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(ab.callgrind_rerun, "rerun_under_callgrind",
                        lambda config: calls.append(config) or 7)
    config = FakeConfig()
    assert ab.pytest_cmdline_main(config) == 7  # type: ignore[arg-type]
    assert calls == [config]
