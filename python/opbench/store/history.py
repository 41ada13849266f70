"""History: every autosaved run of a machine, per benchmark over commits, with its changes.

``--opbench-autosave`` (pytest) and ``opbench timeit --autosave`` keep each run
under ``.opbench/<machine id>/`` (``opbench.store.baselines``) with its commit, branch,
dirty flag, commit time, save time and environment. ``load()`` reads a machine's
folder back as a ``History``: runs ordered by commit (commit time, then the
commit's position in its branch, then run number), and per benchmark a
``Series`` of points, one per run, with its change points (``opbench.stats.changepoints``:
a commit's runs are its replicates). A run counts by its figure, the 10th
percentile of its per-run times (``opbench.stats.run_figure``), as the gate and
``opbench ab`` count it. A run whose fastest blocks (those its figure is taken from)
ran on a core more than ``FULL_SPEED`` slower than the machine's full speed, by
opbench's speed probe, is left out of its commit's level where the commit has runs
at full speed: its figure is another tenant's work as much as the code's. The
machine's full speed is the fastest any process of the history recorded as its
own: against its own best, a process that started on a shared core reads 1.0.

A run saved with ``SETTLE_KEY`` in its environment (``opbench history run``'s paired
rounds at a step in doubt: ``{"step": [commit before, commit after], "round": r}``)
is no level of its commit: the two runs of a round, both at full speed, are one
(before, after) pair of ``Series.rounds``, and the step's test holds them
(``opbench.stats.changepoints``: they measured the same minutes of the machine, so
their ratio is the step, whatever those minutes did to both).

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
import functools
import os
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opbench import stats
from opbench._files import remove_numbered
from opbench._text import short_commit
from opbench.core import disturbance as _disturbance
from opbench.core import identity
from opbench.core import memory as _memory
from opbench.stats import changepoints, run_figure
from opbench.store import baselines
from opbench.store.results import Results, load_valid

__all__ = ["FULL_SPEED", "SETTLE_KEY", "History", "Point", "Run", "Series", "Standing", "changes",
           "commit_range", "counted", "counted_rounds", "describe_change", "evidence", "label",
           "load", "machines", "prune", "short", "slowed", "standing", "tag"]

#: Where a paired round's run names its step and round (module doc).
SETTLE_KEY = "settles"
TIME = "time"
INSTRUCTIONS = "instructions"
# Memory per call (MemoryCounts): a series per figure, keyed as the gate keys its rows
# (``key [allocations]``, ``key [bytes]``...), of kind "allocations" or "bytes".
MEMORY_KINDS = _memory.KINDS


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

    @property
    def settles(self) -> tuple[str, str, int] | None:
        """(commit before, commit after, round) of a paired round's run, None for others."""
        found = self.environment.get(SETTLE_KEY)
        if not isinstance(found, dict):
            return None
        try:
            (before, after), number = found["step"], int(found["round"])
        except (KeyError, TypeError, ValueError):
            return None
        return (before, after, number) if isinstance(before, str) and isinstance(after, str) \
            else None

    def order(self) -> tuple[Any, ...]:
        git = self.git
        return (git.get("commit_time") or self.saved_at or "", git.get("position") or 0,
                self.number)


@dataclasses.dataclass
class Point:
    """A benchmark in one run: ``value`` (the run's figure: the 10th percentile of its
    per-run times in seconds, or instructions per run) and its interval ``low``..``high``
    (the figure's 95% CI, else the fastest time to the median; for counts, the repeats'
    range)."""

    run: Run
    value: float
    low: float
    high: float
    # Around the blocks its figure is taken from, the core ran this much slower than full
    # speed by the speed probe (opbench.core.disturbance.figure_slowdown): its process's,
    # which was ``full_speed_ns`` (None: unknown), until ``History.series`` makes it the
    # machine's, and marks ``slow_core`` a point another tenant slowed all along them
    # (the core's hyperthread sibling kept busy).
    slowdown: float = 1.0
    full_speed_ns: float | None = None
    slow_core: bool = False


