"""History: every autosaved run of a machine, per benchmark over commits, with its changes.

``--opbench-autosave`` (pytest) and ``opbench timeit --autosave`` keep each run
under ``.opbench/<machine id>/`` (``opbench.store.baselines``) with its commit, branch,
dirty flag, commit time, save time and environment. ``load()`` reads a machine's
folder back as a ``History``: runs ordered by commit (commit time, then the
commit's position in its branch, then run number), and per benchmark a
``Series`` of points, one per run, with its change points (``opbench.stats.changepoints``).

A history survives damage: a file that cannot be read, or whose results are
partly invalid, gives what is valid, and ``History.problems`` names each file and
entry that is not (the gate's own ``opbench.load`` stays all-or-nothing).

``prune()`` deletes runs by count (keep the newest N) or age (saved more than D
days ago).

Example:
    >>> import tempfile
    >>> from opbench import Measurement, TaskSpec
    >>> from opbench.store import baselines
    >>> root = tempfile.mkdtemp()
    >>> for t in (1.0e-6, 1.1e-6):
    ...     _ = baselines.autosave([Measurement(1, [t], TaskSpec("f()", "pass", name="f"))],
    ...                            root=root)
    >>> h = load(root)
    >>> [round(p.value * 1e6, 2) for p in h.series("f").points]
    [1.0, 1.1]
"""
from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opbench import stats
from opbench._files import remove_numbered
from opbench.core import identity
from opbench.core.measurement import select_unit
from opbench.stats import changepoints
from opbench.store import baselines
from opbench.store.results import Results, load_valid

__all__ = ["History", "Point", "Run", "Series", "changes", "commit_range", "describe_change",
           "format_value", "load", "machines", "prune", "short"]

TIME = "time"
INSTRUCTIONS = "instructions"


@dataclasses.dataclass
class Run:
    """One saved run: its file, number, environment and results."""

    number: int
    path: Path
    results: Results

    @property
    def environment(self) -> dict[str, Any]:
        return self.results.environment

    @property
    def git(self) -> dict[str, Any]:
        """The checkout it ran in (``baselines.git_state``); from ``git_commit`` alone for
        runs saved before opbench recorded more."""
        git = self.environment.get("git")
        if isinstance(git, dict):
            return git
        commit = self.environment.get("git_commit")
        if not isinstance(commit, str):
            return {}
        return {"commit": commit.removesuffix("+dirty"), "dirty": commit.endswith("+dirty")}

    @property
    def commit(self) -> str | None:
        return self.git.get("commit")

    @property
    def saved_at(self) -> str | None:
        return self.environment.get("saved_at")

    def order(self) -> tuple[Any, ...]:
        git = self.git
        return (git.get("commit_time") or self.saved_at or "", git.get("position") or 0,
                self.number)


@dataclasses.dataclass
class Point:
    """A benchmark in one run: ``value`` (seconds per run, or instructions per run) and
    its interval ``low``..``high`` (the median's 95% CI, else the interquartile range;
    for counts, the repeats' range)."""

    run: Run
    value: float
    low: float
    high: float


@dataclasses.dataclass
class Series:
    """A benchmark's points over commits (one per run, in commit order) and one value
    per commit (the median of its runs), which change points are found in."""

    key: str
    kind: str
    points: list[Point]

    def by_commit(self) -> list[tuple[str | None, list[Point]]]:
        """Consecutive points of one commit grouped (a commit measured twice is one level);
        runs outside git stay apart."""
        groups: list[tuple[str | None, list[Point]]] = []
        for p in self.points:
            commit = p.run.commit
            if groups and commit is not None and groups[-1][0] == commit:
                groups[-1][1].append(p)
            else:
                groups.append((commit, [p]))
        return groups

    def detect(self, **options: Any) -> changepoints.Detection:
        """Change points over the commits (``changepoints.detect``; ``start``/``end`` index
        ``by_commit()``)."""
        values = [_median([p.value for p in pts]) for _, pts in self.by_commit()]
        if self.kind == INSTRUCTIONS:
            options.setdefault("noise_floor", 1e-6)
        return changepoints.detect(values, **options)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclasses.dataclass
