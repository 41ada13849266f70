"""opbench.memory.collect (Timer.memory): the count runs in a child started with the
allocation counter, and what comes back is the MemoryCounts, or the statement's own error
with the child's traceback, or an error that says what to do."""
from __future__ import annotations

import pytest

import opbench
import preloaded
from opbench.errors import MemoryCountError, MemoryUnavailableError, SerializationError
from opbench.memory import collect


def test_timer_memory_counts_in_a_child_exactly():
    preloaded.needs_counter()
    counts = opbench.Timer("[0] * 100", name="rep").memory(number=10)
    assert (counts.allocations, counts.bytes, counts.leak) == (2.0, 808.0, 0.0)
    assert counts.exact and counts.sources == ("python", "native", "host")
    assert counts.info["memory_counter"] == "preloaded" and counts.task_spec.name == "rep"


def test_the_statements_error_comes_back_with_the_childs_traceback():
    preloaded.needs_counter()
    with pytest.raises(ZeroDivisionError) as raised:
        opbench.Timer("1 / 0").memory(number=1, repeats=1)
    assert isinstance(raised.value.__cause__, collect.ChildTraceback)
    assert "in the memory child process" in str(raised.value.__cause__)


def test_a_child_that_dies_is_reported_with_its_status_and_output():
    preloaded.needs_counter()
    with pytest.raises(MemoryCountError, match="exit status 3"):
        opbench.Timer("import os, sys; print('bye'); sys.stdout.flush(); os._exit(3)").memory(
            number=1, repeats=1)


def test_a_global_that_does_not_pickle_is_named(monkeypatch):
    preloaded.needs_counter()
    with pytest.raises(SerializationError, match=r"global 'g' .*does not pickle"):
        opbench.Timer("g()", globals={"g": lambda: None}).memory(number=1)


def test_no_counter_here_is_a_clear_error_before_any_child_starts(monkeypatch):
    monkeypatch.setattr(collect.counter, "unavailable_reason", lambda: "no counter on this OS")
    monkeypatch.setattr(collect.subprocess, "run", lambda *a, **k: pytest.fail("started"))
    with pytest.raises(MemoryUnavailableError, match="no counter on this OS"):
        opbench.Timer("pass").memory()
    with pytest.raises(ValueError, match="number"):
        opbench.Timer("pass").memory(number=0)


@pytest.mark.slow  # compiles C++
def test_a_cpp_statements_news_are_counted_and_a_leak_named():
    preloaded.needs_counter()
    counts = opbench.Timer("opbench::do_not_optimize(new char[100]);", language="c++").memory(
        number=20)
    assert counts.per_call("allocations", "native") == 1.0 and counts.leak == 100.0
    assert "leaks 100 B per call" in repr(counts)
