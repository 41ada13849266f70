"""Instruction counts per Python function: where a change went, at the level the code was
written in.

A callgrind profile of Python code names the interpreter (``_PyEval_EvalFrameDefault``,
``property_descr_get``...), never the Python function whose own cost changed.
``opbench._C.python_frames`` evaluates every Python frame through two trampolines,
``enter<k>`` and ``callout<k>``, distinct machine-code functions per code object
(slot ``k``), while a loop is counted. From the profile:

* a function's **inclusive** count is the inclusive cost of its ``enter<k>`` (its
  frames and everything they call; a recursive function's nested frames are
  counted in each level, as callgrind counts them);
* its **exclusive** (own) count is that minus the inclusive cost of ``callout<k>``
  (the Python functions its frames call), plus ``callout<k>``'s own few
  instructions: its bytecode and the C code it runs itself (builtins, allocation,
  attribute lookups). Over all functions the own counts add up to the counted
  loop, recursion included.

Functions are named ``file:qualname`` with the file relative to the ``sys.path``
entry it was imported from (the same for a revision's worktree and the working
tree, so two sides of ``opbench ab`` match), and their first line kept apart
(``lines``: it moves when code above it changes). The hook makes calls take
CPython's slower, non-inlined path, so these counts are for finding where a
change went; the gated counts are taken without it (``in_process``).

Example:
    >>> profile = _parse.ParsedProfile(
    ...     exclusive={"???:opbench::python_frames::callout<1>(...) [_C.so]": 5},
    ...     inclusive={"???:opbench::python_frames::enter<1>(...) [_C.so]": 900,
    ...                "???:opbench::python_frames::callout<1>(...) [_C.so]": 405,
    ...                "???:opbench::python_frames::enter<2>(...) [_C.so]": 400}, total=900)
    >>> table = counts(profile, {1: ("pkg/m.py:outer", 10), 2: ("pkg/m.py:inner", 20)})
    >>> table["exclusive"], table["lines"]["pkg/m.py:inner"]
    ({'pkg/m.py:outer': 500, 'pkg/m.py:inner': 400}, 20)
"""
from __future__ import annotations

import collections
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from opbench.callgrind import _parse

__all__ = ["HARNESS", "OTHERS", "counts", "names"]

# A trampoline in callgrind's names (recursion contexts end in 'N: summed with the rest).
_TRAMPOLINE = re.compile(r"opbench::python_frames::(enter|callout)<(\d+)>")
#: The name of the last slot once every other is taken: the code objects beyond them.
OTHERS = "(other Python functions)"
#: Code compiled by opbench itself (the counted loop): its file names start so.
HARNESS = "<opbench"


def _relative(filename: str, roots: Sequence[str]) -> str:
    """``filename`` relative to the longest of ``roots`` holding it (else as it is)."""
    best = ""
    for root in roots:
        root = os.path.join(os.path.abspath(root or os.getcwd()), "")
        if filename.startswith(root) and len(root) > len(best):
            best = root
    return filename[len(best):] if best else filename


def names(codes: Sequence[Any], roots: Sequence[str] | None = None,
          slots: int | None = None, harness: Sequence[str] = ()) -> dict[int, tuple[str, int]]:
    """slot -> (``file:qualname``, first line) for ``opbench._C.python_frames.slots()``;
    the harness's own code (compiled by opbench, or in the files ``harness``) left out,
    the last slot named ``OTHERS`` when all were taken."""
    roots = list(sys.path if roots is None else roots)
    found: dict[int, tuple[str, int]] = {}
    for k, code in enumerate(codes):
        if code is None or code.co_filename.startswith(HARNESS) or code.co_filename in harness:
            continue
        if slots is not None and k == slots - 1:
            found[k] = (OTHERS, 0)
            continue
        qualname = getattr(code, "co_qualname", code.co_name)
        found[k] = (f"{_relative(code.co_filename, roots)}:{qualname}", code.co_firstlineno)
    return found


def counts(profile: _parse.ParsedProfile,
           slots: dict[int, tuple[str, int]]) -> dict[str, dict[str, int]]:
    """``{"exclusive": {name: count}, "inclusive": {...}, "lines": {name: line}}`` of the
    Python functions of ``slots`` (``names``) in one profile (module doc)."""
    enter: collections.Counter[int] = collections.Counter()
    out: collections.Counter[int] = collections.Counter()
    own: collections.Counter[int] = collections.Counter()
    for name, cost in profile.inclusive.items():
        match = _TRAMPOLINE.search(name)
        if match:
            (enter if match.group(1) == "enter" else out)[int(match.group(2))] += cost
    for name, cost in profile.exclusive.items():
        match = _TRAMPOLINE.search(name)
        if match and match.group(1) == "callout":
            own[int(match.group(2))] += cost
    table: dict[str, dict[str, int]] = {"exclusive": {}, "inclusive": {}, "lines": {}}
    for k, inclusive in enter.items():
        if k not in slots:
            continue
        name, line = slots[k]
        table["exclusive"][name] = table["exclusive"].get(name, 0) + inclusive - out[k] + own[k]
        table["inclusive"][name] = table["inclusive"].get(name, 0) + inclusive
        table["lines"][name] = line
    return table
