"""Bisect: the first commit of a step, found by running a benchmark command at commits.

``find(benchmark, good, bad, command)`` runs ``command`` (which saves a results
file, as for ``opbench ab``: ``opbench.revisions.checkout``) at GOOD and BAD to learn the
two levels, then binary-searches the commits between them (``git rev-list
--ancestry-path --first-parent GOOD..BAD``, oldest first): each commit measured is
classed as at GOOD's level or BAD's by the nearer one on a log scale, and the
search halves the range, so N commits take about log2(N) steps.

Enough runs to decide against the noise: GOOD and BAD get three runs at least,
every other commit ``runs`` at first (a run counts by its figure, the 10th
percentile of its per-run times, as history and the gate count it: the code's
own cost, which load on the machine moves least; a commit's value is its runs'
median). The
noise is the spread between runs of one commit (pooled over GOOD and BAD), at
least the runs' own standard errors; differences are judged against it with
Student's t (the noise of a few runs is itself uncertain) at the level of ``z``
normal standard errors. GOOD and BAD not differing beyond it get more runs
(doubling, up to ``max_runs``); still not, the bisect is refused
(``BisectError``): there is nothing to find. A commit whose value is within the
noise of the midpoint between the two levels is run again the same way; one still
ambiguous at ``max_runs`` is classed by the nearer level and flagged
``uncertain``.

**Only what changed runs.** The first run at GOOD and at BAD is the whole
command, and every benchmark that differs between the two beyond its within-run
noise is listed (``Bisection.also_changed``); every later run asks a pytest
command to run only the test that holds the benchmark (``$OPBENCH_SELECT``, which
opbench's plugin reads; a revision whose plugin predates it runs everything, and
the answer is the same).

Example::

    found = find("sort", "v1.0", "main", ["python", "bench.py"])
    print(found.first_bad, found.size)   # the commit, +0.15 for 15% slower
"""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opbench._text import short_commit
from opbench.core import disturbance, identity
from opbench.core.formatting import format_value
from opbench.errors import Error, ResultsFileError
from opbench.gate.pooling import pool
from opbench.revisions import RevisionError
from opbench.revisions.checkout import checkout
from opbench.revisions.command import Run
from opbench.revisions.git import resolve, subject
from opbench.stats import decide, run_figure
from opbench.store.history import INSTRUCTIONS, TIME
from opbench.store.results import Results, load

__all__ = ["SELECT_ENV", "BisectError", "Bisection", "Probe", "find", "t_critical"]

#: The benchmark keys (a JSON list) a run made by ``find`` needs: opbench's pytest
#: plugin deselects every test that holds none of them.
SELECT_ENV = "OPBENCH_SELECT"

_ENDPOINT_RUNS = 3


class BisectError(Error, RuntimeError):
    """A bisect that cannot run or has nothing to find (named, with the reason)."""


@dataclasses.dataclass
class Probe:
    """One commit measured: its run values (the benchmark's figure per run), its value
    (their median) and the verdict (``"good"``, ``"bad"``; ``uncertain`` when the runs
    allowed did not settle it)."""

    commit: str
    subject: str
    values: list[float]
    verdict: str = ""
    uncertain: bool = False

    @property
    def value(self) -> float:
        ordered = sorted(self.values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else math.sqrt(ordered[mid - 1] * ordered[mid])


@dataclasses.dataclass
class Bisection:
    """The result: ``first_bad`` (the first commit at BAD's level), ``last_good`` (its
    parent in the range), ``size`` (relative: BAD / GOOD - 1, of the runs' figures),
    every probe in the order run (GOOD and BAD first), ``steps``, the commits measured
    between GOOD and BAD, and ``also_changed``: (key, size) of the other benchmarks
    whose first runs at GOOD and BAD differ beyond their noise."""

    benchmark: str
    first_bad: Probe
    last_good: Probe
    size: float
    noise: float
    probes: list[Probe]
    also_changed: list[tuple[str, float]] = dataclasses.field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.probes) - 2


def t_critical(z: float, dof: int) -> float:
    """Student's t with ``dof`` degrees of freedom at the two-sided level of a normal's
    ``z`` (Cornish-Fisher expansion, Abramowitz & Stegun 26.7.5; within 3% for dof >= 4):
    a noise estimated from a few runs is itself uncertain.

    >>> round(t_critical(1.96, 10), 2), round(t_critical(3.0, 1000), 2)
    (2.23, 3.01)
    """
    if dof < 1:
        return math.inf
    n = float(dof)
    return (z + (z ** 3 + z) / (4 * n) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * n ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * n ** 3))


