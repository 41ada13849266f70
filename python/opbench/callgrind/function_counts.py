"""FunctionCounts: per-function instruction counts from one callgrind profile.

Mirrors ``torch.utils.benchmark.FunctionCounts`` (same methods, same ``__repr__``
text apart from the class path) without importing torch.

Example:
    >>> rows = (FunctionCount(30, "a.c:f"), FunctionCount(12, "b.c:g"))
    >>> fc = FunctionCounts(rows, inclusive=False)
    >>> fc.sum(), len(fc), fc[0].function
    (42, 2, 'a.c:f')
    >>> (fc - fc[:1]).sum()
    12
"""
from __future__ import annotations

import collections
import dataclasses
import operator
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

__all__ = ["FunctionCount", "FunctionCounts"]

# torch's default print width (torch._tensor_str.PRINT_OPTS.linewidth).
_DEFAULT_LINEWIDTH = 120

# Interpreter symbols whose counts vary from run to run with dict/str hashing
# (randomised per process) rather than with the code measured. torch filters
# only "dictobject.c:lookdict_unicode", a name CPython 3.11 removed (split into
# unicodekeys_lookup_unicode / unicodekeys_lookup_generic), so its denoise()
# removes nothing there. This list names the lookups of every CPython we support.
_NOISY_SYMBOL = re.compile(
    r"dictobject\.c:("
    r"lookdict_unicode"  # <= 3.10 (and lookdict_unicode_nodummy)
    r"|unicodekeys_lookup_unicode|unicodekeys_lookup_generic"  # 3.11+
    r"|unicodekeys_lookup_split|compare_unicode_unicode|compare_unicode_generic"  # 3.12+
    r"|do_lookup"  # 3.13+
    r")"
)


def _linewidth() -> int:
    # Follow torch.set_printoptions(linewidth=...) when torch is loaded, as
    # torch's FunctionCounts does, but never import torch for it.
    torch = sys.modules.get("torch")
    try:
        return int(torch._tensor_str.PRINT_OPTS.linewidth)  # type: ignore[union-attr]
    except AttributeError:
        return _DEFAULT_LINEWIDTH


class FunctionCount(NamedTuple):
    """Instructions executed in one function: ``(count, "file:function [object]")``."""

    count: int  # type: ignore[assignment]
    function: str


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class FunctionCounts:
    """Instruction counts per function, sorted by count (largest first).

    Supports tuple-like indexing and slicing, ``+``/``-`` to combine or diff
    profiles, ``*`` to scale, ``transform``/``filter`` to regroup names, and
    ``denoise`` to drop the interpreter's hash-dependent symbols.
    """

    _data: tuple[FunctionCount, ...]
    inclusive: bool
    truncate_rows: bool = True
    # Fixed width for hermetic tests; None follows torch's print options.
    _linewidth: int | None = None

    def __iter__(self) -> Iterator[FunctionCount]:
        yield from self._data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, item: Any) -> FunctionCount | FunctionCounts:
        data = self._data[item]
        if isinstance(data, tuple) and not isinstance(data, FunctionCount):
            return FunctionCounts(data, self.inclusive, truncate_rows=False)
        return data

    def __repr__(self) -> str:
        # Width of the count column, counting a minus sign.
        count_len = max((len(str(c)) + int(c < 0) for c, _ in self), default=0)
        linewidth = self._linewidth or _linewidth()
        fn_str_len = max(linewidth - count_len - 4, 40)
        lines = []
        for c, fn in self:
            if len(fn) > fn_str_len:
                left_len = (fn_str_len - 5) // 2
                fn = fn[:left_len] + " ... " + fn[-(fn_str_len - left_len - 5):]
            lines.append(f"  {c:>{count_len}}  {fn}")
        if self.truncate_rows and len(lines) > 18:
            lines = [*lines[:9], "...".rjust(count_len + 2), *lines[-9:]]
        if not self.inclusive:
            lines.extend(["", f"Total: {self.sum()}"])
        return "\n".join([object.__repr__(self), *lines])

    def __add__(self, other: FunctionCounts) -> FunctionCounts:
        return self._merge(other, lambda c: c)

    def __sub__(self, other: FunctionCounts) -> FunctionCounts:
        return self._merge(other, operator.neg)

    def __mul__(self, other: int | float) -> FunctionCounts:
        return self._from_dict({fn: int(c * other) for c, fn in self._data}, self.inclusive)

    def transform(self, map_fn: Callable[[str], str]) -> FunctionCounts:
        """Renames every function with ``map_fn``; names that collide are summed.

        >>> fc = FunctionCounts((FunctionCount(2, "/a/x.c:f"), FunctionCount(1, "/b/x.c:f")), False)
        >>> fc.transform(lambda fn: fn.rsplit("/", 1)[-1])[0]
        FunctionCount(count=3, function='x.c:f')
        """
        counts: collections.defaultdict[str, int] = collections.defaultdict(int)
        for c, fn in self._data:
            counts[map_fn(fn)] += c
        return self._from_dict(counts, self.inclusive)

    def filter(self, filter_fn: Callable[[str], bool]) -> FunctionCounts:
        """Keeps the entries whose function name satisfies ``filter_fn``."""
        return FunctionCounts(tuple(i for i in self if filter_fn(i.function)), self.inclusive)

    def sum(self) -> int:
        return sum(c for c, _ in self)

    def denoise(self) -> FunctionCounts:
        """Drops the interpreter's dict-lookup symbols, whose counts follow per-process
        hash randomisation rather than the code measured (for the running CPython)."""
        return self.filter(lambda fn: _NOISY_SYMBOL.search(fn) is None)

    def _merge(self, second: FunctionCounts, merge_fn: Callable[[int], int]) -> FunctionCounts:
        if self.inclusive != second.inclusive:
            raise AssertionError("Cannot merge inclusive and exclusive counts.")
        counts: collections.defaultdict[str, int] = collections.defaultdict(int)
        for c, fn in self:
            counts[fn] += c
        for c, fn in second:
            counts[fn] += merge_fn(c)
        return self._from_dict(counts, self.inclusive)

    @staticmethod
    def _from_dict(counts: dict[str, int], inclusive: bool) -> FunctionCounts:
        flat = (FunctionCount(c, fn) for fn, c in counts.items() if c)
        return FunctionCounts(tuple(sorted(flat, reverse=True)), inclusive)
