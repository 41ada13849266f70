"""History (opbench.store.history): runs over commits, damage named, pruning. The
`opbench history` command's tests are in test_cli_history.py."""
from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys

import pytest

import history_repo
from history_runs import save as _save
from opbench._files import numbers_taken
from opbench.core.formatting import format_value
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


def test_each_kind_of_damage_is_skipped_and_named_and_the_rest_shown(measured_store, monkeypatch):
    """Issue 34: a number of 5,000 digits, deep nesting, times no clock gives, a file past
    the size limit: each used to stop `history` and `report` (ValueError, RecursionError,
    OverflowError, or all memory)."""
    store = measured_store
    runs = baselines.runs(store)
    text = runs[1].read_text()
    damage = {
        2: text.replace('"number_per_run": ', '"number_per_run": ' + "9" * 5000 + ", \"x\": ", 1),
        4: text.replace('"environment": {', '"environment": {"deep": ' + "[" * 3000
                        + "]" * 3000 + ", ", 1),
        6: _with_time(text, 1e-320),
        8: _with_time(text, 1e308),
        10: text + " " * 20_000,  # past the limit set below
    }
    for index, damaged in damage.items():
        runs[index].write_text(damaged)
    limit = str((len(text) + 10_000) / (1 << 20))
    monkeypatch.setenv("OPBENCH_MAX_FILE_MB", limit)
    h = history.load(store)
    named = {str(runs[i]): next(p for p in h.problems if p.startswith(str(runs[i])))
             for i in damage}
    assert "more than 4300 digits" in named[str(runs[2])]
    assert "nested too deeply" in named[str(runs[4])]
    assert "between 1e-30 and 1e+30 seconds" in named[str(runs[6])]
    assert "between 1e-30 and 1e+30 seconds" in named[str(runs[8])]
    assert "OPBENCH_MAX_FILE_MB" in named[str(runs[10])]
    assert len(h.runs) == 27  # the others' results; runs 6 and 8 keep their valid ones
    env = dict(os.environ, OPBENCH_MAX_FILE_MB=limit)
    for args in (("history", "--root", str(store)), ("report", "--root", str(store), "-o",
                                                     str(store.parent / "site"))):
        r = subprocess.run([sys.executable, "-m", "opbench", *args], capture_output=True,
                           text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("wrote ")


def _with_time(text: str, value: float) -> str:
    doc = json.loads(text)
    doc["measurements"][0]["raw_times"][0] = value
    return json.dumps(doc)


def test_memory_counts_are_series_per_figure_and_a_new_allocation_is_a_change(tmp_path,
                                                                              monkeypatch):
    from opbench.core.memory import MemoryCounts

    repo = tmp_path / "repo"
    repo.mkdir()
    history_repo.git(repo, "init", "-q")
    monkeypatch.chdir(repo)
    for i, allocations in enumerate((0, 0, 0, 0, 1, 1, 1, 1)):
        history_repo.git(repo, "commit", "-q", "--allow-empty", "-m", f"c{i}")
        host = {"allocations": (allocations * 10,), "bytes": (allocations * 640,), "peak": (64,),
                "growth": (0,)}
        baselines.autosave([MemoryCounts(10, {"host": host}, TaskSpec("f()", "pass", name="f"))],
                           root=tmp_path / "store")
    h = history.load(tmp_path / "store")
    assert ("f [allocations]", "allocations") in h.benchmarks()
    series = h.series("f [allocations]", "allocations")
    assert [p.value for p in series.points] == [0.0] * 4 + [1.0] * 4
    assert [c.kind for c in series.detect().changes] == ["step"]
    assert format_value(64.0, "bytes") == "64 B"


def test_a_process_slowed_all_along_is_told_by_its_full_speed(tmp_path):
    # Two of commit 2's three runs ran in processes whose core was shared from their start:
    # their blocks read 1.0 against their own best, which was 1.7x the machine's.
    for rep in range(3):
        for commit in range(4):
            slow = 1.7 if commit == 2 and rep < 2 else 1.0
            _save(tmp_path, commit, {"a": slow * 1e-6, "b": slow * 2e-6}, slowdowns=1.0,
                  speed_ns=round(1000 * slow))
    h = history.load(tmp_path)
    assert h.full_speed_ns == 1000.0
    series = h.series("a")
    slowed = [p for p in series.points if p.slow_core]
    assert len(slowed) == 2 and all(p.slowdown == pytest.approx(1.7) for p in slowed)
    # Its median alone would read a 70% spike; its level is the run at full speed.
    assert series.replicates()[2] == [pytest.approx(1e-6, rel=0.01)]
    assert not any(c.exceeds_noise for _, d in history.changes(h) for c in d.changes)


def test_runs_on_a_slowed_core_give_way_to_those_at_full_speed(tmp_path):
    for rep in range(2):
        for commit in range(4):
            slow = commit == 1 and rep == 0
            _save(tmp_path, commit, {"a": (1.8 if slow else 1.0) * 1e-6},
                  slowdowns=1.6 if slow else 1.0)
    series = history.load(tmp_path).series("a")
    assert [p.slow_core for p in series.points].count(True) == 1
    assert not any(c.exceeds_noise for c in series.detect().changes)


def test_a_run_the_probe_read_a_tenth_slow_is_left_out_as_slowed(tmp_path):
    # packaging 23.2 in benchmarks/real_history.py: two of its three runs read +37% on a
    # core the speed probe read only 1.10x and 1.12x slow (the probe, a native loop, feels
    # a busy sibling less than Python code); counted, they made a false +32% spike.
    for rep in range(3):
        for commit in range(4):
            slow = commit == 2 and rep < 2
            _save(tmp_path, commit, {"a": (1.37 if slow else 1.0) * 1e-6},
                  slowdowns=1.10 + 0.02 * rep if slow else 1.0, speed_ns=1000)
    series = history.load(tmp_path).series("a")
    assert [p.slow_core for p in series.points].count(True) == 2
    assert series.replicates()[2] == [pytest.approx(1e-6, rel=0.01)]
    assert not any(c.exceeds_noise for c in series.detect().changes)


def test_a_run_whose_fastest_blocks_ran_at_full_speed_counts(tmp_path):
    # Most blocks of each run shared their core; the fastest tenth, which the figure (the
    # 10th percentile) is taken from, did not.
    for commit in range(3):
        times = [1e-6] * 6 + [1.8e-6] * 34
        signals = {"waits": [0.0] * 40, "slowdowns": [1.0] * 6 + [1.6] * 34, "threads": 1,
                   "cpus": 2}
        baselines.autosave([Measurement(1, times, TaskSpec("f()", "pass", name="a"),
                                        info={"disturbance": signals})], root=tmp_path,
                           git={"commit": f"{commit + 1:040x}", "dirty": False,
                                "commit_time": f"2026-01-01T00:0{commit}:00Z"})
    points = history.load(tmp_path).series("a").points
    assert [p.slow_core for p in points] == [False] * 3
    assert [p.slowdown for p in points] == [1.0] * 3


def test_paired_rounds_are_no_levels_and_count_only_at_full_speed(tmp_path):
    # Three commits of two runs (1% apart); commit 2 reads 6% faster: z = 4, in doubt.
    for rep in range(2):
        for commit in range(3):
            _save(tmp_path, commit, {"a": (0.94 if commit == 2 else 1.0) * (1.01 - 0.02 * rep)
                                     * 1e-6}, slowdowns=1.0, speed_ns=1000)
    series = history.load(tmp_path).series("a")
    levels = series.detect()
    assert series.doubts(levels) == [1] and not any(c.exceeds_noise for c in levels.changes)
    # Rounds at that step, each in a later, 20% slower state of the machine: 5 at full
    # speed, one whose "after" run shared its core (no round), one whose "after" failed.
    for number in range(7):
        state = 1.2 * (1 + 0.01 * (-1) ** number)
        _save(tmp_path, 1, {"a": state * 1e-6}, slowdowns=1.0, speed_ns=1000,
              settles=(1, 2, number))
        if number < 6:
            slowed = number == 5
            _save(tmp_path, 2, {"a": state * 0.94 * (1.7 if slowed else 1.0) * 1e-6},
                  slowdowns=1.6 if slowed else 1.0, speed_ns=1000, settles=(1, 2, number))
    # A run whose mark names no step of its own commit is no round either.
    _save(tmp_path, 0, {"a": 2e-6}, slowdowns=1.0, speed_ns=1000, settles=(1, 2, 99))
    h = history.load(tmp_path)
    assert sum(run.settles is not None for run in h.runs) == 14
    series = h.series("a")
    assert [len(points) for _, points in series.by_commit()] == [2, 2, 2]
    assert [p.value for p in series.points] == [p.value for p in levels_points(tmp_path)]
    pairs = series.paired()
    assert list(pairs) == [1] and len(pairs[1]) == 5
    assert all(after / before == pytest.approx(0.94) for before, after in pairs[1])
    step = next(c for c in series.detect().changes if c.start == 1)
    assert step.exceeds_noise and step.rounds == 5 and step.size == pytest.approx(-0.06, abs=0.01)
    # The rounds do not make the history in doubt or not: that is the levels' to say.
    assert series.doubts(series.detect(rounds={})) == [1]
    # The report says what holds the step, as the text does.
    from opbench.analysis import report
    drawn = report._series_json(series, series.detect(), "a")["steps"]
    assert [d["evidence"] for d in drawn] == [history.evidence(step)]
    assert drawn[0]["evidence"].endswith("with 5 paired rounds")


def levels_points(root) -> list[history.Point]:
    """The points of "a" without its rounds' runs (the passes alone)."""
    h = history.load(root)
    h.runs = [run for run in h.runs if run.settles is None]
    return h.series("a").points


def test_standing_says_what_still_holds_and_what_undid_it(tmp_path):
    from opbench.stats.changepoints import detect_runs
    d = detect_runs([[1.0, 1.0]] * 3 + [[1.2, 1.2]] * 3)
    (step,) = [c for c in d.changes if c.exceeds_noise]
    still = history.standing(d, step)
    assert still.holds and still.still == pytest.approx(0.2)
    d = detect_runs([[1.0, 1.0]] * 3 + [[1.5, 1.5]] * 2 + [[1.02, 1.02]] * 3)
    up, down = [c for c in d.changes if c.exceeds_noise]
    fixed = history.standing(d, up)
    assert not fixed.holds and fixed.undone_by is down and fixed.still == pytest.approx(0.02)
