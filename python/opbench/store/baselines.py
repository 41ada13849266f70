"""Baselines: numbered runs kept per machine, so a gate compares with this machine's last run.

``--opbench-autosave`` (pytest) and ``python -m opbench timeit --autosave`` write
each run to ``.opbench/<machine id>/<NNNN>_<commit>_<UTC time>.json`` in the
project's root, the nearest folder upwards holding ``.opbench``, ``.git``,
``pyproject.toml``, ``pytest.ini``, ... (``$OPBENCH_BASELINE_DIR`` moves it), with
the commit, branch, dirty flag and time in its environment: the machine's history
(``opbench.store.history``). ``python -m
opbench compare --latest NEW`` and ``--opbench-compare`` without a path
compare with the latest run of this machine.

The machine id comes from the environment a results file records: operating
system, architecture, Python, and a short hash of the CPU model and count. It
leaves out the host name on purpose: CI runners get a new one every run, yet
their timings compare; a different CPU gets a different id, because its
timings do not.

Example:
    >>> import tempfile
    >>> from opbench import Measurement, TaskSpec
    >>> root = tempfile.mkdtemp()
    >>> first = autosave([Measurement(1, [1e-6], TaskSpec("f()", "pass"))], root=root)
    >>> latest(root=root) == first, first.name.startswith("0001_")
    (True, True)
"""
from __future__ import annotations

import datetime
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from opbench import environment as _environment
from opbench._files import atomic_write_numbered, numbers_taken
from opbench._text import short_commit
from opbench.environment import BASELINE_DIR_ENV as ENV_VAR
from opbench.environment import machine_id, project_root, root_dir
from opbench.store.results import dumps

__all__ = ["ENV_VAR", "autosave", "git_state", "latest", "machine_id", "project_root", "root_dir",
           "run_number", "runs"]

_RUN = re.compile(r"^(\d{4,})_.*\.json$")


def _git(*args: str, repo: str | os.PathLike[str] | None = None) -> str | None:
    where = ["-C", str(repo)] if repo is not None else []
    try:
        return subprocess.run(["git", *where, *args], capture_output=True, text=True,
                              timeout=10, check=True, stdin=subprocess.DEVNULL).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def git_state(rev: str | None = None,
              repo: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """Where the current directory's checkout stands, None outside git: ``commit``,
    ``branch`` (None when detached), ``dirty`` (uncommitted changes to tracked files),
    ``commit_time`` (the committer's, ISO 8601 UTC), ``position`` (commits reachable
    from it: orders a linear history when commit times tie), ``subject`` and ``tags``
    (those pointing at it, for reports to name the commit by).

    ``rev`` (in ``repo``): that commit as it is in git instead (no branch, not dirty):
    what ``opbench history run`` records for a run made in a worktree of it."""
    line = _git("log", "-1", "--format=%H%x00%ct%x00%s", *([rev] if rev else []), "--",
                repo=repo)
    if not line:
        return None
    commit, stamp, subject = line.split("\0", 2)
    branch = None if rev else _git("rev-parse", "--abbrev-ref", "HEAD", repo=repo)
    count = _git("rev-list", "--count", commit, repo=repo)
    dirty = None if rev else _git("status", "--porcelain", "--untracked-files=no", repo=repo)
    tags = _git("tag", "--points-at", commit, repo=repo)
    return {
        "commit": commit,
        "branch": None if branch in (None, "HEAD") else branch,
        "dirty": bool(dirty),
        "commit_time": _iso(datetime.datetime.fromtimestamp(int(stamp), datetime.timezone.utc)),
        "position": int(count) if count and count.isdigit() else None,
        "subject": subject,
        "tags": sorted(tags.split()) if tags else [],
    }


def _iso(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def runs(root: str | os.PathLike[str] | None = None, machine: str | None = None) -> list[Path]:
    """This machine's (or ``machine``'s) saved runs, oldest first."""
    folder = root_dir(root) / (machine or machine_id())
    if not folder.is_dir():
        return []
    return [p for _, p in sorted(_numbered(folder))]


def run_number(path: str | os.PathLike[str]) -> int | None:
    """The run number in a saved run's file name (``0012_...json`` -> 12), else None."""
    m = _RUN.match(Path(path).name)
    return int(m.group(1)) if m else None


def _numbered(folder: Path) -> list[tuple[int, Path]]:
    return [(n, p) for p in folder.iterdir() if (n := run_number(p)) is not None]


def latest(root: str | os.PathLike[str] | None = None,
           machine: str | None = None) -> Path | None:
    """The latest saved run of this machine, or None when there is none."""
    found = runs(root, machine)
    return found[-1] if found else None


def autosave(results: Any, root: str | os.PathLike[str] | None = None, *,
             git: dict[str, Any] | None = None,
             environment: dict[str, Any] | None = None) -> Path:
    """Saves ``results`` as this machine's next numbered run; returns its path.

    The environment recorded in the file gains ``machine_id``, ``saved_at`` (ISO 8601
    UTC) and, inside a git checkout, ``git`` (``git_state()``: commit, branch, dirty,
    commit time, subject, tags) and ``git_commit`` (the commit, ``+dirty`` when dirty).
    ``git`` and ``environment`` replace what this process would record: a run made
    elsewhere (``opbench history run``, in a worktree of a past commit) keeps its own.

    Any number of processes may autosave into one folder at once, on a local disk or
    NFS: each keeps its run under its own number (``_files.atomic_write_numbered``
    says how), and no run is written over.
    """
    env = dict(environment) if environment is not None else _environment.collect()
    git = git if git is not None else git_state()
    now = datetime.datetime.now(datetime.timezone.utc)
    env.update(machine_id=machine_id(env), saved_at=_iso(now))
    if git is not None:
        env.update(git=git, git_commit=git["commit"] + ("+dirty" if git["dirty"] else ""))
    folder = root_dir(root) / env["machine_id"]
    folder.mkdir(parents=True, exist_ok=True)
    text = dumps(results, environment=env)  # errors before anything is claimed
    first = max([0, *numbers_taken(folder), *(n for n, _ in _numbered(folder))]) + 1
    short = short_commit(git["commit"]) + ("_dirty" if git["dirty"] else "") if git else "nocommit"
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    _, path = atomic_write_numbered(folder, text, lambda n: f"{n:04d}_{short}_{stamp}.json",
                                    first)
    return path
