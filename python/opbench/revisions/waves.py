"""Waves: the base and head runs of an ``opbench ab`` session's rounds, run at once
(taking turns to time, ``opbench.revisions.turns``) or one after the other.

A wave is ``wave`` rounds whose process pairs start at once; with a turns
coordinator, worker ``2i + side`` is pair ``i``'s side (0: base, 1: head) and only
the holder of the turn times. Rounds one after the other are waves of one pair, its
two runs in the order ``first`` says (AB, BA, ...: ABBA over two waves). Ctrl-C stops
every command of the wave; what finished still counts (``WaveInterrupted``).

Example::

    runs = concurrently(pairs, (base, head), timeout=None,
                        coordinator=turns.Coordinator(workers=2 * len(pairs)))
    for base_run, head_run in runs:
        ...
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opbench.revisions import turns
from opbench.revisions.checkout import Checkout
from opbench.revisions.command import Run, stop_all

__all__ = ["Pair", "WaveInterrupted", "concurrently", "one_after_the_other", "speaks_turns",
           "timing_cpu"]

# One round's commands and results files, base's first.
Pair = tuple[list[list[str]], list[Path]]

# Prints where the first ``opbench`` package on sys.path lies ("" when none is a folder
# there): a Python start-up without importing opbench, a tenth of an import's cost.
# A folder without __init__.py is no package: an editable install (scikit-build-core's)
# leaves one in site-packages holding only the compiled modules, and its code is found by
# an import hook; taken for the package, it made every such install "predate turns".
_FIND_OPBENCH = ("import os, sys\n"
                 "print(next((d for d in (os.path.join(p or os.getcwd(), 'opbench') for p in "
                 "sys.path) if os.path.isfile(os.path.join(d, '__init__.py'))), ''))")
# Where an opbench that takes turns keeps the module, newest first: ``gate/turns.py``
# in the revisions before ``opbench.revisions``.
_TURNS_FILES = (("revisions", "turns.py"), ("gate", "turns.py"))
# Exits 0 when one of them imports (an opbench no folder on the path holds).
_IMPORT_TURNS = ("import importlib\n"
                 "for m in ('opbench.revisions.turns', 'opbench.gate.turns'):\n"
                 "    try:\n"
                 "        importlib.import_module(m)\n"
                 "        raise SystemExit(0)\n"
                 "    except ImportError:\n"
                 "        pass\n"
                 "raise SystemExit(1)\n")


def speaks_turns(sides: Sequence[Checkout]) -> list[bool]:
    """Whether each side's opbench (what its command imports) takes turns, asked of both
    sides at once: its package folder holds the turns module; where no folder on the
    side's path holds opbench (an import hook), importing the module decides."""
    def run(side: Checkout, code: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run([sys.executable, "-c", code], cwd=side.path,
                                  env=side.environment(), capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None

    def check(side: Checkout) -> bool:
        found = run(side, _FIND_OPBENCH)
        if found is not None and found.returncode == 0 and found.stdout.strip():
            folder = found.stdout.strip()
            return any(os.path.isfile(os.path.join(folder, *f)) for f in _TURNS_FILES)
        imported = run(side, _IMPORT_TURNS)
        return imported is not None and imported.returncode == 0

    with ThreadPoolExecutor(len(sides)) as pool:
        return list(pool.map(check, sides))


class WaveInterrupted(KeyboardInterrupt):
    """Ctrl-C during a wave: ``runs`` as ``concurrently`` returns them, those stopped
    not ok (the pairs that had finished still count)."""

    def __init__(self, runs: list[list[Run]]) -> None:
        super().__init__()
        self.runs = runs


def timing_cpu() -> int | None:
    """The CPU a wave's workers time on: this process's last allowed one (any fixed one
    would do: what matters is that every worker shares it)."""
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _worker_run(w: int, pairs: list[Pair], sides: tuple[Checkout, Checkout],
                timeout: float | None, coordinator: turns.Coordinator | None) -> Any:
    """Worker ``w``'s run (pair ``w // 2``, side ``w % 2``), or the exception it raised
    (reported as the run's failure)."""
    (commands, files), side = pairs[w // 2], w % 2
    try:
        extra: dict[str, str] | None = None
        fds: tuple[int, ...] = ()
        spawned: Callable[[], None] | None = None
        if coordinator is not None:
            extra, fds = coordinator.environment(w), coordinator.worker_fds(w)
            spawned = functools.partial(coordinator.spawned, w)
        return sides[side].run(commands[side], results_file=files[side], env=extra,
                               timeout=timeout, pass_fds=fds, after_spawn=spawned)
    except BaseException as e:  # reported as the run's failure
        return e


def _start_and_join(threads: list[threading.Thread],
                    coordinator: turns.Coordinator | None) -> None:
    for t in threads:
        t.start()
    if coordinator is not None:
        coordinator.serve(lambda w: not threads[w].is_alive())
    for t in threads:
        while t.is_alive():
            t.join(0.1)


def concurrently(pairs: list[Pair], sides: tuple[Checkout, Checkout], timeout: float | None,
                 coordinator: turns.Coordinator | None) -> list[list[Run]]:
    """Every pair's base and head runs at once (taking turns when a coordinator is given:
    worker ``2i + side`` is pair ``i``'s side), as ``[[base, head], ...]``. Ctrl-C stops
    them all and raises ``WaveInterrupted`` with what finished."""
    runs: list[Any] = [None] * (2 * len(pairs))

    def go(w: int) -> None:
        runs[w] = _worker_run(w, pairs, sides, timeout, coordinator)

    threads = [threading.Thread(target=go, args=(w,), daemon=True) for w in range(len(runs))]
    try:
        _start_and_join(threads, coordinator)
    except KeyboardInterrupt:  # Ctrl-C: stop every command, keep what finished
        stop_all()
        for t in threads:
            t.join(30)
        if any(isinstance(r, BaseException) or r is None for r in runs):
            raise
        interrupted = True
    else:
        interrupted = False
        failed = next((r for r in runs if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
    finally:
        if coordinator is not None:
            coordinator.close()
    by_pair = [runs[i:i + 2] for i in range(0, len(runs), 2)]
    if interrupted:
        raise WaveInterrupted(by_pair)
    return by_pair


def one_after_the_other(sides: tuple[Checkout, Checkout], commands: list[list[str]],
                        files: list[Path], timeout: float | None, first: int) -> list[Run]:
    """One round's two runs, side ``first``'s first (0: base, 1: head)."""
    runs: list[Any] = [None, None]
    for i in (first, 1 - first):
        runs[i] = sides[i].run(commands[i], results_file=files[i], timeout=timeout)
    return runs
