"""Reads callgrind's output format (callgrind.out.N) into per-function counts.

No dependency on ``callgrind_annotate``: this reads the format as documented
(https://valgrind.org/docs/manual/cl-format.html) and attributes costs the way
``callgrind_annotate --inclusive=yes|no --threshold=100`` does, which is what
torch.utils.benchmark reports:

* a function is named ``file:function`` (+ `` [object]``), where ``file`` is
  the one set by ``fl=`` and changed by ``fi=``/``fe=`` (inlined code counts
  against the file it came from);
* names may be compressed: ``(id) name`` defines id, ``(id)`` reuses it, with
  separate id spaces for objects (ob/cob), files (fl/fi/fe/cfi/cfl/jfi) and
  functions (fn/cfn/jfn);
* position columns (per ``positions:``) may be absolute, hex, ``+n``/``-n``
  relative to the previous value, or ``*`` (same): only their count matters here;
* a cost line after ``calls=`` is the inclusive cost of that call: it is not
  the caller's own (exclusive) cost, but the caller's inclusive cost, and the
  callee's inclusive total is the sum of the calls into it.

One deliberate difference: callgrind_annotate strips its own working directory
from file names; we do not, so counts never depend on the caller's cwd.
"""
from __future__ import annotations

import collections
from collections.abc import Iterable

__all__ = ["ParsedProfile", "parse_callgrind_out"]

_NAME_SPACE = {
    "ob": "ob", "cob": "ob",
    "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl", "jfi": "fl",
    "fn": "fn", "cfn": "fn", "jfn": "fn",
}


class ParsedProfile:
    """Counts of one event per function, exclusive and inclusive, plus the program total."""

    def __init__(self, exclusive: dict[str, int], inclusive: dict[str, int], total: int) -> None:
        self.exclusive = exclusive
        self.inclusive = inclusive
        self.total = total


class _Names:
    """Undoes name compression: ``(id) name`` defines, ``(id)`` refers."""

    def __init__(self) -> None:
        self._table: dict[tuple[str, str], str] = {}

    def expand(self, key: str, value: str) -> str:
        if not value.startswith("("):
            return value
        close = value.find(")")
        if close < 0:
            return value
        space, ident, name = _NAME_SPACE[key], value[1:close], value[close + 1:].strip()
        if name:
            self._table[(space, ident)] = name
            return name
        try:
            return self._table[(space, ident)]
        except KeyError:
            raise ValueError(
                f"callgrind output refers to undefined name ({ident}) in {key}="
            ) from None


def parse_callgrind_out(lines: Iterable[str], event: str = "Ir") -> ParsedProfile:
    """Parses one callgrind output file (its lines) for `event`.

    >>> p = parse_callgrind_out(["events: Ir", "fl=(1) a.c", "fn=(1) f", "1 10",
    ...                          "cfn=(2) g", "calls=1 5", "2 7", "fn=(2)", "5 7"])
    >>> p.exclusive, p.inclusive, p.total
    ({'a.c:f': 10, 'a.c:g': 7}, {'a.c:f': 17, 'a.c:g': 7}, 17)
    """
    reader = _Reader(event)
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head = line[0]
        if head.isdigit() or head in "+-*" or line.startswith("0x"):
            reader.cost(line)
            continue
        key, eq, value = line.partition("=")
        if eq and key in _NAME_SPACE:
            reader.name(key, value)
        elif eq and key == "calls":
            reader.pending_call = True
        elif not (eq and key in ("jump", "jcnd")):
            reader.header(line)
    return reader.profile()


class _Reader:
    """The state of one pass over a callgrind output file: the current object, file and
    function, the call whose cost line comes next, and the counts so far."""

    def __init__(self, event: str) -> None:
        self.event = event
        self.names = _Names()
        self.n_positions = 1
        self.event_index: int | None = None
        self.exclusive: dict[str, int] = collections.defaultdict(int)
        # Inclusive of functions as callers (self + calls they make) ...
        self.self_and_calls: dict[str, int] = collections.defaultdict(int)
        # ... and as callees (sum of the inclusive costs of calls into them), which wins.
        self.called: dict[str, int] = collections.defaultdict(int)
        self.obj_of: dict[str, str] = {}
        self.summary: int | None = None
        self.totals: int | None = None
        self.obj = self.file = self.fn = ""
        self.current: str | None = None
        self.cfile: str | None = None
        self.callee: str | None = None
        self.pending_call = False

    def cost(self, line: str) -> None:
        """A cost line: the current function's own cost, or the inclusive cost of the call
        that ``calls=`` announced."""
        if self.event_index is None:
            raise ValueError("callgrind output has cost lines before its 'events:' line")
        fields = line.split()
        idx = self.n_positions + self.event_index
        cost = int(fields[idx]) if idx < len(fields) else 0
        if self.current is None:
            raise ValueError("callgrind output has a cost line before any 'fn='")
        if self.pending_call:
            self.pending_call = False
            assert self.callee is not None
            self.called[self.callee] += cost
        else:
            self.exclusive[self.current] += cost
        self.self_and_calls[self.current] += cost

    def name(self, key: str, value: str) -> None:
        """A ``key=`` line naming an object, file or function (compressed or not)."""
        value = self.names.expand(key, value)
        if key == "fn":
            self.fn = value
            self.current = f"{self.file}:{self.fn}"
            self.obj_of[self.current] = self.obj
        elif key == "fl":
            self.file = value
        elif key in ("fi", "fe"):
            if self.current is None:
                raise ValueError(f"callgrind output has '{key}=' before any 'fn='")
            self.file = value
            self.current = f"{self.file}:{self.fn}"
        elif key == "ob":
            self.obj = value
        elif key in ("cfi", "cfl"):
            self.cfile = value
        elif key == "cfn":
            self.callee = f"{self.cfile if self.cfile is not None else self.file}:{value}"
            self.cfile = None
        # cob/jfi/jfn only define names (expand() recorded them).

    def header(self, line: str) -> None:
        """A ``key: value`` line: positions, events, summary, totals (others carry no costs:
        version, creator, pid, cmd, part, desc, event)."""
        key, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"malformed callgrind output line: {line!r}")
        key, value = key.strip(), value.strip()
        if key == "positions":
            self.n_positions = len(value.split())
        elif key == "events":
            events = value.split()
            if self.event not in events:
                raise ValueError(f"callgrind output has no {self.event!r} event (events: {value})")
            self.event_index = events.index(self.event)
        elif key in ("summary", "totals"):
            fields = value.split()
            has = self.event_index is not None and self.event_index < len(fields)
            amount = int(fields[self.event_index]) if has else 0  # type: ignore[index]
            if key == "summary":
                self.summary = amount
            else:
                self.totals = amount

    def profile(self) -> ParsedProfile:
        inclusive = dict(self.self_and_calls)
        inclusive.update(self.called)
        total = self.summary or self.totals or sum(self.exclusive.values())

        def labelled(counts: dict[str, int]) -> dict[str, int]:
            return {(f"{n} [{self.obj_of[n]}]" if self.obj_of.get(n) else n): c
                    for n, c in counts.items()}

        return ParsedProfile(labelled(self.exclusive), labelled(inclusive), total)
