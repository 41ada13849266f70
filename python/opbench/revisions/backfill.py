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

Example::

    done = backfill(["v1.0..main"], ["python", "-m", "pytest", "benchmarks/"], runs=3)
    print(done.saved, done.failed)
"""
from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opbench._text import short_commit
from opbench.errors import ResultsFileError
from opbench.revisions import RevisionError
from opbench.revisions.bisection import BisectError, commits_between
from opbench.revisions.checkout import run_at
from opbench.revisions.git import git, resolve
from opbench.store import baselines, history
from opbench.store.results import load

__all__ = ["Backfill", "backfill", "commits"]


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
    saved; ``skipped`` runs the history already held; ``failed`` (commit, why) per run
    that failed; ``interrupted`` when Ctrl-C stopped it."""

    commits: list[str]
    saved: list[tuple[str, Path]] = dataclasses.field(default_factory=list)
    skipped: int = 0
    failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    interrupted: bool = False


def _held(root: str | Path | None) -> collections.Counter[str]:
    """Runs per commit the history holds already (clean checkouts only)."""
    loaded = history.load(root)
    return collections.Counter(run.commit for run in loaded.runs
                               if run.commit and not run.git.get("dirty"))


def backfill(revs: Sequence[str], command: Sequence[str], *, runs: int = 3,
             root: str | Path | None = None, repo: str | Path = ".",
             tags: str | None = None, only_tagged: bool = False,
             prepare: Sequence[str] | None = None, timeout: float | None = None,
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
    done = Backfill(todo)
    held = _held(root)
    facts = {c: baselines.git_state(c, repo) or {"commit": c} for c in todo}
    total = runs * len(todo)
    step = 0
    try:
        for k in range(1, runs + 1):
            for commit in todo:
                step += 1
                known = facts[commit]
                name = (f"{known['tags'][0]} ({short_commit(commit)})" if known.get("tags")
                        else short_commit(commit))
                where = f"[{step}/{total}] {name} run {k}/{runs}"
                if held[commit] >= k:
                    done.skipped += 1
                    say(f"{where}: in the history already")
                    continue
                started = time.monotonic()
                run = run_at(commit, command, repo=repo, timeout=timeout, prepare=prepare)
                problem = run.problem
                if not problem:
                    try:
                        results = load(run.results)  # type: ignore[arg-type]
                        path = baselines.autosave(results, root, git=known,
                                                  environment=results.environment)
                    except (OSError, ResultsFileError) as e:
                        problem = f"its results cannot be saved: {e}"
                if problem:
                    done.failed.append((commit, problem))
                    say(f"{where}: FAILED: {problem}")
                    continue
                held[commit] += 1
                done.saved.append((commit, path))
                say(f"{where}: saved {path.name} ({time.monotonic() - started:.1f} s)  "
                    f"{known.get('subject') or ''}")
    except KeyboardInterrupt:
        done.interrupted = True
        say(f"interrupted: {len(done.saved)} run(s) saved; run the same command again to "
            "resume")
    return done
