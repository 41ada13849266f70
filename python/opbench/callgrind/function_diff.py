"""Function diff: which functions' instruction counts changed between two results of one
benchmark (base and head of ``opbench ab --mode instructions``), grouped by where they live.

The pytest plugin's instruction mode keeps, with each result, callgrind's
per-function counts of its counted loop (``info["functions"]``: exclusive and
inclusive counts of the largest functions, and the loop's ``number`` of calls
is the result's ``number_per_run``). ``diff`` turns two of those into the top
changes per call, by absolute change of the exclusive count (the function's
own instructions: where the difference was spent), with the inclusive counts
beside them; ``where`` names the part of the stack a function belongs to:

* ``Python interpreter``: CPython's own code (the ``python`` binary, libpython,
  its ``Objects/``, ``Python/``, ``Modules/`` sources);
* ``torch: dispatcher``, ``torch: autograd``, ``torch: ATen``, ``torch (other)``;
* ``pybind11 and other extensions``: other extension modules (``*.so`` in
  site-packages, ``.cpython-*`` modules, ``pybind11::``);
* ``libc / malloc``: the C and C++ runtimes and the allocator;
* ``statement's own code``: anything else, e.g. the statement's compiled C++.

``python_diff`` does the same for the per-Python-function counts
(``info["python_functions"]``, ``opbench.callgrind.python_functions``): the Python
function whose own cost changed heads the list, named ``qualname (file:line)``.
Rows whose change per call rounds to zero (under ``MINIMUM``) are left out: a
table of +0.0 changes says nothing.

Example:
    >>> base = {"exclusive": {"Objects/longobject.c:long_add [python3.11]": 3000},
    ...         "inclusive": {"Objects/longobject.c:long_add [python3.11]": 3000}}
    >>> head = {"exclusive": {"Objects/longobject.c:long_add [python3.11]": 3300},
    ...         "inclusive": {"Objects/longobject.c:long_add [python3.11]": 3300}}
    >>> change = diff(base, head, number=100)[0]
    >>> change.group, change.exclusive_change
    ('Python interpreter', 3.0)
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

__all__ = ["GROUPS", "MINIMUM", "PYTHON", "FunctionChange", "diff", "python_diff", "where"]

GROUPS = ("Python interpreter", "torch: dispatcher", "torch: autograd", "torch: ATen",
          "torch (other)", "pybind11 and other extensions", "libc / malloc",
          "statement's own code")

#: The group of the per-Python-function rows.
PYTHON = "Python code"
#: A change per call smaller than this (exclusive and inclusive) is no row: +0.0.
MINIMUM = 0.05

_OBJECT = re.compile(r"\[([^\]]*)\]\s*$")
_CPYTHON_SOURCES = ("Objects/", "Python/", "Modules/", "Include/", "Parser/")
_CPYTHON_TREE = re.compile(r"(^|/)(Python-3[^/]*|cpython[^/]*)/")
_LIBC = ("libc.so", "libc-", "ld-linux", "libm.so", "libstdc++", "libgcc", "libpthread",
         "vgpreload", "libjemalloc", "libtcmalloc")
_MALLOC = ("malloc", "free", "calloc", "realloc", "memcpy", "memset", "memmove")


def where(name: str) -> str:
    """The group of ``name`` (callgrind's ``file:function [object]``); see the module doc."""
    match = _OBJECT.search(name)
    obj = match.group(1) if match else ""
    base = obj.rsplit("/", 1)[-1]
    file_and_fn = name[:match.start()].strip() if match else name
    function = file_and_fn.split(":", 1)[-1]
    if "libtorch" in base or "libc10" in base or "/torch/" in obj:
        if "Dispatcher" in function or "c10::impl::" in function or "OperatorHandle" in function:
            return "torch: dispatcher"
        if "autograd" in function or "VariableType" in function:
            return "torch: autograd"
        if function.startswith("at::") or "at::native" in function or "at::_ops" in function:
            return "torch: ATen"
        return "torch (other)"
    if any(lib in base for lib in _LIBC) or function.lstrip("_").startswith(_MALLOC):
        return "libc / malloc"
    if base.startswith(("python", "libpython")) or file_and_fn.startswith(_CPYTHON_SOURCES) \
            or _CPYTHON_TREE.search(file_and_fn):
        return "Python interpreter"
    if "pybind11::" in function or ".cpython-" in base or "site-packages" in obj \
            or "dist-packages" in obj:
        return "pybind11 and other extensions"
    return "statement's own code"


@dataclasses.dataclass(frozen=True)
class FunctionChange:
    """One function's counts per call, base and head (0 where a side does not have it)."""

    function: str
    group: str
    exclusive: tuple[float, float]
    inclusive: tuple[float, float]
    line: int | None = None  # a Python function's first line (head's)

    @property
    def exclusive_change(self) -> float:
        return self.exclusive[1] - self.exclusive[0]

    @property
    def inclusive_change(self) -> float:
        return self.inclusive[1] - self.inclusive[0]

    @property
    def short_name(self) -> str:
        """The name with folders dropped: the file's last two parts, the object's name
        (``Python/ceval.c:_PyEval_EvalFrameDefault [libpython3.11.so.1.0]``); a Python
        function as ``qualname (file:line)`` (``Version.__lt__ (packaging/version.py:512)``)."""
        if self.group == PYTHON:
            file, sep, qualname = self.function.rpartition(":")
            return f"{qualname} ({file}:{self.line})" if sep and self.line else self.function
        match = _OBJECT.search(self.function)
        head = self.function[:match.start()].rstrip() if match else self.function
        file, sep, fn = head.partition(":")
        if sep:
            head = "/".join(file.split("/")[-2:]) + ":" + fn
        return head + (f" [{match.group(1).rsplit('/', 1)[-1]}]" if match else "")

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "group": self.group, "line": self.line,
                "exclusive": list(self.exclusive), "inclusive": list(self.inclusive)}


