"""Checkouts: a project's code as it was at a git revision, made runnable, a command run
in it, and the results file that run saved.

``opbench ab`` (base against the working tree), ``opbench find`` (bisect) and
``opbench history run`` (backfill) all need the same thing, and this module does that
and nothing else:

1. **A checkout.** ``checkout(REV)`` makes a ``git worktree`` of the commit
   REV resolves to in a temporary folder (detached, so no branch is touched),
   and removes it again on ``close()`` (a ``with`` block closes it, also on
   Ctrl-C; the record of a worktree left by a killed process is removed by the
   next one, by its path: the user's own worktrees are never pruned).
   ``working_tree()`` is the other side of an A/B: the repository as it is now,
   uncommitted edits included, with no copy.
2. **Importable.** The command runs with the checkout's source roots first on
   ``PYTHONPATH``, its compiled extension modules copied or built
   (``opbench.revisions.build``). A project that needs more (an install into a
   virtual environment, generated files) passes ``prepare=[...]``: a command run
   once in the checkout before anything else.
3. **Runs.** ``Checkout.run`` runs the command in the checkout (in the same
   sub-folder the caller is in), its own process group, output captured, with a
   fresh results-file path in ``$OPBENCH_RESULTS_FILE``, and returns a ``Run``:
   exit status, the results file if one was written, the output's tail, seconds
   taken (``opbench.revisions.command``). A run that fails is a ``Run`` with
   ``ok == False``, never an exception; Ctrl-C stops the command's process group
   and re-raises ``KeyboardInterrupt``; the Runs returned before it keep their files.
   Each run's environment has a random size (``opbench.revisions.layout``), so where
   its memory lies is drawn per run: a bias of one placement is noise across runs,
   not an offset that every run of a session shares.

Example (a throwaway repository with one commit)::

    >>> import subprocess, sys, tempfile
    >>> from opbench.revisions.git import resolve
    >>> repo = tempfile.mkdtemp()
    >>> git = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True, capture_output=True)
    >>> _ = git("init", "-q"); _ = open(f"{repo}/m.py", "w").write("X = 1\\n")
    >>> _ = git("add", "."); _ = git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "one")
    >>> with checkout("HEAD", repo) as c:
    ...     run = c.run([sys.executable, "-c", "import m; print(m.X)"])
    >>> run.returncode, run.output.strip(), run.commit == resolve("HEAD", repo)
    (0, '1', True)
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from opbench._text import short_commit
from opbench.revisions import RevisionError
from opbench.revisions.build import add_compiled_modules, source_roots
from opbench.revisions.command import RESULTS_ENV, Run, is_pytest, run_group
from opbench.revisions.git import git, resolve, toplevel
from opbench.revisions.layout import LAYOUT_ENV, pad

__all__ = ["Checkout", "RevisionError", "checkout", "run_at", "working_tree"]

_WORKTREE_PREFIX = "opbench-rev-"


class Checkout:
    """A revision made runnable: its files in ``path``, the environment that imports them.

    Made by ``checkout()`` (a temporary git worktree) or ``working_tree()`` (the
    repository itself). Use as a context manager, or call ``close()``.

    Attributes:
        revision: as given.
        commit: the full commit id (``working_tree()``: HEAD's, ``+dirty`` if edited).
        path: the folder holding the revision's files.
        subdir: where in it commands run (the caller's folder, relative to the repository).
    """

    def __init__(self, revision: str, commit: str, path: Path, subdir: Path,
                 owned: bool, repo: Path) -> None:
        self.revision = revision
        self.commit = commit
        self.path = path
        self.subdir = subdir
        self._owned = owned
        self._repo = repo
        self.roots = source_roots(path)

    def __repr__(self) -> str:
        return f"Checkout({self.revision!r}, commit={short_commit(self.commit)!r}, path={str(self.path)!r})"

    def __enter__(self) -> Checkout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def environment(self, results_file: str | os.PathLike[str] | None = None,
                    extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """``os.environ`` with the checkout's source roots first on PYTHONPATH, ``extra``,
        ``$OPBENCH_RESULTS_FILE`` set to ``results_file`` (when given), and a fresh
        ``$OPBENCH_LAYOUT`` pad unless the user set one (``opbench.revisions.layout``)."""
        env = dict(os.environ)
        env.setdefault(LAYOUT_ENV, pad())
        path = [str(r) for r in self.roots]
        if env.get("PYTHONPATH"):
            path.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(path)
        env.pop(RESULTS_ENV, None)
        if results_file is not None:
            env[RESULTS_ENV] = str(results_file)
        env.update(extra or {})
        return env

    def run(self, command: Sequence[str], *, results_file: str | os.PathLike[str] | None = None,
            env: Mapping[str, str] | None = None, timeout: float | None = None,
            echo: bool = False, pass_fds: Sequence[int] = (),
            after_spawn: Callable[[], None] | None = None) -> Run:
        """Runs ``command`` in the checkout and returns the Run (see the module doc).

        Args:
            command: the program and its arguments (no shell).
            results_file: where the run saves its results (``$OPBENCH_RESULTS_FILE``);
                default: a fresh path in a temporary folder, kept after the run.
            env: more environment variables for the command.
            timeout: seconds after which the command is stopped (a failed Run).
            echo: also copy the command's output to this process's stdout as it comes.
            pass_fds: file descriptors the command inherits (``subprocess.Popen``'s).
            after_spawn: called once the command's process exists (or failed to
                start): where the caller may close its copies of ``pass_fds``.

        Raises:
            KeyboardInterrupt: Ctrl-C (the command's process group was stopped first).
            ValueError: an empty command.
        """
        command = [str(c) for c in command]
        if not command:
            raise ValueError("command is empty: give the program to run and its arguments")
        # A program given by a relative path (.venv/bin/python) is the caller's, not the
        # checkout's: the worktree has no virtual environment.
        if os.sep in command[0] and not os.path.isabs(command[0]) and os.path.exists(command[0]):
            command[0] = os.path.abspath(command[0])
        if self.path is None or not self.path.is_dir():
            raise RevisionError(f"{self!r} is closed")
        if results_file is None:
            results_file = Path(tempfile.mkdtemp(prefix="opbench-run-")) / "results.json"
        results_file = Path(results_file).absolute()
        results_file.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            results_file.unlink()  # a file there from before would read as this run's
        if is_pytest(command):
            command = [*command, f"--opbench-save={results_file}"]
        cwd = self.path / self.subdir
        if not cwd.is_dir():
            cwd = self.path
        start = time.monotonic()
        returncode, output = run_group(command, cwd, self.environment(results_file, env),
                                        timeout, echo, tuple(pass_fds), after_spawn)
        return Run(self.revision, self.commit, tuple(command), returncode,
                   results_file if results_file.is_file() else None, output,
                   time.monotonic() - start)

    def close(self) -> None:
        """Removes the worktree (nothing for ``working_tree()``). Safe to call twice."""
        if not self._owned or self.path is None:
            return
        path, self._owned = self.path, False
        _remove_worktree(self._repo, path)


def _remove_worktree(repo: Path, path: Path) -> None:
    """Removes opbench's worktree at ``path``: its files and its record in ``repo``, by
    path. Never ``git worktree prune``: that drops every worktree whose folder is
    missing for the moment (an unmounted disk), the user's own with their index."""
    git(repo, "worktree", "remove", "--force", str(path), check=False)
    shutil.rmtree(path, ignore_errors=True)


def _remove_stale_worktrees(repo: Path) -> None:
    """Removes the records of opbench's own worktrees whose folders are gone (a run that
    was killed, its temporary folder since cleaned): only those named as opbench names
    them, each by its path."""
    listing = git(repo, "worktree", "list", "--porcelain", "-z", check=False)
    for field in listing.split("\0"):
        if not field.startswith("worktree "):
            continue
        path = Path(field[len("worktree "):])
        if path.name.startswith(_WORKTREE_PREFIX) and not path.exists():
            _remove_worktree(repo, path)


def _subdir(top: Path) -> Path:
    """The current folder relative to the repository ``top`` (``.`` outside it)."""
    try:
        return Path.cwd().resolve().relative_to(top.resolve())
    except ValueError:
        return Path(".")


def working_tree(repo: str | os.PathLike[str] = ".") -> Checkout:
    """The repository as it is now (uncommitted edits included) as a Checkout; nothing is
    copied and ``close()`` removes nothing.

    Raises:
        RevisionError: ``repo`` is not in a git repository.
    """
    top = toplevel(repo)
    commit = git(top, "rev-parse", "HEAD", check=False) or "(no commit)"
    dirty = git(top, "status", "--porcelain", "--untracked-files=no", check=False)
    return Checkout("working tree", commit + ("+dirty" if dirty else ""), top, _subdir(top),
                    owned=False, repo=top)


def checkout(rev: str, repo: str | os.PathLike[str] = ".", *,
             prepare: Sequence[str] | None = None, folder: str | os.PathLike[str] | None = None,
             timeout: float | None = None) -> Checkout:
    """The commit ``rev`` names, as a temporary git worktree made importable (module doc).

    Args:
        rev: a branch, tag, commit id or expression (``HEAD~1``, ``main``).
        repo: any folder inside the repository (default: the current one).
        prepare: a command run once in the worktree after checking it out (an
            install, a code generator); its failure is a RevisionError.
        folder: where to make the worktree's folder (default: the system's temp).
        timeout: seconds ``prepare`` may take.

    Raises:
        RevisionError: no such commit, git failing, a build or ``prepare`` failing.
    """
    top = toplevel(repo)
    commit = resolve(rev, top)
    _remove_stale_worktrees(top)
    path = Path(tempfile.mkdtemp(prefix=f"{_WORKTREE_PREFIX}{short_commit(commit)}-", dir=folder))
    try:
        git(top, "worktree", "add", "--detach", "--force", str(path), commit)
        add_compiled_modules(top, path, commit)
        result = Checkout(rev, commit, path, _subdir(top), owned=True, repo=top)
        if prepare:
            done = result.run(list(prepare), timeout=timeout)
            if done.returncode != 0:
                raise RevisionError(f"prepare command {list(prepare)} failed at {rev} "
                                    f"({short_commit(commit)}): {done.problem}")
        return result
    except BaseException:
        _remove_worktree(top, path)
        raise


def run_at(rev: str, command: Sequence[str], *, repo: str | os.PathLike[str] = ".",
           results_file: str | os.PathLike[str] | None = None,
           env: Mapping[str, str] | None = None, timeout: float | None = None,
           prepare: Sequence[str] | None = None) -> Run:
    """One command at one revision: ``checkout``, ``Checkout.run``, ``close``.

    ``rev`` None (or "working tree") runs in the working tree itself.

    Example::

        run = run_at("HEAD~1", ["pytest", "benchmarks/", "-q"])
        if run.ok:
            results = opbench.store.results.load(run.results)
    """
    if rev is None or rev == "working tree":
        ctx = working_tree(repo)
    else:
        ctx = checkout(rev, repo, prepare=prepare, timeout=timeout)
    with ctx as c:
        return c.run(command, results_file=results_file, env=env, timeout=timeout)