@dataclasses.dataclass
class Series:
    """A benchmark's points over commits (one per run, in commit order) and one value
    per commit (the median of its runs), which change points are found in."""

    key: str
    kind: str
    points: list[Point]
    # (commit before, commit after) -> that step's paired rounds, (before, after) points each.
    rounds: dict[tuple[str, str], list[tuple[Point, Point]]] = dataclasses.field(
        default_factory=dict)

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

    def replicates(self) -> list[list[float]]:
        """Each commit's run values (``by_commit()``'s order) that its level is made of: the
        runs at full speed, where it has some (as the gate leaves out a run none of whose
        blocks ran undisturbed)."""
        return [[p.value for p in counted(pts)] for _, pts in self.by_commit()]

    def paired(self) -> dict[int, list[tuple[float, float]]]:
        """The paired rounds of each step (``i``: between ``by_commit()``'s ``i`` and
        ``i + 1``) as (before, after) values, those whose two runs both ran at full speed."""
        commits = [commit or "" for commit, _ in self.by_commit()]
        found = {}
        for i, step in enumerate(zip(commits, commits[1:])):
            pairs = [(a.value, b.value) for a, b in counted_rounds(self.rounds.get(step, []))]
            if pairs:
                found[i] = pairs
        return found

    def doubts(self, detection: changepoints.Detection | None = None) -> list[int]:
        """The steps in doubt (``changepoints.doubts``), by ``by_commit()`` index: where
        paired rounds would settle whether the history changed."""
        return changepoints.doubts(self.replicates(), detection or self.detect())

    def detect(self, **options: Any) -> changepoints.Detection:
        """Change points over the commits, each commit's runs its replicates
        (``changepoints.detect_runs`` on ``replicates()``, with the steps' paired rounds;
        ``start``/``end`` index ``by_commit()``); a commit none of whose runs ran at
        full speed is no level of its own."""
        runs = self.replicates()
        options.setdefault("trusted", [not all(p.slow_core for p in pts)
                                       for _, pts in self.by_commit()])
        if self.kind == TIME:
            options.setdefault("rounds", self.paired())
        if self.kind == INSTRUCTIONS:
            options.setdefault("noise_floor", 1e-6)
        if self.kind in MEMORY_KINDS:  # exact, and often 0: one more each, as the gate's ratio
            runs = [[v + 1 for v in values] for values in runs]
            options.setdefault("noise_floor", 1e-6)
        return changepoints.detect_runs(runs, **options)


def counted(points: list[Point]) -> list[Point]:
    """The points of one commit its level is made of: those at full speed, where it has
    some (the others are left out), else all of them."""
    full = [p for p in points if not p.slow_core]
    return full or points


def counted_rounds(pairs: list[tuple[Point, Point]]) -> list[tuple[Point, Point]]:
    """The paired rounds of one step that count: those whose two runs both ran at full
    speed (a round's ratio cancels what the machine did only where it did it to both)."""
    return [(a, b) for a, b in pairs if not a.slow_core and not b.slow_core]


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
        found |= {(key, kind) for run in self.runs for c in run.results.memory
                  for key, (kind, _) in _memory_series(c).items()}
        return sorted(found)

    @functools.cached_property
    def full_speed_ns(self) -> float | None:
        """The machine's full speed: the fastest any process of this history recorded as
        its own (the speed probe's nanoseconds; None when no run recorded one)."""
        return _disturbance.machine_full_speed_ns(r for run in self.runs for r in run.results)

    def series(self, key: str, kind: str = TIME) -> Series:
        points = []
        if kind in MEMORY_KINDS:
            for run in self.runs:
                for c in run.results.memory:
                    values = _memory_series(c).get(key, (kind, ()))[1]
                    if values:
                        points.append(Point(run, statistics.median(values), min(values), max(values)))
            return Series(key, kind, points)
        rounds: dict[tuple[str, str, int], dict[str, Point]] = {}
        for run in self.runs:
            for r in (run.results if kind == TIME else run.results.instructions):
                if identity.key(r) != key:
                    continue
                point = _point(run, r, kind)
                if run.settles is None:
                    points.append(point)
                elif kind == TIME and run.commit in run.settles[:2]:
                    rounds.setdefault(run.settles, {})[run.commit] = point
        for p in [*points, *(p for pair in rounds.values() for p in pair.values())]:
            _judge_speed(p, self.full_speed_ns)
        paired: dict[tuple[str, str], list[tuple[Point, Point]]] = {}
        for (before, after, _), pair in sorted(rounds.items()):
            if before in pair and after in pair:  # a round whose other run failed: none
                paired.setdefault((before, after), []).append((pair[before], pair[after]))
        return Series(key, kind, points, paired)


#: A point beyond this slowdown ran on a slowed core (``opbench.core.disturbance``).
FULL_SPEED = _disturbance.FULL_SPEED


def slowed(run: Run, keys: Iterable[str], full_speed_ns: float | None) -> list[str]:
    """The timed benchmarks of ``keys`` whose figure in ``run`` was taken on a slowed core,
    as ``History.series`` marks them (``Point.slow_core``) against the machine's full
    speed ``full_speed_ns`` (None: each process's own).

    Example:
        >>> import tempfile
        >>> from opbench import Measurement, TaskSpec
        >>> from opbench.store import baselines
        >>> signals = {"waits": [0.0] * 40, "slowdowns": [1.7] * 40, "threads": 1, "cpus": 2}
        >>> path = baselines.autosave([Measurement(1, [1e-6] * 40, TaskSpec("f()", "pass", name="f"),
        ...                                        info={"disturbance": signals})],
        ...                           root=tempfile.mkdtemp())
        >>> run, = load(path.parent.parent).runs
        >>> slowed(run, ["f"], None)
        ['f']
    """
    wanted = set(keys)
    found = []
    for r in run.results:
        if identity.key(r) in wanted:
            point = _point(run, r, TIME)
            if _judge_speed(point, full_speed_ns):
                found.append(identity.key(r))
    return found


