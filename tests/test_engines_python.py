"""The native core: clock, the callable loop, and the statement loop behind Timer."""
from __future__ import annotations

import pytest

from opbench import _C
from opbench.engines.python import PythonEngine
from opbench.engines.python import default_timer as timer


def test_clock_is_monotonic_and_measured():
    a, b = _C.now_ns(), _C.now_ns()
    assert b >= a
    info = _C.clock_info()
    assert info["read_cost_ns"] > 0 and info["resolution_ns"] > 0
    assert _C.clock_info() == info  # measured once, then cached


def test_time_call_calls_exactly_number_times():
    calls = []
    elapsed = _C.time_call(lambda: calls.append(None), 1234)
    assert len(calls) == 1234 and elapsed > 0
    assert _C.time_call(lambda: calls.append(None), 0) >= 0 and len(calls) == 1234


def test_time_call_runs_sync_before_each_clock_read():
    events = []
    _C.time_call(lambda: events.append("call"), 3, lambda: events.append("sync"))
    assert events == ["sync", "call", "call", "call", "sync"]


def test_time_call_errors():
    with pytest.raises(ValueError, match="number must be >= 0"):
        _C.time_call(lambda: None, -1)
    with pytest.raises(TypeError, match="stmt must be callable"):
        _C.time_call(42, 1)

    def fails():
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside") as info:
        _C.time_call(fails, 5)
    assert info.traceback[-1].name == "fails"


def test_time_call_accepts_non_vectorcall_callables():
    class Plain:
        def __init__(self):
            self.n = 0

        def __call__(self):
            self.n += 1

    p = Plain()
    _C.time_call(p, 10)
    assert p.n == 10


def test_noop_is_a_c_function():
    assert _C.noop() is None
    assert type(_C.noop).__name__ == "builtin_function_or_method"


def test_statement_loop_template_and_callable_paths():
    ns = {"count": [0]}
    loop = PythonEngine("count[0] += 1", "count[0] = 0", timer, ns)
    loop.timeit(7)
    assert ns["count"] == [7]  # setup resets before each timeit, like timeit.Timer
    f = loop.as_callable()  # runs setup once: the shared list is reset
    f()
    assert ns["count"] == [1]
    custom_clock = iter(range(100)).__next__
    assert PythonEngine(lambda: None, "pass", lambda: float(custom_clock()), {}).timeit(3) == 1.0


def test_as_callable_keeps_state_between_calls():
    f = PythonEngine("x += 1", "x = 0", timer, {}).as_callable()
    f()
    f()
    assert f.__globals__["x"] == 2


def test_python_functions_use_the_unrolled_loop_and_c_callables_the_native_one(monkeypatch):
    from opbench.engines import python as _loop

    used = []
    real = _loop._call_unrolled
    monkeypatch.setattr(_loop, "_call_unrolled", lambda *a: used.append(1) or real(*a))
    calls = []
    for number in (0, 1, _loop._UNROLL - 1, _loop._UNROLL, 3 * _loop._UNROLL + 5):
        calls.clear()
        PythonEngine(lambda: calls.append(None), "pass", timer, {}).timeit(number)
        assert len(calls) == number  # the remainder loop makes the count exact
    assert len(used) == 5

    class Obj:
        def method(self):
            calls.append(None)

    PythonEngine(Obj().method, "pass", timer, {}).timeit(3)  # a bound Python method
    assert len(used) == 6
    PythonEngine(_C.noop, "pass", timer, {}).timeit(100)
    PythonEngine([].copy, "pass", timer, {}).timeit(100)
    assert len(used) == 6  # C callables went to the native loop
    PythonEngine(_C.noop, "pass", lambda: 0.0, {}).timeit(10)
    assert len(used) == 7  # a custom clock: the Python loop reads it
