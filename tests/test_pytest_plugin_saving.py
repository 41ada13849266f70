"""opbench.integrations.pytest_plugin.saving: compare first, then save, then set the status."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from opbench import Measurement, TaskSpec, load, save
from opbench.integrations.pytest_plugin.saving import pytest_sessionfinish, pytest_testnodedown
from opbench.integrations.pytest_plugin.session import _STATE, _Session
from opbench.integrations.pytest_plugin.xdist import _WORKER_KEY
from opbench.store.results import dumps
from plugin_doubles import FakeConfig


def _m(stmt: str, centre: float) -> Measurement:
    return Measurement(1, [centre * (1 + i / 200) for i in range(40)], TaskSpec(stmt, "pass"))


def _finish(config: FakeConfig, results: list[Measurement]) -> tuple[_Session, SimpleNamespace]:
    state = _Session(config)  # type: ignore[arg-type]
    config.stash[_STATE] = state
    state.results.extend(results)
    session = SimpleNamespace(config=config, exitstatus=0)
    pytest_sessionfinish(session, 0)  # type: ignore[arg-type]
    return state, session


def test_the_baseline_is_compared_before_the_save_overwrites_it(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    save([_m("f()", 1e-6), _m("g()", 1e-6)], path)
    state, session = _finish(FakeConfig(opbench_save=str(path), opbench_compare=str(path),
                                        opbench_fail_above="5%"), [_m("f()", 2e-6)])
    assert [r.status for r in state.report.rows] == ["regression"]
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    # The file now holds the new f() and keeps g(), which this run did not measure.
    assert sorted((r.task_spec.key, round(r.median * 1e6)) for r in load(path).all()) == \
        [("f()", 2), ("g()", 1)]
    assert state.saved == [f"saved 1 result(s) to {path} (1 kept from before)"]


def test_without_fail_above_a_regression_does_not_fail_the_session(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    save([_m("f()", 1e-6)], path)
    state, session = _finish(FakeConfig(opbench_compare=str(path)), [_m("f()", 2e-6)])
    # Reported, in words that say it does not fail, with the exit status to match.
    assert state.report.failures and not state.report.enforced
    assert state.report.exit_status == 0 and session.exitstatus == 0


def test_no_benchmark_run_against_a_baseline_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    save([_m("f()", 1e-6)], path)
    state, _ = _finish(FakeConfig(opbench_compare=str(path)), [])
    assert state.gate_error == "no benchmark ran, so nothing was compared with the baseline"


def test_workers_hand_their_results_to_the_controller() -> None:
    worker = FakeConfig()
    worker.workerinput = {}  # type: ignore[attr-defined]
    worker.workeroutput = {}  # type: ignore[attr-defined]
    _finish(worker, [_m("f()", 1e-6)])
    text = worker.workeroutput[_WORKER_KEY]  # type: ignore[attr-defined]
    controller = FakeConfig()
    controller.stash[_STATE] = _Session(controller)  # type: ignore[arg-type]
    pytest_testnodedown(SimpleNamespace(config=controller, workeroutput={_WORKER_KEY: text}), None)
    assert [r.task_spec.key for r in controller.stash[_STATE].results] == ["f()"]
    assert text == dumps([_m("f()", 1e-6)], environment={})


def test_in_an_ab_wave_the_process_winds_down_holding_the_turn(tmp_path: Path) -> None:
    # Saving, reporting and exit run while this process holds timing off (asked, never
    # given back), so no other process of the wave times beside its teardown.
    class Client:
        def __init__(self) -> None:
            self.events: list[str] = []

        def hold_to_exit(self) -> None:
            self.events.append("hold_to_exit")

        def release(self) -> None:
            self.events.append("release")

    config = FakeConfig(opbench_save=str(tmp_path / "r.json"))
    state = _Session(config)  # type: ignore[arg-type]
    state.turns = client = Client()
    config.stash[_STATE] = state
    state.results.append(_m("f()", 1e-6))
    pytest_sessionfinish(SimpleNamespace(config=config, exitstatus=0), 0)  # type: ignore[arg-type]
    assert client.events == ["hold_to_exit"]
    assert load(tmp_path / "r.json").all()  # and it saved after taking the turn
