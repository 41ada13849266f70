"""The end of the session and what the plugin prints.

``finish``: the controller compares the results with the baseline (before anything is
saved, as the save may overwrite the baseline's file), then saves them
(``--opbench-save``, ``--opbench-autosave``), writes the gate's report file and sets the
session's exit status; an xdist worker sends its results to the controller instead.

``header_lines``: the plugin's lines of the session header. ``write``: at the end, a table
per group of benchmarks (median, IQR, samples, ops/s) and the gate's report; a gate that
failed the session is counted on pytest's last line."""
from __future__ import annotations

from typing import Any

import pytest

from opbench.integrations.pytest_plugin.state import State, baseline_root, state_of

# What pytest's last line says when the gate failed the session ("6 passed, 1 opbench gate
# failed in 2.31s").
GATE_FAILED = "opbench gate failed"


def _gate(state: State) -> None:
    """Compares the session's results with the baseline (before anything is saved)."""
    from opbench import gate
    from opbench.errors import NothingToCompareError

    try:
        state.report = gate.compare(state.baseline, state.results, threshold=state.threshold,
                                    enforced=state.fail_above is not None,
                                    inconclusive=state.inconclusive,
                                    fail_on_missing=state.fail_on_missing,
                                    metric=state.gate_on)
    except NothingToCompareError as e:
        state.gate_error = str(e)


def _save(state: State) -> list[str]:
    from opbench.store import baselines
    from opbench.store.results import merge, save

    written = []
    if state.save_path is not None:
        kept = merge(state.previous, state.results) if state.previous else state.results
        save(kept, state.save_path)
        written.append(f"saved {len(state.results)} result(s) to {state.save_path}"
                       + (f" ({len(kept) - len(state.results)} kept from before)"
                          if len(kept) > len(state.results) else ""))
    if state.autosave:
        written.append(f"saved this run as {baselines.autosave(state.results, baseline_root())}")
    return written


def _end_quickly() -> None:
    """Collects the session's garbage once, then freezes the heap (``gc.freeze``): the
    collections still to come (pytest's several at unconfigure, the interpreter's at
    exit) then skip the imported world, so this process ends sooner, while every other
    process of the wave holds off timing for it. The one collection first keeps the
    session's cyclic garbage finalized (files flushed, unraisable exceptions reported)
    as without the freeze."""
    import gc

    gc.collect()
    gc.freeze()


def finish(session: pytest.Session) -> None:
    """Compares, saves, writes the report file and sets the exit status (module doc)."""
    config = session.config
    state = state_of(config)
    if state is None or state.disabled:
        return
    if state.is_worker:
        state.send(config)
        return
    if state.turns is not None:
        # In an `opbench ab` wave: the rest of this process (saving, reporting, exit) holds
        # timing off until it ends, so no other process times while this one winds down
        # beside it. (Giving the turn back when pytest unconfigures, leaving only the
        # interpreter's exit to run beside the next holder, was measured: runs' 10th
        # percentiles spread by up to 12% instead of 2%, and a 2x slowdown went uncaught
        # once in ten sessions.)
        state.turns.hold_to_exit()
        _end_quickly()
    if not state.results:
        if state.baseline is not None:
            state.gate_error = "no benchmark ran, so nothing was compared with the baseline"
        return
    if state.baseline is not None:
        _gate(state)  # compare first: the save below may overwrite the baseline's file
    state.saved = _save(state)
    if state.report is not None and state.report_path:
        from opbench._files import atomic_write_text

        report = state.report.redacted() if state.report_redact else state.report
        atomic_write_text(state.report_path, report.render(state.report_format))
        state.saved.append(f"wrote the gate's report ({state.report_format}) to "
                           f"{state.report_path}")
    failed = state.gate_error is not None or (state.report is not None
                                              and state.report.exit_status != 0)
    state.gate_failed = failed and state.fail_above is not None
    if state.gate_failed and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def header_lines(config: pytest.Config) -> list[str]:
    """The plugin's lines of the session header: the mode, how xdist workers time, the
    baseline."""
    state = state_of(config)
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


def _summary_rows(state: State) -> dict[str | None, list[list[str]]]:
    """Per group: name, median, IQR, samples and ops/s of each benchmark, in --opbench-sort
    order (numbers ascending, except samples and ops/s: most first)."""
    from opbench.core import disturbance, identity
    from opbench.core.formatting import format_value
    from opbench.core.instructions import InstructionCounts
    from opbench.core.memory import MemoryCounts

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


def write(terminalreporter: Any, config: pytest.Config) -> None:
    """The session's summary (module doc); nothing from an xdist worker."""
    state = state_of(config)
    if state is None or state.is_worker:
        return
    write_line = terminalreporter.write_line
    if state.disabled:
        if state.save_path or state.baseline_path or state.autosave:
            terminalreporter.write_sep("-", "opbench")
            write_line("opbench: --opbench-disable: each benchmark ran once; nothing saved or "
                       "compared")
        return
    if not state.results and not state.gate_error:
        return
    if state.turns is not None:
        # A run of an `opbench ab` wave: ab reports the verdicts (and a failed run's
        # output), so the table would be drawn for no reader while every other process
        # of the wave holds off timing for this one's end.
        write_line(f"opbench: {len(state.results)} benchmark(s) timed, taking turns in an "
                   "`opbench ab` wave")
        for line in state.saved:
            write_line(f"opbench: {line}")
        return
    _write_tables(terminalreporter, state)
    for line in state.saved:
        write_line(f"opbench: {line}")
    _write_gate(terminalreporter, state)


def _write_tables(terminalreporter: Any, state: State) -> None:
    from opbench._text import text_table
    from opbench.core import disturbance

    for group, rows in _summary_rows(state).items():
        title = f"opbench: {len(rows)} benchmark(s)" + (f", group {group!r}" if group else "")
        terminalreporter.write_sep("-", title)
        middle = "Allocs / bytes per call" if state.mode == "memory" else "Median"
        terminalreporter.write_line(text_table(["Benchmark", middle, "IQR", "Samples", "ops/s"],
                                               rows, [False, True, True, True, True],
                                               github=False))
    busy = disturbance.footnote(state.results, "benchmarks")
    if busy is not None:
        terminalreporter.write_line(busy, yellow=True)


def _write_gate(terminalreporter: Any, state: State) -> None:
    if state.report is not None or state.gate_error is not None:
        terminalreporter.write_sep("-", f"opbench: compared with {state.baseline_path}")
        fails = state.fail_above is not None
        if state.gate_error is not None:
            terminalreporter.write_line(f"opbench {'FAILED' if fails else 'warning'}: "
                                        f"{state.gate_error}", red=True)
        else:
            assert state.report is not None
            terminalreporter.write_line(state.report.text())
    if state.gate_failed:
        # pytest's last line counts what its stats hold: "6 passed" alone would read as a
        # pass while the session exits 1 for the gate.
        terminalreporter.stats.setdefault(GATE_FAILED, []).append(state.report or state.gate_error)
