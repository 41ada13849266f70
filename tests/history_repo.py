"""A git repository of 30 commits with known performance changes, for history, report and find.

Each commit holds ``costs.json`` (the cost per call of four mock statements) and
``bench.py``, which measures them through a mock engine (deterministic cost,
seeded noise: 1% per sample and 0.3% per run; autosaved runs are seeded by commit,
runs made by ``opbench find`` each by their own results path) and saves the results to
``$OPBENCH_RESULTS_FILE`` when set (opbench find, ab), else autosaves them.

* ``jump``: 15% slower from commit STEP_AT on (a step).
* ``creep``: 1% slower per commit from commit DRIFT_FROM on (a gradual drift).
* ``flat_a``, ``flat_b``: unchanged.
"""
from __future__ import annotations

import json
import os
import runpy
import subprocess
from pathlib import Path

COMMITS = 30
STEP_AT = 12      # the first commit (0-based) of the 15% step in "jump"
DRIFT_FROM = 18   # the first commit (0-based) 1% slower than the one before, in "creep"

BENCH = '''\
import json, os, random, sys, zlib
import opbench
from opbench.store import baselines, results

SPEC = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "costs.json")))
# Autosaved runs are seeded by commit (a reproducible history); runs made by opbench
# find get a fresh results path each, so their noise is independent, as real runs are.
RUN = os.environ.get("OPBENCH_RESULTS_FILE", "0")


class MockEngine:
    """Deterministic cost per call, with noise seeded by statement, commit and run."""

    def __init__(self, stmt, setup, timer, globals, **kwargs):
        self.cost = SPEC["costs"][stmt]
        self.rng = random.Random(zlib.crc32(f"{stmt}|{SPEC['index']}|{RUN}".encode()))
        self.run_offset = 1 + self.rng.gauss(0, 0.003)

    def timeit(self, number):
        return self.cost * number * self.run_offset * (1 + self.rng.gauss(0, 0.01))


class MockTimer(opbench.Timer):
    _timer_cls = MockEngine


measured = [MockTimer(name, name=name).repeat(repeat=21, number=100) for name in SPEC["costs"]]
target = os.environ.get("OPBENCH_RESULTS_FILE")
print(results.save(measured, target) if target else baselines.autosave(measured))
'''


def costs(index: int) -> dict[str, float]:
    return {
        "jump": 2e-6 * (1.15 if index >= STEP_AT else 1.0),
        "creep": 5e-6 * 1.01 ** max(0, index - DRIFT_FROM + 1),
        "flat_a": 1e-6,
        "flat_b": 3e-5,
    }


def git(repo: Path, *args: str, date: int | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    if date is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{date} +0000"
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def build(repo: Path, root: Path | None = None) -> list[str]:
    """Makes the 30 commits in ``repo``; with ``root``, also measures each one and
    autosaves it there (as CI would on every merge). Returns the commits, oldest first."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "bench.py").write_text(BENCH)
    commits = []
    for i in range(COMMITS):
        (repo / "costs.json").write_text(json.dumps({"index": i, "costs": costs(i)}))
        git(repo, "add", "bench.py", "costs.json")
        git(repo, "commit", "-q", "-m", f"change {i}", date=1_700_000_000 + 3600 * i)
        commits.append(git(repo, "rev-parse", "HEAD"))
        if root is not None:
            measure(repo, root)
    return commits


def measure(repo: Path, root: Path) -> None:
    """Runs bench.py in this process at the checked-out commit, autosaving under root."""
    cwd = os.getcwd()
    old = os.environ.get("OPBENCH_BASELINE_DIR")
    os.environ["OPBENCH_BASELINE_DIR"] = str(root)
    os.chdir(repo)
    try:
        runpy.run_path(str(repo / "bench.py"), run_name="__main__")
    finally:
        os.chdir(cwd)
        if old is None:
            del os.environ["OPBENCH_BASELINE_DIR"]
        else:
            os.environ["OPBENCH_BASELINE_DIR"] = old
