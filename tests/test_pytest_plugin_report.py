"""opbench.integrations.pytest_plugin.report: the header lines, the summary tables, the gate."""
from __future__ import annotations

from pathlib import Path

from opbench import Measurement, TaskSpec, save
from opbench.integrations.pytest_plugin.report import (
    _summary_rows,
    pytest_report_header,
    pytest_terminal_summary,
)
from opbench.integrations.pytest_plugin.saving import _gate
from opbench.integrations.pytest_plugin.session import _STATE, _Session
from plugin_doubles import FakeConfig, FakeTerminal


def _m(stmt: str, centre: float, n: int = 12, group: str | None = None) -> Measurement:
    m = Measurement(1, [centre * (1 + i / 200) for i in range(n)], TaskSpec(stmt, "pass"))
    if group:
        m.info["group"] = group
    return m


def _config(**options: object) -> FakeConfig:
    config = FakeConfig(**options)
    config.stash[_STATE] = _Session(config)  # type: ignore[arg-type]
    return config


def test_the_header_says_how_xdist_workers_time() -> None:
    assert pytest_report_header(_config()) == []  # type: ignore[arg-type]
    [line] = pytest_report_header(_config(numprocesses=2))  # type: ignore[arg-type]
    assert "take turns to time" in line
    [line] = pytest_report_header(_config(numprocesses=2, opbench_no_lock=True))  # type: ignore[arg-type]
    assert "may include each other's load" in line


def test_rows_group_and_sort_as_asked() -> None:
    config = _config(opbench_sort="median")
    state = config.stash[_STATE]
    state.results.extend([_m("b()", 2e-6), _m("a()", 3e-6), _m("c()", 1e-6, group="io")])
    rows = _summary_rows(state)
    assert list(rows) == [None, "io"]
    assert [r[0] for r in rows[None]] == ["b()", "a()"]
    assert rows[None][0] == ["b()", "2.055 us", "55 ns", "12", "486,618.0"]  # median, IQR, n, ops/s
    state.sort = "samples"
    state.results.append(_m("d()", 5e-6, n=20))
    assert _summary_rows(state)[None][0][0] == "d()"  # most samples first


def test_the_summary_prints_a_table_per_group_and_the_gate(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    save([_m("a()", 1e-6, n=40)], path)
    config = _config(opbench_compare=str(path))
    state = config.stash[_STATE]
    state.results.extend([_m("a()", 2e-6, n=40), _m("c()", 1e-6, group="io")])
    _gate(state)
    terminal = FakeTerminal()
    pytest_terminal_summary(terminal, 0, config)  # type: ignore[arg-type]
    text = "\n".join(terminal.lines)
    assert "--- opbench: 1 benchmark(s)" in text and "group 'io'" in text
    assert f"--- opbench: compared with {path}" in text
    assert "NOT FAILING: 1 regression found in 1 benchmark(s), but this gate does not fail" in text


def test_a_disabled_run_says_nothing_was_saved_or_compared(tmp_path: Path) -> None:
    config = _config(opbench_disable=True, opbench_save=str(tmp_path / "r.json"))
    terminal = FakeTerminal()
    pytest_terminal_summary(terminal, 0, config)  # type: ignore[arg-type]
    assert terminal.lines[-1].endswith("each benchmark ran once; nothing saved or compared")


def test_a_disturbed_benchmark_is_marked_and_the_summary_says_why() -> None:
    config = _config()
    state = config.stash[_STATE]
    busy = _m("slow()", 9e-3, n=6)
    busy.info["disturbance"] = {"waits": [1.0] * 6, "slowdowns": [1.0] * 6, "threads": 2,
                                "cpus": 2, "others": 1.9}
    state.results.extend([_m("a()", 1e-6), busy])
    terminal = FakeTerminal()
    pytest_terminal_summary(terminal, 0, config)  # type: ignore[arg-type]
    text = "\n".join(terminal.lines)
    assert "9.112 ms (busy)" in text and "1.027 us (busy)" not in text
    assert ("(busy) 1 of 2 benchmarks were measured while the machine was busy (6 of 6 of their "
            "blocks waited for a CPU; 2 threads asked, 0.1 CPUs free)") in text


def test_a_failed_gate_is_counted_on_pytests_last_line(tmp_path: Path) -> None:
    from opbench.integrations.pytest_plugin.report import GATE_FAILED

    path = tmp_path / "base.json"
    save([_m("a()", 1e-6, n=40)], path)
    config = _config(opbench_compare=str(path), opbench_fail_above="5%")
    state = config.stash[_STATE]
    state.results.append(_m("a()", 2e-6, n=40))
    _gate(state)
    state.gate_failed = True  # as pytest_sessionfinish sets it
    terminal = FakeTerminal()
    pytest_terminal_summary(terminal, 1, config)  # type: ignore[arg-type]
    assert terminal.stats[GATE_FAILED] == [state.report]