class History:
    """A machine's runs in commit order, and what could not be loaded (``problems``)."""

    machine: str
    runs: list[Run]
    problems: list[str]

    def benchmarks(self) -> list[tuple[str, str]]:
        """Every (key, kind) in the history, sorted; kind is ``"time"`` or
        ``"instructions"``."""
        found = {(identity.key(r), TIME) for run in self.runs for r in run.results}
        found |= {(identity.key(c), INSTRUCTIONS) for run in self.runs
                  for c in run.results.instructions}
        return sorted(found)

    def series(self, key: str, kind: str = TIME) -> Series:
        points = []
        for run in self.runs:
            for r in (run.results if kind == TIME else run.results.instructions):
                if identity.key(r) == key:
                    points.append(_point(run, r, kind))
        return Series(key, kind, points)


def _point(run: Run, r: Any, kind: str) -> Point:
    if kind == INSTRUCTIONS:
        per_run = [(c - r.baseline if c > r.baseline else c) / r.number_per_run
                   for c in r.counts]
        return Point(run, r.per_run, min(per_run), max(per_run))
    times = sorted(r.times)
    # A saved run is past warning about: a run too short for an interval shows its IQR.
    ci = stats.median_ci_sorted(times, stats.DEFAULT_CONFIDENCE) or (
        times[len(times) // 4], times[(3 * len(times)) // 4])
    return Point(run, r.median, ci[0], ci[1])


def machines(root: str | os.PathLike[str] | None = None) -> list[str]:
    """The machines with a history under ``root`` (default: ``baselines.root_dir()``)."""
    folder = baselines.root_dir(root)
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and baselines.runs(folder, p.name))


def load(root: str | os.PathLike[str] | None = None, machine: str | None = None) -> History:
    """The history of ``machine`` (default: this one) under ``root``; never raises for a
    damaged file: it is named in ``problems`` and what is valid is kept."""
    machine = machine or baselines.machine_id()
    runs, problems = [], []
    for path in baselines.runs(root, machine):
        results, bad = load_valid(path)
        problems += bad
        if results or results.instructions:
            runs.append(Run(baselines.run_number(path) or 0, path, results))
    runs.sort(key=Run.order)
    return History(machine, runs, problems)


def prune(root: str | os.PathLike[str] | None = None, machine: str | None = None, *,
          keep: int | None = None, older_than_days: float | None = None,
          now: datetime.datetime | None = None) -> list[Path]:
    """Deletes runs of ``machine`` beyond the newest ``keep`` and those saved more than
    ``older_than_days`` ago (by the time recorded in the file, else the file's
    modification time); returns the paths deleted. Unreadable files are left alone
    (``history`` names them)."""
    if keep is not None and keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    machine = machine or baselines.machine_id()
    paths = baselines.runs(root, machine)
    doomed: set[Path] = set(paths[:-keep] if keep else paths) if keep is not None else set()
    if older_than_days is not None:
        limit = (now or datetime.datetime.now(datetime.timezone.utc)) - datetime.timedelta(
            days=older_than_days)
        doomed |= {p for p in paths if (_saved_at(p) or limit) < limit}
    for path in sorted(doomed):
        remove_numbered(path, baselines.run_number(path) or 0)
    return sorted(doomed)


def _saved_at(path: Path) -> datetime.datetime | None:
    results, _ = load_valid(path)
    text = str(results.environment.get("saved_at"))
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        try:
            return datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc)
        except OSError:
            return None


def changes(history: History, keys: Iterable[str] | None = None,
            **options: Any) -> list[tuple[Series, changepoints.Detection]]:
    """Each benchmark's (or each of ``keys``') series with its change points."""
    wanted = set(keys) if keys is not None else None
    return [(s, s.detect(**options)) for s in
            (history.series(k, kind) for k, kind in history.benchmarks()
             if wanted is None or k in wanted)]


def short(commit: str | None) -> str:
    """A commit as ten hex digits (``-`` for none)."""
    return commit[:10] if commit else "-"


def commit_range(series: Any, change: Any) -> str:
    """``a..b`` for a change: the commits at its first and last point (a step: the last
    before it and the first after)."""
    groups = series.by_commit()
    return f"{short(groups[change.start][0])}..{short(groups[change.end][0])}"


def describe_change(change: Any) -> str:
    """``step +15.0%`` / ``drift +14.2% over 14 commits (+1.0%/commit)``."""
    if change.kind == "step":
        return f"step {change.size:+.1%}"
    return (f"drift {change.size:+.1%} over {change.end - change.start} commits "
            f"({change.per_point:+.2%}/commit)")


def format_value(value: float, kind: str) -> str:
    """``2.302 us`` for a time in seconds, ``12,345.0 instr`` for a count."""
    if kind == INSTRUCTIONS:
        return f"{value:,.1f} instr"
    unit, scale = select_unit(value)
    return f"{value / scale:.4g} {unit}"