def diff(base: dict[str, dict[str, int]], head: dict[str, dict[str, int]], *,
         number: int = 1, base_number: int | None = None, top: int = 15,
         group: Callable[[str], str] = where) -> list[FunctionChange]:
    """The ``top`` functions by absolute change of their exclusive count per call (ties: by
    inclusive change), from two ``info["functions"]`` tables of loops of ``number`` calls
    (``base_number`` when the base's loop had another length); a change under ``MINIMUM``
    per call either way is no row. ``group`` names where each function lives."""
    per_base = base_number or number
    names = set(base.get("exclusive", {})) | set(head.get("exclusive", {}))
    lines = {**base.get("lines", {}), **head.get("lines", {})}
    changes = []
    for fn in names:
        exclusive = (base.get("exclusive", {}).get(fn, 0) / per_base,
                     head.get("exclusive", {}).get(fn, 0) / number)
        inclusive = (base.get("inclusive", {}).get(fn, 0) / per_base,
                     head.get("inclusive", {}).get(fn, 0) / number)
        if abs(exclusive[1] - exclusive[0]) >= MINIMUM or abs(inclusive[1] - inclusive[0]) >= MINIMUM:
            line = lines.get(fn)
            changes.append(FunctionChange(fn, group(fn), exclusive, inclusive,
                                          line if isinstance(line, int) else None))
    changes.sort(key=lambda c: (-abs(c.exclusive_change), -abs(c.inclusive_change), c.function))
    return changes[:top]


def python_diff(base: dict[str, dict[str, int]], head: dict[str, dict[str, int]], *,
                number: int = 1, base_number: int | None = None,
                top: int = 15) -> list[FunctionChange]:
    """``diff`` of two ``info["python_functions"]`` tables: Python functions, by the change
    of their own count per call (module doc).

    Example:
        >>> base = {"exclusive": {"m.py:f": 100, "m.py:g": 50}, "inclusive": {"m.py:f": 150,
        ...         "m.py:g": 50}, "lines": {"m.py:f": 1, "m.py:g": 5}}
        >>> head = {"exclusive": {"m.py:f": 100, "m.py:g": 90}, "inclusive": {"m.py:f": 190,
        ...         "m.py:g": 90}, "lines": {"m.py:f": 1, "m.py:g": 7}}
        >>> [(c.short_name, c.exclusive_change) for c in python_diff(base, head, number=10)]
        [('g (m.py:7)', 4.0), ('f (m.py:1)', 0.0)]
    """
    return diff(base, head, number=number, base_number=base_number, top=top,
                group=lambda fn: PYTHON)
