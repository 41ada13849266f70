"""opbench.integrations.pytest_plugin.state: options checked before any test runs; with
xdist, one lock file serialises the workers' timing and the workers' results reach the
controller."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from opbench import Measurement, TaskSpec, save
from opbench.integrations.pytest_plugin.state import State, hand_lock_to, start, state_of
from opbench.store import baselines
from opbench.store.results import dumps
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
        State(FakeConfig(**options))  # type: ignore[arg-type]


def test_the_baseline_is_loaded_and_the_threshold_parsed(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    save([Measurement(1, [1e-6], TaskSpec("f()", "pass"))], path)
    state = State(FakeConfig(opbench_compare=str(path), opbench_fail_above="7%"))  # type: ignore[arg-type]
    assert state.threshold == pytest.approx(0.07)
    assert [r.task_spec.key for r in state.baseline.all()] == ["f()"]


def test_an_unreadable_file_is_a_usage_error_and_never_overwritten(tmp_path: Path) -> None:
    bad = tmp_path / "results.json"
    bad.write_text("not json")
    with pytest.raises(pytest.UsageError, match="--opbench-compare: cannot load"):
        State(FakeConfig(opbench_compare=str(bad)))  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match=r"--opbench-save .*would be overwritten"):
        State(FakeConfig(opbench_save=str(bad)))  # type: ignore[arg-type]
    assert bad.read_text() == "not json"


def test_latest_without_a_saved_run_says_how_to_make_one(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(baselines.ENV_VAR, str(tmp_path / "baselines"))
    with pytest.raises(pytest.UsageError, match="run once with --opbench-autosave"):
        State(FakeConfig(opbench_compare="latest"))  # type: ignore[arg-type]
    saved = baselines.autosave([Measurement(1, [1e-6], TaskSpec("f()", "pass"))])
    assert saved.is_relative_to(tmp_path / "baselines")
    state = State(FakeConfig(opbench_compare="latest"))  # type: ignore[arg-type]
    assert state.baseline_path == str(saved)


def test_disabled_sessions_load_nothing(tmp_path: Path) -> None:
    state = State(FakeConfig(opbench_disable=True,  # type: ignore[arg-type]
                                opbench_compare=str(tmp_path / "absent.json")))
    assert state.baseline is None


def test_workers_take_the_lock_the_controller_gave_them(tmp_path: Path) -> None:
    config = FakeConfig()
    assert State(config).timed().__class__.__name__ == "nullcontext"  # type: ignore[arg-type]
    config.workerinput = {"opbench_lock": str(tmp_path / "lock")}  # type: ignore[attr-defined]
    state = State(config)  # type: ignore[arg-type]
    assert state.is_worker and state.lock_path == str(tmp_path / "lock")
    with state.timed():
        assert (tmp_path / "lock").exists()


def test_the_state_is_kept_in_the_config() -> None:
    config = FakeConfig()
    assert state_of(config) is None  # type: ignore[arg-type]
    state = start(config)  # type: ignore[arg-type]
    assert state_of(config) is state  # type: ignore[arg-type]


_TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a") as f:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("held")
    else:
        print("free")
"""


def _held_elsewhere(path: Path) -> str:
    return subprocess.run([sys.executable, "-c", _TRY_LOCK, str(path)], capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()


def _worker(lock: Path | None = None) -> FakeConfig:
    config = FakeConfig()
    config.workerinput = {} if lock is None else {"opbench_lock": str(lock)}  # type: ignore[attr-defined]
    config.workeroutput = {}  # type: ignore[attr-defined]
    return config


def test_the_lock_is_held_for_the_timed_region_only(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    state = State(_worker(path))  # type: ignore[arg-type]
    with state.timed():
        assert _held_elsewhere(path) == "held"
    assert _held_elsewhere(path) == "free"


def test_every_worker_gets_the_same_lock_file() -> None:
    config = FakeConfig()
    nodes = [SimpleNamespace(config=config, workerinput={}) for _ in range(2)]
    for node in nodes:
        hand_lock_to(node)
    paths = {node.workerinput["opbench_lock"] for node in nodes}
    assert len(paths) == 1
    path = paths.pop()
    assert os.path.isfile(path)
    os.remove(path)


def test_no_lock_when_overlap_is_allowed_or_nothing_is_timed() -> None:
    for option in ("opbench_no_lock", "opbench_disable"):
        node = SimpleNamespace(config=FakeConfig(**{option: True}), workerinput={})
        hand_lock_to(node)
        assert node.workerinput == {}


def test_workers_hand_their_results_to_the_controller() -> None:
    m = Measurement(1, [1e-6 * (1 + i / 200) for i in range(40)], TaskSpec("f()", "pass"))
    worker = _worker()
    sender = State(worker)  # type: ignore[arg-type]
    sender.results.append(m)
    sender.send(worker)  # type: ignore[arg-type]
    controller = State(FakeConfig())  # type: ignore[arg-type]
    controller.receive(SimpleNamespace(workeroutput=worker.workeroutput))  # type: ignore[attr-defined]
    controller.receive(SimpleNamespace())  # a worker that sent nothing
    assert [r.task_spec.key for r in controller.results] == ["f()"]
    assert list(worker.workeroutput.values()) == [dumps([m], environment={})]  # type: ignore[attr-defined]
