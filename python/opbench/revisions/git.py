"""Git, as the revisions package asks it: a command in a repository, the repository's
top folder, a revision resolved to its commit, a commit's subject line.

Example (a throwaway repository with one commit)::

    >>> import tempfile
    >>> repo = tempfile.mkdtemp()
    >>> _ = git(repo, "init", "-q"); _ = open(f"{repo}/m.py", "w").write("X = 1\\n")
    >>> _ = git(repo, "add", ".")
    >>> _ = git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "one")
    >>> len(resolve("HEAD", repo)), subject("HEAD", repo)
    (40, 'one')
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from opbench.revisions import RevisionError

__all__ = ["git", "resolve", "subject", "toplevel"]


def git(repo: str | os.PathLike[str], *args: str, check: bool = True) -> str:
    """``git -C repo ARGS``'s output, stripped.

    Raises:
        RevisionError: git failed (with ``check``), its message quoted.
    """
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise RevisionError(f"git {' '.join(args)} (in {repo}) failed: "
                            f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def toplevel(repo: str | os.PathLike[str]) -> Path:
    """The top folder of the git repository ``repo`` is in.

    Raises:
        RevisionError: ``repo`` is no folder, or not in a git repository.
    """
    if not Path(repo).is_dir():
        raise RevisionError(f"{repo}: no such folder (pass the project's git repository)")
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RevisionError(f"{repo} is not inside a git repository: run from the project's "
                            "checkout (or pass repo=)")
    return Path(proc.stdout.strip())


def resolve(rev: str, repo: str | os.PathLike[str] = ".") -> str:
    """The full commit id ``rev`` names in ``repo`` (a branch, tag, ``HEAD~2``, a short id).

    Raises:
        RevisionError: not a git repository, or ``rev`` names no commit.
    """
    top = toplevel(repo)
    proc = subprocess.run(["git", "-C", str(top), "rev-parse", "--verify", "--quiet",
                           f"{rev}^{{commit}}"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RevisionError(f"{rev!r} names no commit in {top} (check the spelling, or "
                            "`git fetch` the branch)")
    return proc.stdout.strip()


def subject(commit: str, repo: str | os.PathLike[str] = ".") -> str:
    """The first line of ``commit``'s message ("" when git cannot tell)."""
    return git(repo, "log", "-1", "--format=%s", commit, check=False)
