"""Bisect: `opbench find` names the commit of a known step in about log2(N) steps."""
from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

import history_repo
from opbench.gate import bisection


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("bisect") / "repo"
    return path, history_repo.build(path)


def find(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbench", "find", *args], cwd=repo,
                          capture_output=True, text=True, timeout=600, check=False)


def test_find_names_the_slow_commit_in_log2_n_steps(repo):
    path, commits = repo
    r = find(path, "jump", commits[0], commits[-1], "--", sys.executable, "bench.py")
    assert r.returncode == 0, r.stdout + r.stderr
    slow = commits[history_repo.STEP_AT]
    size = re.search(r"first commit at the new level \(\+([\d.]+)%\)", r.stdout).group(1)
    assert float(size) == pytest.approx(15, abs=2)
    assert f": {slow} change {history_repo.STEP_AT}\n" in r.stdout
    assert f"last at the old level: {commits[history_repo.STEP_AT - 1]}" in r.stdout
    steps = int(re.search(r"(\d+) bisection step\(s\)", r.stdout).group(1))
    assert steps <= math.log2(len(commits)) + 2
    assert len(re.findall(r"^step \d+: ", r.stdout, re.M)) == steps
    worktrees = subprocess.run(["git", "-C", str(path), "worktree", "list"], capture_output=True,
                               text=True).stdout.splitlines()
    assert len(worktrees) == 1  # every temporary worktree removed


def test_the_api_returns_every_probe(repo):
    path, commits = repo
    found = bisection.find("jump", commits[5], commits[20], [sys.executable, "bench.py"],
                           repo=path, runs=2)
    assert found.first_bad.commit == commits[history_repo.STEP_AT]
    assert found.last_good.commit == commits[history_repo.STEP_AT - 1]
    assert found.size == pytest.approx(0.15, abs=0.02)
    assert [p.verdict for p in found.probes[:2]] == ["good", "bad"]
    assert all(len(p.values) >= 2 for p in found.probes) and found.steps <= 4


def test_no_step_between_good_and_bad_exits_1(repo):
    path, commits = repo
    r = find(path, "flat_a", commits[0], commits[-1], "--", sys.executable, "bench.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no step in 'flat_a'" in r.stdout and "beyond the noise" in r.stdout


@pytest.mark.parametrize("args, message", [
    (("nope", "{0}", "{1}"), "no benchmark 'nope'"),
    (("jump", "{1}", "{0}"), "is not an ancestor"),
    (("jump", "{0}", "no-such-rev"), "no-such-rev"),
])
def test_bad_input_exits_2_naming_it(repo, args, message):
    path, commits = repo
    filled = [a.format(commits[0], commits[-1]) for a in args]
    r = find(path, *filled, "--", sys.executable, "bench.py")
    assert r.returncode == 2 and message in r.stderr, r.stdout + r.stderr


def test_a_failing_command_is_named(repo):
    path, commits = repo
    r = find(path, "jump", commits[0], commits[-1], "--", sys.executable, "-c", "raise SystemExit(3)")
    assert r.returncode == 2 and "exited with status 3" in r.stderr


def test_no_command_is_a_usage_error(repo):
    path, commits = repo
    r = find(path, "jump", commits[0], commits[-1])
    assert r.returncode == 2 and "give the command after --" in r.stderr
