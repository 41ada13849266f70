"""Revisions: a benchmark command run at git revisions of a project, and the sessions
built on that. Deciding and reporting are the gate's (``opbench.gate``); this package
checks revisions out, builds them, runs commands in them and schedules the runs.

- ``git``: revisions resolved to commits, a commit's subject.
- ``command``: a command run in a process group of its own, the ``Run`` it gives.
- ``build``: a checkout made importable: its source roots, its compiled modules
  copied or built (``pip wheel``) and cached.
- ``layout``: a random-size environment per run, so memory placement is drawn per run.
- ``checkout``: ``checkout(REV)`` (a temporary git worktree), ``working_tree()``, ``run_at``.
- ``turns``: the processes of an ``opbench ab`` wave taking turns to time.
- ``waves``: a wave of base and head runs, at once (taking turns) or one after the other.
- ``session``: ``run_ab``, the ``opbench ab`` session (rounds of base and head runs).
- ``bisection``: ``find``, the ``opbench find`` bisect.
- ``backfill``: ``backfill``, ``opbench history run`` (past commits into the history).

Floor: revisions (above analysis and the gate, below sweep); the ``floors`` contract in
pyproject.toml (``[tool.importlinter]``) says what it may import.
"""
from __future__ import annotations

from opbench.errors import Error

__all__ = ["RevisionError"]


class RevisionError(Error, RuntimeError):
    """A revision that cannot be resolved, checked out or made importable."""
