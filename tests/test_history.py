"""History: runs over commits, regressions found at their commits, damage named, pruning."""
from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import history_repo
from opbench._files import numbers_taken
from opbench.core.measurement import Measurement, TaskSpec
from opbench.store import baselines, history


def opbench_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbench", *args], capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    """30 commits measured and autosaved one by one: (store, commits)."""
    base = tmp_path_factory.mktemp("history")
    commits = history_repo.build(base / "repo", base / "store")
    return base / "store", commits


@pytest.fixture
def store(repo, tmp_path) -> Path:
    """A copy of the store a test may damage or prune."""
    shutil.copytree(repo[0], tmp_path / "store", symlinks=True)
    return tmp_path / "store"


def short(commit: str) -> str:
    return commit[:10]


def test_regressions_names_the_step_and_the_drift_at_their_commits_and_nothing_else(repo):
    store, commits = repo
    r = opbench_cli("history", "--root", str(store), "--regressions")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout  # the step, the drift; nothing from flat_a / flat_b
    step, drift = lines  # largest first: the 15% step, then the ~12% drift
    good, bad = commits[history_repo.STEP_AT - 1], commits[history_repo.STEP_AT]
    assert step.startswith("REGRESSION  jump  (time)  step +15.")
    assert f"commits {short(good)}..{short(bad)}" in step
    assert drift.startswith("REGRESSION  creep  (time)  drift +1")
    first = [short(c) for c in commits[history_repo.DRIFT_FROM - 1:history_repo.DRIFT_FROM + 1]]
    assert any(f"commits {c}..{short(commits[-1])}" in drift for c in first), drift
    assert "/commit" in drift and "2 change(s) up of 5.0% or more" in r.stderr


def test_regressions_below_the_threshold_pass(repo):
    r = opbench_cli("history", "--root", str(repo[0]), "--regressions", "--threshold", "20%")
    assert r.returncode == 0, r.stderr
    assert [line.split()[0] for line in r.stdout.splitlines()] == ["slower", "slower"]


def test_history_lists_a_benchmarks_runs_in_commit_order(repo):
    store, commits = repo
    r = opbench_cli("history", "--root", str(store), "jump")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("  ")
            and not line.strip().startswith("change:")]
    assert [row[1] for row in rows] == [short(c) for c in commits]
    assert {row[2] for row in rows} == {"main"}
    changes = [line for line in r.stdout.splitlines() if "change:" in line]
    beyond = [line for line in changes if "beyond the noise" in line]
    assert len(beyond) == 1 and "step +15." in beyond[0]
    assert f"{short(commits[11])}..{short(commits[12])}" in beyond[0]
    assert all("within the noise" in line for line in changes if line not in beyond)


def test_an_unknown_benchmark_is_named_with_those_there(repo):
    r = opbench_cli("history", "--root", str(repo[0]), "nope")
    assert r.returncode == 2
    assert "'nope'" in r.stderr and "creep, flat_a, flat_b, jump" in r.stderr


def test_no_history_says_how_to_make_one(tmp_path):
    r = opbench_cli("history", "--root", str(tmp_path))
    assert r.returncode == 2 and "--autosave" in r.stderr


def test_a_partly_corrupt_history_loads_what_is_valid_and_names_the_rest(store):
    runs = baselines.runs(store)
    runs[3].write_text(runs[3].read_text()[:200])  # truncated: the whole file is lost
    doc = json.loads(runs[5].read_text())
    doc["measurements"][1]["raw_times"][0] = -1.0  # one bad result: the others stay
    runs[5].write_text(json.dumps(doc))
    h = history.load(store)
    assert len(h.runs) == 29
    assert [p.run.number for p in h.series("jump").points if p.run.number == 6] == [6]
    assert len(h.series(doc["measurements"][1]["task_spec"]["name"]).points) == 28
    assert len(h.problems) == 2
    assert str(runs[3]) in h.problems[0] and "truncated or corrupt JSON" in h.problems[0]
    assert str(runs[5]) in h.problems[1] and "measurements[1]" in h.problems[1]
    assert "raw_times" in h.problems[1]
    r = opbench_cli("history", "--root", str(store), "--regressions")
    assert r.returncode == 1 and r.stderr.count("warning: skipped") == 2


def test_prune_by_count_and_age(store):
    removed = history.prune(store, keep=10)
    assert len(removed) == 20 and len(baselines.runs(store)) == 10
    folder = store / baselines.machine_id()
    assert numbers_taken(folder) == list(range(21, 31))  # their registry links went too
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=3)
    assert history.prune(store, older_than_days=4, now=later) == []
    left = baselines.runs(store)
    assert history.prune(store, older_than_days=2, now=later) == left
    assert baselines.runs(store) == []


def test_prune_from_the_command_line(store):
    r = opbench_cli("history", "--root", str(store), "--prune-keep", "5", "jump")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("pruned 25 run(s)") and len(baselines.runs(store)) == 5


def test_runs_of_one_commit_are_one_level(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    history_repo.git(repo, "init", "-q")
    history_repo.git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    monkeypatch.chdir(repo)
    for t in (1.0e-6, 1.2e-6, 1.1e-6):
        baselines.autosave([Measurement(1, [t], TaskSpec("f()", "pass", name="f"))],
                           root=tmp_path / "store")
    series = history.load(tmp_path / "store").series("f")
    ((commit, points),) = series.by_commit()
    assert len(points) == 3 and commit == history_repo.git(repo, "rev-parse", "HEAD")
    assert series.detect().fit == pytest.approx([1.1e-6])


def test_runs_saved_before_git_state_was_recorded_still_have_their_commit(tmp_path):
    folder = tmp_path / baselines.machine_id()
    folder.mkdir()
    from opbench.store.results import save

    save([Measurement(1, [1e-6], TaskSpec("f()", "pass"))], folder / "0001_abc_x.json",
         environment={"git_commit": "abc123+dirty"})
    (run,) = history.load(tmp_path).runs
    assert run.git == {"commit": "abc123", "dirty": True} and run.commit == "abc123"
