"""opbench.integrations.pytest_plugin.summary: the gate compares first, then the results are
saved, then the exit status set; the header lines, the summary tables, the gate's report."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from opbench import Measurement, TaskSpec, load, save
from opbench.integrations.pytest_plugin import summary
from opbench.integrations.pytest_plugin.state import State, start
from plugin_doubles import FakeConfig, FakeTerminal


def _m(stmt: str, centre: float, n: int = 40, group: str | None = None) -> Measurement:
    m = Measurement(1, [centre * (1 + i / 200) for i in range(n)], TaskSpec(stmt, "pass"))
    if group:
        m.info["group"] = group
    return m


def _finish(config: FakeConfig, results: list[Measurement]) -> tuple[State, SimpleNamespace]:
    state = start(config)  # type: ignore[arg-type]
    state.results.extend(results)
    session = SimpleNamespace(config=config, exitstatus=0)
    summary.finish(session)  # type: ignore[arg-type]
    return state, session


def _written(config: FakeConfig) -> FakeTerminal:
    terminal = FakeTerminal()
    summary.write(terminal, config)  # type: ignore[arg-type]
    return terminal


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


def test_a_worker_sends_its_results_and_neither_compares_nor_saves(tmp_path: Path) -> None:
    worker = FakeConfig(opbench_save=str(tmp_path / "r.json"))
    worker.workerinput = {}  # type: ignore[attr-defined]
    worker.workeroutput = {}  # type: ignore[attr-defined]
    _finish(worker, [_m("f()", 1e-6)])
    controller = start(FakeConfig())  # type: ignore[arg-type]
    controller.receive(SimpleNamespace(workeroutput=worker.workeroutput))  # type: ignore[attr-defined]
    assert [r.task_spec.key for r in controller.results] == ["f()"]
    assert not (tmp_path / "r.json").exists() and _written(worker).lines == []


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
    state = start(config)  # type: ignore[arg-type]
    state.turns = client = Client()
    state.results.append(_m("f()", 1e-6))
    summary.finish(SimpleNamespace(config=config, exitstatus=0))  # type: ignore[arg-type]
    assert client.events == ["hold_to_exit"]
    assert load(tmp_path / "r.json").all()  # and it saved after taking the turn


def test_the_header_says_how_xdist_workers_time() -> None:
    def header(**options: object) -> list[str]:
        config = FakeConfig(**options)
        start(config)  # type: ignore[arg-type]
        return summary.header_lines(config)  # type: ignore[arg-type]

    assert header() == []
    [line] = header(numprocesses=2)
    assert "take turns to time" in line
    [line] = header(numprocesses=2, opbench_no_lock=True)
    assert "may include each other's load" in line


def _table(terminal: FakeTerminal, title: str) -> list[list[str]]:
    """The rows of the summary table under ``title`` (its cells, header row first)."""
    lines = terminal.lines[terminal.lines.index(f"--- {title}") + 1:]
    rows = []
    for line in lines:
        if line.startswith("---"):
            break
        cells = line.split()
        if cells and not set(line.strip()) <= {"-", " "}:
            rows.append(cells)
    return rows


def test_rows_group_and_sort_as_asked() -> None:
    config = FakeConfig(opbench_sort="median")
    state = start(config)  # type: ignore[arg-type]
    state.results.extend([_m("b()", 2e-6, n=12), _m("a()", 3e-6, n=12),
                          _m("c()", 1e-6, n=12, group="io")])
    terminal = _written(config)
    assert "--- opbench: 1 benchmark(s), group 'io'" in terminal.lines
    rows = _table(terminal, "opbench: 2 benchmark(s)")
    assert [r[0] for r in rows[1:]] == ["b()", "a()"]
    # median, IQR, samples, ops/s
    assert rows[1] == ["b()", "2.055", "us", "55", "ns", "12", "486,618.0"]
    state.sort = "samples"
    state.results.append(_m("d()", 5e-6, n=20))
    assert _table(_written(config), "opbench: 3 benchmark(s)")[1][0] == "d()"  # most samples first


def test_the_summary_prints_a_table_per_group_and_the_gate(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    save([_m("a()", 1e-6)], path)
    config = FakeConfig(opbench_compare=str(path))
    _finish(config, [_m("a()", 2e-6), _m("c()", 1e-6, n=12, group="io")])
    text = "\n".join(_written(config).lines)
    assert "--- opbench: 1 benchmark(s)" in text and "group 'io'" in text
    assert f"--- opbench: compared with {path}" in text
    assert "NOT FAILING: 1 regression found in 1 benchmark(s), but this gate does not fail" in text


def test_a_disabled_run_says_nothing_was_saved_or_compared(tmp_path: Path) -> None:
    config = FakeConfig(opbench_disable=True, opbench_save=str(tmp_path / "r.json"))
    start(config)  # type: ignore[arg-type]
    assert _written(config).lines[-1].endswith("each benchmark ran once; nothing saved or compared")


def test_a_disturbed_benchmark_is_marked_and_the_summary_says_why() -> None:
    config = FakeConfig()
    state = start(config)  # type: ignore[arg-type]
    busy = _m("slow()", 9e-3, n=6)
    busy.info["disturbance"] = {"waits": [1.0] * 6, "slowdowns": [1.0] * 6, "threads": 2,
                                "cpus": 2, "others": 1.9}
    state.results.extend([_m("a()", 1e-6, n=12), busy])
    text = "\n".join(_written(config).lines)
    assert "9.112 ms (busy)" in text and "1.027 us (busy)" not in text
    assert ("(busy) 1 of 2 benchmarks were measured while the machine was busy (6 of 6 of their "
            "blocks waited for a CPU; 2 threads asked, 0.1 CPUs free)") in text


def test_a_failed_gate_is_counted_on_pytests_last_line(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    save([_m("a()", 1e-6)], path)
    config = FakeConfig(opbench_compare=str(path), opbench_fail_above="5%")
    state, session = _finish(config, [_m("a()", 2e-6)])
    assert state.gate_failed and session.exitstatus == pytest.ExitCode.TESTS_FAILED
    terminal = _written(config)
    assert terminal.stats[summary.GATE_FAILED] == [state.report]