def commits_between(good: str, bad: str, repo: str | Path = ".") -> list[str]:
    """GOOD, the commits after it up to BAD on BAD's first-parent line, and BAD, oldest
    first.

    Raises:
        BisectError: GOOD is not an ancestor of BAD, or either does not resolve.
    """
    try:
        g, b = resolve(good, repo), resolve(bad, repo)
    except RevisionError as e:
        raise BisectError(str(e)) from None
    if g == b:
        raise BisectError(f"GOOD and BAD are the same commit ({short_commit(g)}): nothing to "
                          "bisect")
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", g, b],
                      capture_output=True).returncode != 0:
        raise BisectError(f"GOOD {good} ({short_commit(g)}) is not an ancestor of BAD {bad} "
                          f"({short_commit(b)}): give the older commit first")
    out = subprocess.run(["git", "-C", str(repo), "rev-list", "--reverse", "--ancestry-path",
                          "--first-parent", f"{g}..{b}"], capture_output=True, text=True,
                         check=True).stdout.split()
    return [g, *out]


def _results(run: Run) -> Results:
    if not run.ok:
        raise BisectError(f"the command failed at {short_commit(run.commit)}: {run.problem}")
    try:
        return load(run.results)  # type: ignore[arg-type]
    except (OSError, ResultsFileError) as e:
        raise BisectError(f"the results of the run at {short_commit(run.commit)} cannot be "
                          f"read: {e}") from None


def _run_value(results: Results, benchmark: str, commit: str) -> tuple[float, float, str]:
    """The benchmark's figure in a run (its 10th percentile of per-run times, the blocks
    the busy machine disturbed left out; or instructions per run), its standard error,
    relative, and its kind (``"time"`` or ``"instructions"``)."""
    found = [r for r in results.all() if identity.key(r) == benchmark]
    if not found:
        keys = sorted({identity.key(r) for r in results.all()})
        raise BisectError(f"no benchmark {benchmark!r} in the results at {short_commit(commit)}; "
                          f"they hold: {', '.join(keys) or '(nothing)'}")
    r = found[0]
    if hasattr(r, "times"):
        from opbench import stats

        times = sorted(disturbance.undisturbed(r)[0])
        value = run_figure.value(times)
        ci = run_figure.interval(times, stats.DEFAULT_CONFIDENCE, ordered=True)
        half = (ci[1] - ci[0]) / 2 / value if ci else 0.0
        return value, half / 1.96, TIME  # the CI's half-width as a standard error
    return r.median, 0.0, INSTRUCTIONS


def _changed(good: Results, bad: Results, skip: str) -> list[tuple[str, float]]:
    """The benchmarks other than ``skip`` that differ between one run at GOOD and one at
    BAD beyond their within-run noise (``decide.figures`` at 5%), with their sizes."""
    old = pool(good.all())
    new = pool(bad.all())
    found = []
    for key, (kind, y) in new.items():
        if key == skip or key not in old or old[key][0] != kind:
            continue
        x = old[key][1]
        d = decide.counts(x, y, 0.05) if kind == "instructions" else decide.figures(x, y, 0.05)
        if d.verdict in ("slower", "faster"):
            found.append((key, d.ratio - 1))
    return sorted(found, key=lambda kv: -abs(kv[1]))


def _others(good: Results, bad: Results, benchmark: str,
            say: Callable[[str], Any]) -> list[tuple[str, float]]:
    """The other benchmarks that changed from GOOD to BAD (``_changed``), each said, and
    that the commits between run ``benchmark`` alone."""
    also = _changed(good, bad, benchmark)
    for key, size in also:
        say(f"also changed from GOOD to BAD: {key} ({size:+.1%}); bisect it on its own")
    if len(good.all()) > 1:
        say(f"the commits between run {benchmark!r} alone (a pytest command's other tests "
            "are deselected)")
    return also


