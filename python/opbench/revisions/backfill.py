"""Backfill: a machine's history for past commits, made by running the benchmark command at
each of them in temporary worktrees (``opbench history run REVS -- COMMAND``).

``backfill(revs, command)`` resolves ``revs`` to commits, oldest first (``A..B``
is A and the commits after it up to B on B's first-parent line, as ``opbench
find`` bisects them; a single revision is itself; ``tags=PATTERN`` adds the
commits of the tags ``git tag --list PATTERN`` names; ``only_tagged`` keeps the
tagged commits of all that), then runs ``command`` at each commit with
``opbench.revisions.checkout.run_at``: a temporary git worktree of the commit, its
code first on ``PYTHONPATH``, extension modules copied or built, removed
afterwards; the user's checkout is never touched. Each run's results are
autosaved into the history (``opbench.store.baselines.autosave``) with the
commit's own git facts (commit, time, position, subject, tags), so ``opbench
history`` and ``opbench report`` show them where they belong.

**Replicates and resuming.** ``runs`` runs per commit make a commit's level
(``opbench.stats.changepoints`` takes them as replicates). They go in passes:
every commit once, then every commit again, so the machine's slow minutes fall on
different commits in each pass instead of on all the runs of one. A commit
that already has ``k`` runs in the history (from an earlier backfill cut short,
or from CI) is not run again for passes ``1..k``: running the same backfill
again resumes it. A run that fails is reported and skipped (the next pass
tries the commit again); Ctrl-C stops the running command and keeps every run
saved so far.

**Make-up runs.** On a shared machine a run can share its core with another
tenant's work all along its fastest blocks: its figure is then 1.3 to 2x the
code's (``benchmarks/real_history.py``), and the history leaves it out of its
commit's level (``opbench.store.history``: the speed probe says so), so the commit
is left with fewer replicates than asked for, or none. After the passes, each
commit where a benchmark has fewer than ``runs`` runs at full speed gets a
make-up run of just those benchmarks (``$OPBENCH_SELECT``, which opbench's pytest
plugin reads; another command runs whole), up to ``2 * runs`` rounds; each waits
up to 3 s for this core to run the speed probe at the history's full speed
(``opbench.core.recovery.wait_for_speed``: the other tenant's work comes and goes
over seconds). A make-up run is saved with the benchmarks it ran (``MAKEUP_KEY`` in
its environment) and is not counted as one of a commit's passes when a backfill
resumes.

**Paired rounds at a step in doubt.** Then each step in doubt
(``opbench.stats.changepoints.doubts``: neighbouring commits whose levels differ by
2.5 or more standard errors of the run-to-run noise, with no change beyond the
noise between them, and each change beyond the noise by less than 8: one commit's
runs can share an offset) gets ``3 * runs`` paired rounds of the benchmarks in doubt there:
the commit before it and the commit after it, back to back, in a checkout of each
kept for the rounds, in turn first (ABBA), each round after a wait for full speed as
a make-up run's. The rounds of every step go in turns, so each step's rounds fall in
different minutes of the machine. A round counts where both runs ran at full speed;
rounds are tried until each step has its count, at most twice that. A run of a round
whose core was slowed for some of its benchmarks is made again at once for those, after
a wait for full speed, up to ``_AGAIN`` times, before the round's other run: with each
run at full speed one time in three or so beside two spinning processes, a round with
both at full speed was one in nine, and a step's 18 tries gave it 2 to 6 rounds, too
few for a -10% step (``benchmarks/real_history.py``, the changelog). Whether a run is
made again depends on the speed probe alone, never on what it read. The history
tests the step on its levels and its rounds together (``opbench.store.history``).
The number of rounds is fixed before they start and does not depend on what they
read, so their test keeps its error rate: stopping a step's rounds once its test
passed would give chance many tries. A round's run is saved with ``SETTLE_KEY``
(``opbench.store.history``) in its environment and is no level of its commit:
runs added at one commit in one stretch of time share that stretch's offset, and
five false changes in nine histories came of counting them as levels
(``benchmarks/real_history.py``, the changelog). ``settle=False`` (``--no-settle``)
skips the rounds.

**One placement per run.** Every run, of a pass, a make-up or a round, gets an
environment of its own random size (``opbench.revisions.layout``, through the
checkout): with one size for the whole backfill, every run and round of it would agree
on the bias of one memory placement (+13% for one benchmark of
``benchmarks/real_history.py``). It did not lower that benchmark's false changes (3 in
10 histories with it and without: the changelog).

Example::

    done = backfill(["v1.0..main"], ["python", "-m", "pytest", "benchmarks/"], runs=3)
    print(done.saved, done.failed)
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opbench._text import short_commit
from opbench.core import recovery
from opbench.errors import ResultsFileError
from opbench.revisions import RevisionError
from opbench.revisions.bisection import SELECT_ENV, BisectError, commits_between
from opbench.revisions.checkout import Checkout, checkout, run_at
from opbench.revisions.git import git, resolve
from opbench.store import baselines, history
from opbench.store.results import load

__all__ = ["MAKEUP_KEY", "Backfill", "backfill", "commits"]

#: Where a make-up run's environment lists the benchmarks it ran (the others did not).
MAKEUP_KEY = "makeup"
# Make-up rounds, per run asked for: beside two spinning processes on two CPUs, 40% to 60%
# of the runs of the longer benchmarks shared their core (benchmarks/real_history.py), and
# with one round per run asked for, a commit in ten was left with a single run at full
# speed, which is no level.
_MAKEUP_ROUNDS = 2
# How long a make-up run or a round waits for this core to run at the history's full speed.
_MAKEUP_WAIT_S = 3.0
# Paired rounds at a step in doubt, per run asked for: a 10% step against 3% run-to-run
# noise is then z = 7 or so (rounds and levels together). Simulated (400 histories of 13
# commits, 3 runs each), 3 such steps in 100 that were in doubt stayed within the noise
# with 9 rounds, 6 with 6 rounds.
_SETTLE_ROUNDS = 3
# How many times a run of a round whose core was slowed is made again (module doc): with a
# run at full speed one time in three, two more tries make it so three times in five.
_AGAIN = 2


def commits(revs: Sequence[str], repo: str | Path = ".", *, tags: str | None = None,
            only_tagged: bool = False) -> list[str]:
    """The commits ``revs`` (and ``tags``) name, each once, oldest first (by ancestry:
    how many commits each one has behind it, then commit time).

    Raises:
        RevisionError: a revision that names no commit, a range whose start is not an
            ancestor of its end, or nothing at all to run.
    """
    found: list[str] = []
    for rev in revs:
        if ".." in rev:
            start, _, end = rev.partition("..")
            try:
                found += commits_between(start or "HEAD", end or "HEAD", repo)
            except BisectError as e:
                raise RevisionError(f"{rev}: {e}") from None
        else:
            found.append(resolve(rev, repo))
    if tags is not None:
        names = git(repo, "tag", "--list", tags).split()
        if not names:
            raise RevisionError(f"no tag matches {tags!r}")
        found += [resolve(f"refs/tags/{name}", repo) for name in names]
    unique = list(dict.fromkeys(found))
    if only_tagged:
        unique = [c for c in unique if git(repo, "tag", "--points-at", c).strip()]
    if not unique:
        raise RevisionError("no commit to run: give revisions (A..B, a commit, a tag) "
                                     "or --tags PATTERN" + (" that are tagged" if only_tagged
                                                            else ""))

    def order(commit: str) -> tuple[int, int]:
        behind = git(repo, "rev-list", "--count", commit).strip()
        stamp = git(repo, "log", "-1", "--format=%ct", commit).strip()
        return int(behind), int(stamp)

    return sorted(unique, key=order)


@dataclasses.dataclass
class Backfill:
    """What a backfill did: the commits, in order; ``saved`` (commit, path) per run
    saved (make-up runs and rounds included); ``skipped`` runs the history already held;
    ``makeup`` make-up runs tried; ``rounds`` paired rounds tried; ``again`` runs of a
    round made again because their core was slowed; ``failed`` (commit, why) per run that
    failed; ``interrupted`` when Ctrl-C stopped it."""

    commits: list[str]
    saved: list[tuple[str, Path]] = dataclasses.field(default_factory=list)
    skipped: int = 0
    makeup: int = 0
    rounds: int = 0
    again: int = 0
    failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    interrupted: bool = False


def _held(root: str | Path | None) -> collections.Counter[str]:
    """Runs per commit the history holds already (clean checkouts only; make-up runs, of a
    few benchmarks, do not count)."""
    loaded = history.load(root)
    return collections.Counter(run.commit for run in loaded.runs
                               if run.commit and not run.git.get("dirty")
                               and MAKEUP_KEY not in run.environment and run.settles is None)


def _short(root: str | Path | None, commits: Sequence[str],
           runs: int) -> tuple[dict[str, list[str]], float | None]:
    """(commit -> the timed benchmarks with fewer than ``runs`` runs at full speed there,
    the history's full speed): a run whose fastest blocks shared their core with another
    tenant's work is left out of the commit's level (``opbench.store.history``)."""
    loaded = history.load(root)
    wanted, short = set(commits), dict[str, list[str]]()
    for key, kind in loaded.benchmarks():
        if kind != history.TIME:
            continue
        for commit, points in loaded.series(key).by_commit():
            if commit in wanted and sum(not p.slow_core for p in points) < runs:
                short.setdefault(commit, []).append(key)
    return short, loaded.full_speed_ns


def _in_doubt(root: str | Path | None, commits: Sequence[str],
              rounds: int) -> tuple[dict[tuple[str, str], list[str]], float | None]:
    """((commit before, commit after) -> the timed benchmarks whose step there is in doubt
    by their levels and has fewer than ``rounds`` rounds at full speed, the history's
    full speed)."""
    loaded = history.load(root)
    wanted, found = set(commits), dict[tuple[str, str], list[str]]()
    for key, kind in loaded.benchmarks():
        if kind != history.TIME:
            continue
        series = loaded.series(key)
        groups, paired = series.by_commit(), series.paired()
        # In doubt by the levels alone: what the rounds read must not decide how many
        # there are (module doc).
        for i in series.doubts(series.detect(rounds={})):
            before, after = groups[i][0], groups[i + 1][0]
            if (before is not None and after is not None and before in wanted
                    and after in wanted and len(paired.get(i, ())) < rounds):
                found.setdefault((before, after), []).append(key)
    return found, loaded.full_speed_ns


def backfill(revs: Sequence[str], command: Sequence[str], *, runs: int = 3,
             root: str | Path | None = None, repo: str | Path = ".",
             tags: str | None = None, only_tagged: bool = False,
             prepare: Sequence[str] | None = None, timeout: float | None = None,
             makeup: bool = True, settle: bool = True,
             progress: Callable[[str], Any] | None = None) -> Backfill:
    """Runs ``command`` ``runs`` times at each commit ``revs`` name and autosaves every
    run's results into the history under ``root`` (module doc).

    Args:
        revs: ``A..B`` ranges, commits, branches, tags.
        command: what measures and saves a results file (a pytest command with opbench's
            plugin, or a script saving to ``$OPBENCH_RESULTS_FILE``).
        runs: runs per commit, in passes over all commits; commits that have them
            already are skipped.
        root: the history's folder (default: ``opbench.store.baselines.root_dir()``).
        repo: a folder in the repository.
        tags, only_tagged: add the tags ``git tag --list tags`` names; keep only
            tagged commits.
        prepare: a command run in each worktree before ``command`` (an install).
        timeout: seconds one run may take.
        makeup: after the passes, up to ``2 * runs`` make-up runs per commit of the
            benchmarks that have fewer than ``runs`` runs at full speed there (module doc).
        settle: then ``3 * runs`` paired rounds at each step in doubt (module doc).
        progress: gets a line per run (default: none).

    Raises:
        RevisionError: bad revisions, a checkout or build that fails.
        ValueError: ``runs`` below 1, or an empty command.
    """
    if not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive integer, got {runs!r}")
    command = [str(c) for c in command]
    if not command:
        raise ValueError("no command: give the benchmark command after `--`")
    say = progress or (lambda line: None)
    todo = commits(revs, repo, tags=tags, only_tagged=only_tagged)
    runner = _Runner(Backfill(todo), command, root, repo, prepare, timeout, say)
    held = _held(root)
    total = runs * len(todo)
    step = 0
    try:
        for k in range(1, runs + 1):
            for commit in todo:
                step += 1
                where = f"[{step}/{total}] {runner.name(commit)} run {k}/{runs}"
                if held[commit] >= k:
                    runner.done.skipped += 1
                    say(f"{where}: in the history already")
                    continue
                held[commit] += runner.run(commit, where) is not None
        rounds = _MAKEUP_ROUNDS * runs if makeup else 0
        for k in range(1, rounds + 1):
            short, full_speed = _short(root, todo, runs)
            if not short:
                break
            for commit in (c for c in todo if c in short):
                runner.done.makeup += 1
                if full_speed:  # not into a slowed spell: most make-ups would be wasted
                    recovery.wait_for_speed(full_speed, history.FULL_SPEED, _MAKEUP_WAIT_S)
                runner.run(commit, f"[make-up {k}/{rounds}] {runner.name(commit)}: "
                                   f"{len(short[commit])} benchmark(s) with fewer than {runs} "
                                   "runs at full speed", short[commit],
                           mark={MAKEUP_KEY: short[commit]})
        if settle:
            _settle(runner, todo, _SETTLE_ROUNDS * runs)
    except KeyboardInterrupt:
        runner.done.interrupted = True
        say(f"interrupted: {len(runner.done.saved)} run(s) saved; run the same command again "
            "to resume")
    return runner.done


def _settle(runner: _Runner, todo: Sequence[str], wanted: int) -> None:
    """``wanted`` paired rounds at full speed at each step in doubt, the steps' rounds in
    turns, up to twice that many tried (module doc)."""
    steps, full_speed = _in_doubt(runner.root, todo, wanted)
    with contextlib.ExitStack() as stack:
        kept: dict[str, Checkout] = {}
        for k in range(1, 2 * wanted + 1):
            if k > 1:
                steps, full_speed = _in_doubt(runner.root, todo, wanted)
            if not steps:
                return
            for (before, after), keys in steps.items():
                for commit in (before, after):
                    if commit not in kept:
                        kept[commit] = stack.enter_context(checkout(
                            commit, runner.repo, prepare=runner.prepare, timeout=runner.timeout))
                runner.done.rounds += 1
                if full_speed:
                    recovery.wait_for_speed(full_speed, history.FULL_SPEED, _MAKEUP_WAIT_S)
                where = (f"[round {k}/{2 * wanted}] {runner.name(before)}..{runner.name(after)}: "
                         f"{len(keys)} benchmark(s) with a step in doubt")
                # A number no earlier round of this step has: resuming adds rounds.
                mark = {history.SETTLE_KEY: {"step": [before, after], "round": time.time_ns()}}
                for commit in ((before, after) if k % 2 else (after, before)):
                    _round_run(runner, commit, where, keys, kept[commit], mark, full_speed)


def _round_run(runner: _Runner, commit: str, where: str, keys: list[str], at: Checkout,
               mark: dict[str, Any], full_speed: float | None) -> None:
    """One run of a round at ``commit``; the benchmarks of it that ran on a slowed core,
    by the speed probe against the history's ``full_speed``, made again up to ``_AGAIN``
    times, each after a wait for full speed (module doc). A run made again carries the
    round's ``mark``: the history pairs its later run with the round's other."""
    run = runner.run(commit, where, keys, at=at, mark=mark)
    for k in range(1, _AGAIN + 1):
        slowed = history.slowed(run, keys, full_speed) if run is not None else []
        if not slowed:
            return
        runner.done.again += 1
        if full_speed:
            recovery.wait_for_speed(full_speed, history.FULL_SPEED, _MAKEUP_WAIT_S)
        run = runner.run(commit, f"{where}: again {k}/{_AGAIN} at {runner.name(commit)}, "
                                 f"{len(slowed)} on a slowed core", slowed, at=at, mark=mark)


class _Runner:
    """Runs the command at one commit at a time and saves what it measured into ``done``."""

    def __init__(self, done: Backfill, command: list[str], root: str | Path | None,
                 repo: str | Path, prepare: Sequence[str] | None, timeout: float | None,
                 say: Callable[[str], Any]) -> None:
        self.done, self.command, self.root, self.repo = done, command, root, repo
        self.prepare, self.timeout, self.say = prepare, timeout, say
        self.facts = {c: baselines.git_state(c, repo) or {"commit": c} for c in done.commits}

    def name(self, commit: str) -> str:
        known = self.facts[commit]
        return (f"{known['tags'][0]} ({short_commit(commit)})" if known.get("tags")
                else short_commit(commit))

    def run(self, commit: str, where: str, only: list[str] | None = None, *,
            at: Checkout | None = None, mark: dict[str, Any] | None = None) -> history.Run | None:
        """One run at ``commit`` (in the checkout ``at``, else a fresh one), saved with
        ``mark`` added to its environment; of the benchmarks ``only``, when given; the run
        saved (None: it failed)."""
        started = time.monotonic()
        env = None if only is None else {SELECT_ENV: json.dumps(only)}
        run = (at.run(self.command, env=env, timeout=self.timeout) if at is not None else
               run_at(commit, self.command, repo=self.repo, timeout=self.timeout,
                      prepare=self.prepare, env=env))
        problem = run.problem
        if not problem:
            try:
                results = load(run.results)  # type: ignore[arg-type]
                environment = {**results.environment, **(mark or {})}
                path = baselines.autosave(results, self.root, git=self.facts[commit],
                                          environment=environment)
            except (OSError, ResultsFileError) as e:
                problem = f"its results cannot be saved: {e}"
        if problem:
            self.done.failed.append((commit, problem))
            self.say(f"{where}: FAILED: {problem}")
            return None
        self.done.saved.append((commit, path))
        self.say(f"{where}: saved {path.name} ({time.monotonic() - started:.1f} s)  "
                 f"{self.facts[commit].get('subject') or ''}")
        return history.Run(baselines.run_number(path) or 0, path, results)