def _judge_speed(p: Point, full_speed_ns: float | None) -> bool:
    """Makes ``p``'s slowdown the machine's (``full_speed_ns``: its full speed, None where
    unknown) and marks it ``slow_core`` beyond ``FULL_SPEED``; whether it is."""
    p.slowdown = _disturbance.machine_slowdown(p.slowdown, p.full_speed_ns, full_speed_ns)
    p.slow_core = p.slowdown > FULL_SPEED
    return p.slow_core


def _memory_series(c: Any) -> dict[str, tuple[str, tuple[float, ...]]]:
    """A MemoryCounts' series: ``key [figure]`` -> (kind, one value per repeat)."""
    return {f"{identity.key(c)} [{name}]": figure for name, figure in c.gated().items()}


def _point(run: Run, r: Any, kind: str) -> Point:
    if kind == INSTRUCTIONS:
        per_run = [(c - r.baseline if c > r.baseline else c) / r.number_per_run
                   for c in r.counts]
        return Point(run, r.per_run, min(per_run), max(per_run))
    # The blocks the busy machine disturbed are left out where enough remain, as the gate
    # leaves them out (opbench.core.disturbance).
    times = sorted(_disturbance.undisturbed(r)[0])
    # A saved run is past warning about: a run too short for an interval shows the range
    # from its fastest time to its median.
    ci = run_figure.interval(times, stats.DEFAULT_CONFIDENCE, ordered=True) or (
        times[0], times[len(times) // 2])
    value = run_figure.value(times)
    return Point(run, value, ci[0], ci[1], _disturbance.figure_slowdown(r, value) or 1.0,
                 _disturbance.full_speed_ns(r))


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
        if results or results.instructions or results.memory:
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
    """A commit as ``opbench._text.COMMIT_DIGITS`` hex digits (``-`` for none)."""
    return short_commit(commit) if commit else "-"


def tag(points: list[Point]) -> str | None:
    """The tag a commit's runs recorded (the first, sorted), None when untagged."""
    tags = points[0].run.git.get("tags") if points else None
    return tags[0] if isinstance(tags, list) and tags and isinstance(tags[0], str) else None


def label(points: list[Point]) -> str:
    """A commit as a report names it: its tag, else ten hex digits."""
    return tag(points) or short(points[0].run.commit if points else None)


def commit_range(series: Any, change: Any) -> str:
    """``a..b`` for a change: the commits at its first and last point (a step: the last
    before it and the first after), with their tags when they have some
    (``1a2b3c4d5e..9f8e7d6c5b (v1.2..v1.3)``)."""
    groups = series.by_commit()
    first, last = groups[change.start], groups[change.end]
    text = f"{short(first[0])}..{short(last[0])}"
    if tag(first[1]) or tag(last[1]):
        text += f" ({label(first[1])}..{label(last[1])})"
    return text


@dataclasses.dataclass(frozen=True)
class Standing:
    """Where a change stands at the latest commit: ``still`` is the latest level over the
    level before the change, minus 1 (+0.12: still 12% above it); ``undone_by`` the first
    later change beyond the noise after which the level was back nearer where it was
    than where the change took it (None: it holds)."""

    still: float
    undone_by: changepoints.Change | None

    @property
    def holds(self) -> bool:
        return self.undone_by is None


def standing(detection: changepoints.Detection, change: changepoints.Change) -> Standing:
    """Whether ``change`` (one of ``detection``'s) still holds at the latest commit, or a
    later change undid it (a regression fixed, or an improvement lost).

    Example:
        >>> d = changepoints.detect_runs([[1.0, 1.01]] * 3 + [[1.5, 1.51]] + [[1.0, 0.99]] * 3)
        >>> up = d.changes[0]
        >>> s = standing(d, up)
        >>> s.holds, s.undone_by.start == up.end
        (False, True)
    """
    still = detection.fit[-1] / change.before - 1 if detection.fit else 0.0
    if change.size == 0 or still / change.size > 0.5:
        return Standing(still, None)
    for later in detection.changes:
        if later.start < change.end or not later.exceeds_noise or later is change:
            continue
        if later.size * change.size < 0 and (later.after / change.before - 1) / change.size <= 0.5:
            return Standing(still, later)
    return Standing(still, None)


def evidence(change: Any) -> str:
    """``z=6.2``, and where paired rounds hold it, ``z=6.2 with 9 paired rounds``."""
    rounds = getattr(change, "rounds", 0)
    return f"z={change.z:.1f}" + (f" with {rounds} paired rounds" if rounds else "")


def describe_change(change: Any) -> str:
    """``step +15.0%`` / ``drift +14.2% over 14 commits (+1.0%/commit)``."""
    if change.kind == "step":
        return f"step {change.size:+.1%}"
    return (f"drift {change.size:+.1%} over {change.end - change.start} commits "
            f"({change.per_point:+.2%}/commit)")
