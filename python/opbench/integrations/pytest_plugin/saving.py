"""The end of the session: results move from xdist workers to the controller, which
compares them with the baseline (before anything is saved, as the save may overwrite
the baseline's file), then saves them (``--opbench-save``, ``--opbench-autosave``)
and sets the session's exit status."""
from __future__ import annotations

from typing import Any

import pytest

from opbench.integrations.pytest_plugin.session import _STATE, _baseline_root, _Session
from opbench.integrations.pytest_plugin.xdist import _WORKER_KEY


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: a worker finished; keep the results it sent."""
    text = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if text:
        from opbench.store.results import loads

        node.config.stash[_STATE].results.extend(
            loads(text, source=f"xdist worker {node}").all())


def _gate(state: _Session) -> None:
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


def _save(state: _Session, config: pytest.Config) -> list[str]:
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
        written.append(f"saved this run as {baselines.autosave(state.results, _baseline_root(config))}")
    return written


def _end_quickly() -> None:
    """Collects the session's garbage once, then freezes the heap (``gc.freeze``): the
    collections still to come (pytest's several at unconfigure, the interpreter's at
    exit) then skip the imported world, and this process ends in ~35 ms instead of
    ~100 ms (measured here), while every other process of the wave holds off timing
    for it. The one collection first keeps the session's cyclic garbage finalized
    (files flushed, unraisable exceptions reported) as without the freeze."""
    import gc

    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(_STATE, None)
    if state is None or state.disabled:
        return
    if state.is_worker:
        from opbench.store.results import dumps

        config.workeroutput[_WORKER_KEY] = dumps(state.results, environment={})  # type: ignore[attr-defined]
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
    state.saved = _save(state, config)
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
