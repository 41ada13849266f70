"""History (opbench.store.history): runs over commits, damage named, pruning. The
`opbench history` command's tests are in test_cli_history.py."""
from __future__ import annotations

import datetime
import json
import subprocess
import sys

import pytest

import history_repo
from opbench._files import numbers_taken
from opbench.core.measurement import Measurement, TaskSpec
from opbench.store import baselines, history


def opbench_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbench", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_a_partly_corrupt_history_loads_what_is_valid_and_names_the_rest(measured_store):
    store = measured_store
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


def test_prune_by_count_and_age(measured_store):
    store = measured_store
    removed = history.prune(store, keep=10)
    assert len(removed) == 20 and len(baselines.runs(store)) == 10
    folder = store / baselines.machine_id()
    assert numbers_taken(folder) == list(range(21, 31))  # their registry links went too
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=3)
    assert history.prune(store, older_than_days=4, now=later) == []
    left = baselines.runs(store)
    assert history.prune(store, older_than_days=2, now=later) == left
    assert baselines.runs(store) == []


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
