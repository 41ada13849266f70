"""opbench.memory.counting: a statement's memory counted in a process that has the
allocation counter, exactly, with opbench's own loop and switches outside the figures.

Each test runs its count in a process started with the counter preloaded
(tests/preloaded.py), as Timer.memory's child and memory-mode sessions are.
"""
from __future__ import annotations

import sys

import pytest

import preloaded
from opbench.core.measurement import TaskSpec
from opbench.memory import counting

COUNT = """
from opbench.core.measurement import TaskSpec
from opbench.memory import counting

def count(fn, number=50, repeats=3, **kw):
    c = counting.count(counting.python_calls(fn), number=number, repeats=repeats,
                         task_spec=TaskSpec("stmt", "pass"), **kw)
    return {s: {f: list(v) for f, v in d.items()} for s, d in c.counts.items()}
"""


def test_the_loop_and_switches_allocate_nothing_and_a_list_counts_exactly():
    result = preloaded.run(COUNT + """
result = {"none": count(lambda: None), "list": count(lambda: [0] * 100),
          "list_10": count(lambda: [0] * 100, number=10)}
""")
    zero = {"allocations": [0] * 3, "bytes": [0] * 3, "peak": [0] * 3, "growth": [0] * 3}
    assert result["none"] == {"python": zero, "native": zero, "host": zero}
    # `[0] * 100`: the one-element list's items (8 bytes) and the result's (800): the list
    # objects themselves come from CPython's freelist. The same per call whatever `number`.
    python = result["list"]["python"]
    assert python["allocations"] == [2 * 50] * 3 and python["bytes"] == [808 * 50] * 3
    assert python["growth"] == [0] * 3
    assert result["list_10"]["python"]["bytes"] == [808 * 10] * 3
    assert result["list"]["native"]["allocations"] == [0] * 3


def test_a_leak_is_the_net_growth_of_exactly_what_the_calls_kept():
    result = preloaded.run(COUNT + """
import sys
store, keys = [None] * 100_000, iter(range(100_000))
def leak():
    store[next(keys)] = bytearray(100)
cycles = count(lambda: [].append(0) or None)
def cycle():
    a = []
    a.append(a)
result = {"leak": count(leak), "kept": sys.getsizeof(bytearray(100)), "cycle": count(cycle)}
""")
    growth = result["leak"]["python"]["growth"]
    assert growth == [result["kept"] * 50] * 3  # the object and its buffer, every call
    # A reference cycle is garbage the collection at the window's end frees: no leak.
    assert result["cycle"]["python"]["growth"] == [0] * 3
    assert result["cycle"]["python"]["allocations"][0] > 0


def test_the_native_heap_is_counted_apart_from_python_objects():
    result = preloaded.run(COUNT + """
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
kept = []
result = {"pair": count(lambda: libc.free(libc.malloc(1000))),
          "leak": count(lambda: kept.append(libc.malloc(64)), number=20)}
""")
    native = result["pair"]["native"]
    assert native["allocations"] == [50] * 3 and native["bytes"] == [50_000] * 3
    assert native["peak"] == [1000] * 3 and native["growth"] == [0] * 3
    assert result["leak"]["native"]["growth"] == [64 * 20] * 3


def test_a_statement_that_forks_or_raises_is_refused_or_raises_its_own_error():
    result = preloaded.run(COUNT + """
import os
from opbench.errors import MemoryCountError
out = {}
def forks():
    if os.fork() == 0:
        os._exit(0)
    os.wait()
try:
    count(forks, number=1, repeats=1)
except MemoryCountError as e:
    out["fork"] = str(e)
try:
    count(lambda: 1 / 0, number=1, repeats=1)
except ZeroDivisionError:
    out["raised"] = True
result = out
""")
    assert "started" in result["fork"] and "process" in result["fork"]
    assert result["raised"]


def test_without_the_counter_preloaded_only_python_objects_are_counted():
    result = preloaded.run(COUNT + """
result = count(lambda: [0] * 100, number=10, repeats=1)
""", preload=False)
    assert set(result) == {"python"}
    assert result["python"]["bytes"] == [8080]


def test_cuda_required_where_torch_is_absent_is_a_clear_error():
    result = preloaded.run(COUNT + """
from opbench.errors import MemoryUnavailableError
try:
    count(lambda: None, number=1, repeats=1, cuda=True)
except MemoryUnavailableError as e:
    result = str(e)
""")
    assert result.startswith("cuda=True") and "torch is not imported" in result


def test_bad_numbers_are_refused_before_anything_runs():
    calls = counting.python_calls(lambda: None)
    with pytest.raises(ValueError, match="number"):
        counting.count(calls, number=0, repeats=1, task_spec=TaskSpec("x", "pass"))
    with pytest.raises(ValueError, match="repeats"):
        counting.count(calls, number=1, repeats=0, task_spec=TaskSpec("x", "pass"))


@pytest.mark.slow  # compiles C++
def test_a_cpp_statement_counts_its_news_from_its_compiled_loop():
    result = preloaded.run("""
import opbench
from opbench.memory import counting
t = opbench.Timer("auto* p = new int[16]; opbench::do_not_optimize(p); delete[] p;",
                  language="c++")
c = counting.count_timer(t, number=40, repeats=3)
result = {s: {f: list(v) for f, v in d.items()} for s, d in c.counts.items()}
""", timeout=600)
    assert result["native"]["allocations"] == [40] * 3 and result["native"]["bytes"] == [64 * 40] * 3
    assert result["python"]["allocations"] == [0] * 3  # the loop runs from C


@pytest.mark.slow  # imports torch in the child
@pytest.mark.skipif(sys.platform != "linux", reason="the counter needs glibc Linux")
def test_a_torch_op_with_out_allocates_nothing_and_without_it_its_result():
    pytest.importorskip("torch")
    result = preloaded.run(COUNT + """
import torch
a, b, c = torch.ones(1000), torch.ones(1000), torch.empty(1000)
result = {"add": count(lambda: torch.add(a, b)), "out": count(lambda: torch.add(a, b, out=c)),
          "inplace": count(lambda: c.add_(a))}
""", timeout=600)
    assert result["out"]["host"]["allocations"] == [0] * 3
    assert result["inplace"]["host"]["allocations"] == [0] * 3
    add = result["add"]
    assert add["python"]["allocations"] == [50] * 3  # the Tensor object
    assert min(add["native"]["bytes"]) >= 4000 * 50  # its storage, and torch's structures
    assert len({*add["native"]["allocations"]}) == 1 and add["host"]["growth"] == [0] * 3
