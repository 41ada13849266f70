"""Where a statement's time goes: its calls under cProfile, the harness's frames removed.

Hunting a fixed overhead usually means wrapping a benchmark loop in cProfile
by hand, then reading past the loop's own frames. ``profile(timer)`` does
that: after a warm-up it calls the statement ``number`` times under cProfile,
drops the frames that are not the statement's (opbench's driving loop,
cProfile's own ``disable``), and reports each remaining function's calls and
time **per run of the statement** (totals divided by ``number``), so the
figures read against the Timer's per-run times. cProfile adds its own cost
to every Python call, so absolute times run high; the split between
functions is what to read.

A string statement runs as one function whose frame is shown as
``<stmt>``: its own time is the statement's inline work (operators on
tensors, for instance, which cProfile does not see as calls).

Example:
    >>> import opbench
    >>> report = profile(opbench.Timer("sorted(xs)", setup="xs = list(range(50))"), number=100)
    >>> [r.function for r in report.rows][:2]
    ['<stmt>', '<built-in method builtins.sorted>']
"""
from __future__ import annotations

import cProfile
import marshal
import os
import pstats
from collections.abc import Callable
from typing import Any, NamedTuple

from opbench._checks import check_count
from opbench._files import atomic_write
from opbench._text import text_table
from opbench._threads import set_torch_threads
from opbench.core.measurement import select_unit

__all__ = ["ProfileReport", "ProfileRow", "profile"]

_SORT_KEYS = {"cumulative": "cumtime", "cumtime": "cumtime", "own": "tottime", "tottime": "tottime"}


class ProfileRow(NamedTuple):
    """One function: ``ncalls`` per run of the statement, ``tottime`` (own time, callees
    excluded) and ``cumtime`` (callees included) in seconds per run."""

    function: str
    ncalls: float
    tottime: float
    cumtime: float


def _drive(fn: Callable[[], Any], number: int) -> None:
    # Kept apart so its frame can be recognised and removed from the profile.
    for _ in range(number):
        fn()


_HARNESS_CODE = _drive.__code__
_DISABLE = ("~", 0, "<method 'disable' of '_lsprof.Profiler' objects>")


def _is_harness(func: tuple[str, int, str]) -> bool:
    filename, line, name = func
    return func == _DISABLE or (
        filename == _HARNESS_CODE.co_filename and line == _HARNESS_CODE.co_firstlineno
        and name == _HARNESS_CODE.co_name
    )


def _function_name(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    if filename == "~":  # builtins: pstats spells them "{built-in method ...}"
        return name.replace("{", "<").replace("}", ">") if name.startswith("{") else name
    if filename == "<stmt>":
        return "<stmt>"
    short = os.path.join(*filename.split(os.sep)[-2:]) if os.sep in filename else filename
    return f"{short}:{line}({name})"


class ProfileReport:
    """The profile of ``number`` runs of a statement.

    Attributes:
        rows: every profiled function, by cumulative time per run, largest first.
        number: runs profiled.
        total: seconds per run spent inside the statement (under the profiler).
    """

    def __init__(self, stats: dict[Any, Any], number: int, top: int = 20) -> None:
        self._stats = stats
        self.number = number
        self.top = top
        self.rows = sorted(
            (
                ProfileRow(_function_name(func), nc / number, tt / number, ct / number)
                for func, (cc, nc, tt, ct, callers) in stats.items()
            ),
            key=lambda r: (-r.cumtime, r.function),
        )
        self.total = sum(r.tottime for r in self.rows)

    def sorted_by(self, key: str = "cumulative", top: int | None = None) -> list[ProfileRow]:
        """The top ``top`` rows by ``"cumulative"`` or ``"own"`` time per run."""
        field = _SORT_KEYS.get(key)
        if field is None:
            raise ValueError(f"sort key must be 'cumulative' or 'own', got {key!r}")
        rows = sorted(self.rows, key=lambda r: (-getattr(r, field), r.function))
        return rows if top is None else rows[:top]

    def table(self, sort: str = "cumulative", top: int | None = None) -> str:
        """The report as text: calls, own and cumulative time per run, and share of total."""
        rows = self.sorted_by(sort, self.top if top is None else top)
        unit, scale = select_unit(max(self.total, 1e-9))
        headers = ["ncalls/run", f"own ({unit})", f"cum ({unit})", "cum %", "function"]
        body = [
            [f"{r.ncalls:g}", f"{r.tottime / scale:.3f}", f"{r.cumtime / scale:.3f}",
             f"{100 * r.cumtime / self.total:.1f}" if self.total else "-", r.function]
            for r in rows
        ]
        title = (f"Profile of {self.number} runs: {self.total / scale:.3f} {unit} per run "
                 f"under cProfile, sorted by {sort} time (top {len(rows)} of {len(self.rows)})")
        return title + "\n" + text_table(headers, body, [True] * 4 + [False], github=False)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<ProfileReport: {len(self.rows)} functions, {self.number} runs>"

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Writes a pstats file (totals over all runs), e.g. for ``snakeviz path``."""
        atomic_write(path, lambda f: marshal.dump(self._stats, f))


def _without_harness(raw: dict[Any, Any]) -> dict[Any, Any]:
    """pstats' table minus harness functions, also removed as callers (so the dump's
    call graph starts at the statement)."""
    return {
        func: (cc, nc, tt, ct, {c: v for c, v in callers.items() if not _is_harness(c)})
        for func, (cc, nc, tt, ct, callers) in raw.items()
        if not _is_harness(func)
    }


def profile(timer: Any, number: int = 1000, top: int = 20) -> ProfileReport:
    """Runs ``timer``'s statement ``number`` times under cProfile (after a warm-up of
    ``max(number // 100, 2)`` runs, as ``timeit`` does), in its thread setting.

    Args:
        timer: an opbench Timer with a Python statement or callable.
        number: runs to profile (>= 1).
        top: rows ``str(report)`` shows.

    Raises:
        ValueError: bad ``number``, or a C++ / device-timed statement
        (cProfile sees only Python).
    """
    check_count("number", number)
    with set_torch_threads(timer.task_spec.num_threads):
        fn = timer.engine.as_callable()
        _drive(fn, max(number // 100, 2))
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            _drive(fn, number)
        finally:
            profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    return ProfileReport(_without_harness(stats), number, top)
