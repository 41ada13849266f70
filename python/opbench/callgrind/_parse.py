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
    names = _Names()
    n_positions = 1
    event_index: int | None = None
    exclusive: dict[str, int] = collections.defaultdict(int)
    # Inclusive of functions as callers (self + calls they make) ...
    self_and_calls: dict[str, int] = collections.defaultdict(int)
    # ... and as callees (sum of the inclusive costs of calls into them), which wins.
    called: dict[str, int] = collections.defaultdict(int)
    obj_of: dict[str, str] = {}
    summary = totals = None

    obj = file = fn = ""
    name: str | None = None
    cfile: str | None = None
    callee: str | None = None
    pending_call = False

    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head = line[0]
        if head.isdigit() or head in "+-*" or line.startswith("0x"):
            if event_index is None:
                raise ValueError("callgrind output has cost lines before its 'events:' line")
            fields = line.split()
            idx = n_positions + event_index
            cost = int(fields[idx]) if idx < len(fields) else 0
            if name is None:
                raise ValueError("callgrind output has a cost line before any 'fn='")
            if pending_call:
                pending_call = False
                assert callee is not None
                called[callee] += cost
                self_and_calls[name] += cost
            else:
                exclusive[name] += cost
                self_and_calls[name] += cost
            continue

        key, eq, value = line.partition("=")
        if eq and key in _NAME_SPACE:
            value = names.expand(key, value)
            if key == "fn":
                fn = value
                name = f"{file}:{fn}"
                obj_of[name] = obj
            elif key == "fl":
                file = value
            elif key in ("fi", "fe"):
                if name is None:
                    raise ValueError(f"callgrind output has '{key}=' before any 'fn='")
                file = value
                name = f"{file}:{fn}"
            elif key == "ob":
                obj = value
            elif key in ("cfi", "cfl"):
                cfile = value
            elif key == "cfn":
                callee = f"{cfile if cfile is not None else file}:{value}"
                cfile = None
            # cob/jfi/jfn only define names (expand() recorded them).
            continue
        if eq and key == "calls":
            pending_call = True
            continue
        if eq and key in ("jump", "jcnd"):
            continue

        key, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"malformed callgrind output line: {line!r}")
        key, value = key.strip(), value.strip()
        if key == "positions":
            n_positions = len(value.split())
        elif key == "events":
            events = value.split()
            if event not in events:
                raise ValueError(f"callgrind output has no {event!r} event (events: {value})")
            event_index = events.index(event)
        elif key in ("summary", "totals"):
            fields = value.split()
            has = event_index is not None and event_index < len(fields)
            amount = int(fields[event_index]) if has else 0  # type: ignore[index]
            if key == "summary":
                summary = amount
            else:
                totals = amount
        # Other header lines (version, creator, pid, cmd, part, desc, event) carry no costs.

    inclusive = dict(self_and_calls)
    inclusive.update(called)
    total = summary or totals or sum(exclusive.values())

    def labelled(counts: dict[str, int]) -> dict[str, int]:
        return {(f"{n} [{obj_of[n]}]" if obj_of.get(n) else n): c for n, c in counts.items()}

    return ParsedProfile(labelled(exclusive), labelled(inclusive), total)
