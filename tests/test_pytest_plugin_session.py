"""opbench.integrations.pytest_plugin.session: options checked before any test runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from opbench import Measurement, TaskSpec, save
from opbench.integrations.pytest_plugin.session import _Session
from opbench.store import baselines
from plugin_doubles import FakeConfig


@pytest.mark.parametrize(("options", "message"), [
    ({"opbench_only": True, "opbench_skip": True}, "exclude each other"),
    ({"opbench_min_time": 0}, "--opbench-min-time must be > 0"),
    ({"opbench_min_time": 1.0, "opbench_max_time": 0.5}, "--opbench-max-time at least as large"),
    ({"opbench_min_samples": 0}, "--opbench-min-samples must be a positive integer"),
    ({"opbench_fail_above": "5%"}, "--opbench-fail-above needs --opbench-compare"),
])
def test_bad_options_stop_the_session(options: dict, message: str) -> None:
    with pytest.raises(pytest.UsageError, match=message):
        _Session(FakeConfig(**options))  # type: ignore[arg-type]


def test_the_baseline_is_loaded_and_the_threshold_parsed(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    save([Measurement(1, [1e-6], TaskSpec("f()", "pass"))], path)
    state = _Session(FakeConfig(opbench_compare=str(path), opbench_fail_above="7%"))  # type: ignore[arg-type]
    assert state.threshold == pytest.approx(0.07)
    assert [r.task_spec.key for r in state.baseline.all()] == ["f()"]


def test_an_unreadable_file_is_a_usage_error_and_never_overwritten(tmp_path: Path) -> None:
    bad = tmp_path / "results.json"
    bad.write_text("not json")
    with pytest.raises(pytest.UsageError, match="--opbench-compare: cannot load"):
        _Session(FakeConfig(opbench_compare=str(bad)))  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match=r"--opbench-save .*would be overwritten"):
        _Session(FakeConfig(opbench_save=str(bad)))  # type: ignore[arg-type]
    assert bad.read_text() == "not json"


def test_latest_without_a_saved_run_says_how_to_make_one(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(baselines.ENV_VAR, str(tmp_path / "baselines"))
    with pytest.raises(pytest.UsageError, match="run once with --opbench-autosave"):
        _Session(FakeConfig(opbench_compare="latest"))  # type: ignore[arg-type]
    saved = baselines.autosave([Measurement(1, [1e-6], TaskSpec("f()", "pass"))])
    assert saved.is_relative_to(tmp_path / "baselines")
    state = _Session(FakeConfig(opbench_compare="latest"))  # type: ignore[arg-type]
    assert state.baseline_path == str(saved)


def test_disabled_sessions_load_nothing(tmp_path: Path) -> None:
    state = _Session(FakeConfig(opbench_disable=True,  # type: ignore[arg-type]
                                opbench_compare=str(tmp_path / "absent.json")))
    assert state.baseline is None


def test_workers_take_the_lock_the_controller_gave_them(tmp_path: Path) -> None:
    config = FakeConfig()
    assert _Session(config).timed().__class__.__name__ == "nullcontext"  # type: ignore[arg-type]
    config.workerinput = {"opbench_lock": str(tmp_path / "lock")}  # type: ignore[attr-defined]
    state = _Session(config)  # type: ignore[arg-type]
    assert state.is_worker and state.lock_path == str(tmp_path / "lock")
    with state.timed():
        assert (tmp_path / "lock").exists()
