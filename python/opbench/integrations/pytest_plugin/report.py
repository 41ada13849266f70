"""What the plugin prints: its lines of the session header, and at the end a table per
group of benchmarks (median, IQR, samples, ops/s) and the gate's report; a gate that
failed the session is counted on pytest's last line."""
from __future__ import annotations

from typing import Any

import pytest

from opbench.integrations.pytest_plugin.session import _STATE, _Session

# What pytest's last line says when the gate failed the session ("6 passed, 1 opbench gate
# failed in 2.31s").
GATE_FAILED = "opbench gate failed"


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(_STATE, None)
    if state is None:
        return []
    lines = []
    if state.mode == "instructions":
        lines.append("opbench: counting instructions under callgrind (--opbench-mode)")
    if state.mode == "memory":
        lines.append("opbench: counting memory per call with the allocation counter "
                     "(--opbench-mode)")
    if config.getoption("numprocesses", None):
        lines.append("opbench: xdist workers " + (
            "time at the same moment (--opbench-no-lock): figures may include each other's load"
            if config.getoption("opbench_no_lock") else
            "take turns to time (a shared lock serialises the timed regions; "
            "--opbench-no-lock to allow overlap)"))
    if state.baseline_path:
        lines.append(f"opbench: comparing with {state.baseline_path}")
    return lines


def _summary_rows(state: _Session) -> dict[str | None, list[list[str]]]:
    """Per group: name, median, IQR, samples and ops/s of each benchmark, in --opbench-sort
    order (numbers ascending, except samples and ops/s: most first)."""
    from opbench.core import disturbance, identity
    from opbench.core.instructions import InstructionCounts
    from opbench.core.memory import MemoryCounts
    from opbench.gate import format_value

    groups: dict[str | None, list[tuple[Any, list[str]]]] = {}
    for r in state.results:
        memory = isinstance(r, MemoryCounts)
        counts = memory or isinstance(r, InstructionCounts)
        kind = "instructions" if counts else "time"
        samples = r.repeats if memory else len(r.counts) if counts else len(r.times)
        iqr = 0.0 if counts else r.iqr
        ops = 0.0 if counts or r.median <= 0 else 1 / r.median
        busy = disturbance.MARK if getattr(r, "disturbed", False) else ""
        median = r.cell_text() if memory else format_value(r.median, kind) + busy
        row = [identity.key(r), median,
               "-" if counts else format_value(iqr, kind), str(samples),
               f"{ops:,.1f}" if ops else "-"]
        sort_key = {"name": identity.key(r), "median": r.median, "iqr": iqr,
                    "samples": -samples, "ops": -ops}[state.sort]
        groups.setdefault(r.info.get("group"), []).append((sort_key, row))
    return {g: [row for _, row in sorted(rows, key=lambda x: x[0])] for g, rows in groups.items()}


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or state.is_worker:
        return
    write = terminalreporter.write_line
    if state.disabled:
        if state.save_path or state.baseline_path or state.autosave:
            terminalreporter.write_sep("-", "opbench")
            write("opbench: --opbench-disable: each benchmark ran once; nothing saved or compared")
        return
    if not state.results and not state.gate_error:
        return
    if state.turns is not None:
        # A run of an `opbench ab` wave: ab reports the verdicts (and a failed run's
        # output), so the table would be drawn for no reader while every other process
        # of the wave holds off timing for this one's end.
        write(f"opbench: {len(state.results)} benchmark(s) timed, taking turns in an "
              "`opbench ab` wave")
        for line in state.saved:
            write(f"opbench: {line}")
        return
    from opbench._text import text_table
    from opbench.core import disturbance

    for group, rows in _summary_rows(state).items():
        title = f"opbench: {len(rows)} benchmark(s)" + (f", group {group!r}" if group else "")
        terminalreporter.write_sep("-", title)
        middle = "Allocs / bytes per call" if state.mode == "memory" else "Median"
        write(text_table(["Benchmark", middle, "IQR", "Samples", "ops/s"], rows,
                         [False, True, True, True, True], github=False))
    busy = disturbance.footnote(state.results, "benchmarks")
    if busy is not None:
        write(busy, yellow=True)
    for line in state.saved:
        write(f"opbench: {line}")
    if state.report is not None or state.gate_error is not None:
        terminalreporter.write_sep("-", f"opbench: compared with {state.baseline_path}")
        fails = state.fail_above is not None
        if state.gate_error is not None:
            write(f"opbench {'FAILED' if fails else 'warning'}: {state.gate_error}", red=True)
        else:
            assert state.report is not None
            write(state.report.text())
    if state.gate_failed:
        # pytest's last line counts what its stats hold: "6 passed" alone would read as a
        # pass while the session exits 1 for the gate.
        terminalreporter.stats.setdefault(GATE_FAILED, []).append(state.report or state.gate_error)
