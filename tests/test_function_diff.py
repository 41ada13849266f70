"""opbench.callgrind.function_diff: where the instructions went, grouped by where functions live."""
from __future__ import annotations

import pytest

from opbench.callgrind.function_diff import GROUPS, diff, where


@pytest.mark.parametrize("name, group", [
    ("/build/Python-3.11.7/Python/ceval.c:_PyEval_EvalFrameDefault [/usr/lib/libpython3.11.so]",
     "Python interpreter"),
    ("Objects/longobject.c:long_add [/usr/bin/python3.11]", "Python interpreter"),
    ("/build/Python-3.11.7/./Include/object.h:_PyLong_Add", "Python interpreter"),
    ("???:c10::Dispatcher::call(c10::OperatorHandle const&) [/x/torch/lib/libtorch_cpu.so]",
     "torch: dispatcher"),
    ("???:torch::autograd::VariableType::add(at::Tensor) [/x/torch/lib/libtorch_cpu.so]",
     "torch: autograd"),
    ("???:at::native::add_out(at::Tensor&) [/x/torch/lib/libtorch_cpu.so]", "torch: ATen"),
    ("???:c10::TensorImpl::release_resources() [/x/torch/lib/libc10.so]", "torch (other)"),
    ("???:pybind11::cpp_function::dispatcher(_object*) [/venv/site-packages/m.cpython-311.so]",
     "pybind11 and other extensions"),
    ("???:_int_malloc [/usr/lib/x86_64-linux-gnu/libc.so.6]", "libc / malloc"),
    ("???:malloc [/usr/lib/valgrind/vgpreload_memcheck.so]", "libc / malloc"),
    ("/tmp/opbench_cpp/stmt.cpp:bench_loop [/tmp/opbench_cpp/stmt.so]", "statement's own code"),
])
def test_where(name: str, group: str) -> None:
    assert where(name) == group and group in GROUPS


def test_diff_orders_by_absolute_exclusive_change_per_call() -> None:
    base = {"exclusive": {"a [python3]": 1000, "b [python3]": 500, "same [python3]": 70},
            "inclusive": {"a [python3]": 1500, "b [python3]": 500, "same [python3]": 70}}
    head = {"exclusive": {"a [python3]": 1100, "b [python3]": 200, "c [libc.so.6]": 50,
                          "same [python3]": 70},
            "inclusive": {"a [python3]": 1700, "b [python3]": 200, "c [libc.so.6]": 50,
                          "same [python3]": 70}}
    changes = diff(base, head, number=10, top=15)
    assert [c.function for c in changes] == ["b [python3]", "a [python3]", "c [libc.so.6]"]
    b, a, c = changes
    assert b.exclusive == (50.0, 20.0) and b.exclusive_change == -30.0
    assert a.inclusive_change == 20.0 and c.exclusive == (0.0, 5.0) and c.group == "libc / malloc"
    assert len(diff(base, head, number=10, top=1)) == 1
    # A base loop of another length is scaled to per-call counts too.
    assert diff(base, base, number=10, base_number=20)[0].exclusive == (50.0, 100.0)


def test_changes_that_round_to_nothing_are_no_rows() -> None:
    from opbench.callgrind.function_diff import MINIMUM, diff

    base = {"exclusive": {"a.c:f": 1000, "a.c:g": 500}, "inclusive": {"a.c:f": 1000, "a.c:g": 500}}
    head = {"exclusive": {"a.c:f": 1004, "a.c:g": 900}, "inclusive": {"a.c:f": 1004, "a.c:g": 900}}
    # Per call over 100 calls: f moved by 0.04 (under MINIMUM: a "+0.0" row), g by 4.
    assert MINIMUM == 0.05
    assert [c.function for c in diff(base, head, number=100)] == ["a.c:g"]


def test_python_functions_are_named_by_qualname_file_and_line() -> None:
    from opbench.callgrind.function_diff import PYTHON, python_diff

    base = {"exclusive": {"p/v.py:Version._key": 100}, "inclusive": {"p/v.py:Version._key": 100},
            "lines": {"p/v.py:Version._key": 80}}
    head = {"exclusive": {"p/v.py:Version._key": 300}, "inclusive": {"p/v.py:Version._key": 300},
            "lines": {"p/v.py:Version._key": 88}}
    (change,) = python_diff(base, head, number=10)
    assert change.group == PYTHON and change.line == 88  # head's line: the code as it is now
    assert change.short_name == "Version._key (p/v.py:88)" and change.exclusive_change == 20.0
    assert change.to_dict()["line"] == 88