def find(benchmark: str, good: str, bad: str, command: Sequence[str], *,
         repo: str | Path = ".", runs: int = 1, max_runs: int = 8, z: float = 3.0,
         timeout: float | None = None, prepare: Sequence[str] | None = None,
         progress: Callable[[str], Any] | None = None) -> Bisection:
    """Bisects GOOD..BAD for the first commit at BAD's level of ``benchmark`` (a key in
    the results ``command`` saves). ``progress`` gets a line per commit measured.

    Raises:
        BisectError: bad revisions, a command that fails or saves no such benchmark,
            or no step between GOOD and BAD beyond the noise.
        RevisionError: a commit that cannot be checked out or built.
    """
    if runs < 1 or max_runs < max(runs, 2):
        raise ValueError(f"need 1 <= runs <= max_runs and max_runs >= 2 (the noise is the "
                         f"spread between runs), got runs={runs}, max_runs={max_runs}")
    commits = commits_between(good, bad, repo)
    say = progress or (lambda line: None)
    errors: dict[str, list[float]] = {}
    kinds: set[str] = set()

    first: dict[str, Results] = {}  # the whole command's results at GOOD and at BAD
    only = {SELECT_ENV: json.dumps([benchmark])}

    def measure(probe: Probe, n: int) -> None:
        with checkout(probe.commit, repo, prepare=prepare, timeout=timeout) as c:
            for _ in range(n):
                whole = probe.commit in (commits[0], commits[-1]) and probe.commit not in first
                results = _results(c.run(command, timeout=timeout,
                                         env=None if whole else only))
                if whole:
                    first[probe.commit] = results
                value, error, kind = _run_value(results, benchmark, probe.commit)
                kinds.add(kind)
                probe.values.append(value)
                errors.setdefault(probe.commit, []).append(error)

    def probe_of(commit: str, n: int = runs) -> Probe:
        p = Probe(commit, subject(commit, repo), [])
        measure(p, n)
        return p

    def show(value: float) -> str:
        return format_value(value, min(kinds))

    # Three runs at least at GOOD and BAD: the spread between runs is the noise.
    endpoint_runs = max(runs, min(_ENDPOINT_RUNS, max_runs))
    lo, hi = probe_of(commits[0], endpoint_runs), probe_of(commits[-1], endpoint_runs)
    lo.verdict, hi.verdict = "good", "bad"
    probes = [lo, hi]

    def noise() -> tuple[float, int]:
        """Relative sigma of one run (the spread between runs at GOOD and BAD, at least
        the runs' own standard errors) and its degrees of freedom."""
        spread = [math.log(v / p.value) for p in (lo, hi) for v in p.values]
        dof = sum(len(p.values) - 1 for p in (lo, hi))
        between = math.sqrt(sum(d * d for d in spread) / dof)
        within = max((e for es in errors.values() for e in es), default=0.0)
        return max(between, within, 1e-6), dof

    def beyond(distance: float, weight: float) -> bool:
        """Whether ``distance`` (log) exceeds the noise of a mean with variance weight
        ``weight`` (sum of 1/runs)."""
        sigma, dof = noise()
        return abs(distance) >= t_critical(z, dof) * sigma * math.sqrt(weight)

    gap = math.log(hi.value / lo.value)
    while not beyond(gap, 1 / len(lo.values) + 1 / len(hi.values)) and len(lo.values) < max_runs:
        for p in (lo, hi):  # a small step needs more runs to show
            measure(p, min(len(p.values), max_runs - len(p.values)))
        gap = math.log(hi.value / lo.value)
    sigma = noise()[0]
    if not beyond(gap, 1 / len(lo.values) + 1 / len(hi.values)):
        raise BisectError(
            f"no step in {benchmark!r} between {good} and {bad} beyond the noise: "
            f"{show(lo.value)} vs {show(hi.value)} ({math.expm1(gap):+.1%}), run-to-run noise "
            f"{sigma:.1%} over {len(lo.values)} run(s) each")
    say(f"GOOD {short_commit(lo.commit)}: {show(lo.value)}   BAD {short_commit(hi.commit)}: "
        f"{show(hi.value)} ({math.expm1(gap):+.1%}); {len(commits) - 2} commit(s) between")
    also = _others(first[commits[0]], first[commits[-1]], benchmark, say)
    left, right = 0, len(commits) - 1  # commits[left] is good, commits[right] is bad
    by_index = {0: lo, len(commits) - 1: hi}
    while right - left > 1:
        mid = (left + right) // 2
        p = probe_of(commits[mid])
        centre = (math.log(lo.value) + math.log(hi.value)) / 2
        while not beyond(math.log(p.value) - centre, 1 / len(p.values)) and len(p.values) < max_runs:
            measure(p, min(len(p.values), max_runs - len(p.values)))
        p.uncertain = not beyond(math.log(p.value) - centre, 1 / len(p.values))
        at_bad = abs(math.log(p.value / hi.value)) < abs(math.log(p.value / lo.value))
        p.verdict = "bad" if at_bad else "good"
        probes.append(p)
        by_index[mid] = p
        say(f"step {len(probes) - 2}: {short_commit(p.commit)} {show(p.value)} over "
            f"{len(p.values)} run(s): {p.verdict}{' (uncertain)' if p.uncertain else ''}  "
            f"{p.subject}")
        left, right = (left, mid) if at_bad else (mid, right)
    return Bisection(benchmark, by_index[right], by_index[left], math.expm1(gap), sigma, probes,
                     also)
