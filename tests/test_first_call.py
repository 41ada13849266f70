"""opbench.core.first_call: one cold call, setup excluded, through the Timer's own engine."""
from __future__ import annotations

import pytest

import opbench
from opbench.core.first_call import INFO_KEY, measure_first_call


def test_times_exactly_one_call_after_setup() -> None:
    calls: list[str] = []
    t = opbench.Timer(lambda: calls.append("stmt"), setup=lambda: calls.append("setup"))
    seconds = measure_first_call(t)
    assert seconds > 0 and isinstance(seconds, float)
    assert calls == ["setup", "stmt"]


def test_the_timer_records_it_under_info_key() -> None:
    t = opbench.Timer("sum(range(50))", record_first_call=True)
    m = t.blocked_autorange(min_run_time=0.01)
    assert m.info[INFO_KEY] > 0


def test_rejects_anything_but_a_timer() -> None:
    with pytest.raises(TypeError, match=r"needs an opbench\.Timer, got str"):
        measure_first_call("sum(range(3))")
