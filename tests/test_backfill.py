"""opbench.revisions.backfill (``opbench history run``): past commits measured in temporary
worktrees, each run saved with its own commit's facts, in passes, resumable, bounded by
ranges and tags; the user's checkout never touched."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import history_repo
from opbench._text import short_commit
from opbench.revisions import RevisionError, backfill
from opbench.stats import changepoints
from opbench.store import history


def _status(repo: Path) -> tuple[str, str]:
    head = history_repo.git(repo, "rev-parse", "HEAD")
    return head, history_repo.git(repo, "status", "--porcelain")


@pytest.fixture
def tagged(history_commits):
    """history_repo's repository with tags on two commits (removed afterwards)."""
    repo, commits = history_commits
    history_repo.git(repo, "tag", "v1.0", commits[10])
    history_repo.git(repo, "tag", "v1.1", commits[12])
    yield repo, commits
    history_repo.git(repo, "tag", "-d", "v1.0", "v1.1")


def test_a_range_runs_in_passes_in_worktrees_and_saves_each_commits_facts(tagged, tmp_path):
    repo, commits = tagged
    (repo / "bench.py").write_text((repo / "bench.py").read_text() + "\n# an edit of mine\n")
    before = _status(repo)
    lines: list[str] = []
    try:
        done = backfill.backfill([f"{commits[10]}..{commits[12]}"], [sys.executable, "bench.py"],
                                 runs=2, root=tmp_path / "store", repo=repo,
                                 progress=lines.append)
        assert _status(repo) == before  # the user's checkout: same commit, same edits
    finally:
        history_repo.git(repo, "checkout", "--", "bench.py")
    assert done.commits == commits[10:13] and not done.failed and done.skipped == 0
    # Passes: every commit once, then every commit again.
    assert [c for c, _ in done.saved] == commits[10:13] * 2
    assert lines[0].startswith("[1/6] v1.0 (") and "run 1/2: saved" in lines[0]
    assert "change 10" in lines[0] and lines[5].startswith("[6/6] v1.1 (")
    assert lines[4].startswith(f"[5/6] {short_commit(commits[11])} run 2/2: saved")
    h = history.load(tmp_path / "store")
    series = h.series("jump")
    groups = series.by_commit()
    assert [c for c, _ in groups] == commits[10:13] and all(len(p) == 2 for _, p in groups)
    git = groups[0][1][0].run.git
    assert git["tags"] == ["v1.0"] and git["subject"] == "change 10" and not git["dirty"]
    assert git["branch"] is None and history.label(groups[1][1]) == short_commit(commits[11])
    # Every run saw the 15% step at v1.1 (noise: 1% a sample, 0.3% a run). Whether change
    # points find it in three commits of two runs each is not backfill's to say: on so few
    # replicates the detector's noise estimate varies (it came out a drift, or a second
    # step, in CI); tests/test_changepoints.py measures detection.
    levels = [[p.value for p in points] for _, points in groups]
    assert max(levels[0] + levels[1]) * 1.1 < min(levels[2])
    step = changepoints.Change("step", 1, 2, 0.15, levels[1][0], levels[2][0], 30.0, True)
    assert history.commit_range(series, step) == (f"{short_commit(commits[11])}..{short_commit(commits[12])} "
                                                  f"({short_commit(commits[11])}..v1.1)")


def test_running_it_again_resumes(history_commits, tmp_path):
    repo, commits = history_commits
    args = dict(root=tmp_path / "store", repo=repo)
    first = backfill.backfill([f"{commits[3]}..{commits[4]}"], [sys.executable, "bench.py"],
                              runs=1, **args)
    assert len(first.saved) == 2
    again = backfill.backfill([f"{commits[3]}..{commits[4]}"], [sys.executable, "bench.py"],
                              runs=2, **args)
    assert again.skipped == 2 and [c for c, _ in again.saved] == commits[3:5]
    groups = history.load(tmp_path / "store").series("jump").by_commit()
    assert [len(points) for _, points in groups] == [2, 2]


# A command that measures "jump" and "flat_a" from the commit's costs.json, only those
# $OPBENCH_SELECT names when it is set (as opbench's plugin does), and whose first run at
# a commit of the 15% step ran "jump" on a core another tenant slowed 1.7x all along.
_SLOWED_ONCE = """
import json, os, sys
from pathlib import Path
from opbench.core.measurement import Measurement, TaskSpec
from opbench.store import results

spec = json.loads(Path("costs.json").read_text())
seen = Path(sys.argv[1]) / f"{spec['index']}.runs"
first = not seen.exists()
seen.write_text("ran")
wanted = json.loads(os.environ.get("OPBENCH_SELECT") or '["jump", "flat_a"]')
out = []
for name in wanted:
    slow = 1.7 if name == "jump" and first and spec["index"] == 12 else 1.0
    signals = {"waits": [0.0] * 40, "slowdowns": [slow] * 40, "threads": 1, "cpus": 2}
    times = [spec["costs"][name] * slow * (1 + 0.001 * (k % 7)) for k in range(40)]
    out.append(Measurement(1, times, TaskSpec(name, "pass", name=name),
                           info={"disturbance": signals}))
results.save(out, os.environ["OPBENCH_RESULTS_FILE"])
"""


def test_a_benchmark_short_of_runs_at_full_speed_gets_make_up_runs(history_commits, tmp_path):
    repo, commits = history_commits
    script = tmp_path / "bench_slowed_once.py"
    script.write_text(_SLOWED_ONCE)
    (tmp_path / "seen").mkdir()
    command = [sys.executable, str(script), str(tmp_path / "seen")]
    args = dict(runs=2, root=tmp_path / "store", repo=repo)
    lines: list[str] = []
    done = backfill.backfill([f"{commits[11]}..{commits[13]}"], command, progress=lines.append,
                             **args)
    # Two passes, then one make-up run: only "jump", only at the commit where it ran slowed.
    assert not done.failed and done.makeup == 1 and len(done.saved) == 7
    assert done.saved[-1][0] == commits[12]
    assert lines[-1].startswith(f"[make-up 1/4] {short_commit(commits[12])}: 1 benchmark(s) "
                                "with fewer than 2 runs at full speed: saved")
    h = history.load(tmp_path / "store")
    made_up = next(run for run in h.runs if run.path == done.saved[-1][1])
    assert made_up.environment[backfill.MAKEUP_KEY] == ["jump"]
    assert [k for k, _ in h.benchmarks()] == ["flat_a", "jump"]
    jump = dict(h.series("jump").by_commit())
    assert [p.slow_core for p in jump[commits[12]]] == [True, False, False]
    assert len([p for _, pts in h.series("flat_a").by_commit() for p in pts]) == 6
    # Resuming: the make-up run is no pass, and nothing is short any more.
    again = backfill.backfill([f"{commits[11]}..{commits[13]}"], command, **args)
    assert again.skipped == 6 and not again.saved and again.makeup == 0
    # --no-makeup: a commit short of runs at full speed stays short.
    off = backfill.backfill([commits[12]], command, makeup=False,
                            **{**args, "root": tmp_path / "other"})
    assert off.makeup == 0 and len(off.saved) == 2


def test_tags_bound_what_runs(tagged, tmp_path):
    repo, commits = tagged
    assert backfill.commits([], repo, tags="v1.*") == [commits[10], commits[12]]
    assert backfill.commits([f"{commits[8]}..{commits[14]}"], repo, only_tagged=True) == \
        [commits[10], commits[12]]
    assert backfill.commits([commits[12], commits[3]], repo) == [commits[3], commits[12]]
    with pytest.raises(RevisionError, match="no tag matches 'w\\*'"):
        backfill.commits([], repo, tags="w*")
    with pytest.raises(RevisionError, match="not an ancestor"):
        backfill.commits([f"{commits[5]}..{commits[2]}"], repo)


def test_a_failing_run_is_reported_and_nothing_saved_for_it(history_commits, tmp_path):
    repo, commits = history_commits
    done = backfill.backfill([commits[0]], [sys.executable, "-c", "raise SystemExit(3)"],
                             runs=1, root=tmp_path / "store", repo=repo)
    assert not done.saved and len(done.failed) == 1
    assert "exited with status 3" in done.failed[0][1]
    with pytest.raises(ValueError, match="runs must be a positive integer"):
        backfill.backfill([commits[0]], ["true"], runs=0, repo=repo)


def test_the_command_line_runs_it_and_history_shows_it(history_commits, tmp_path):
    repo, commits = history_commits
    store = tmp_path / "store"
    run = subprocess.run([sys.executable, "-m", "opbench", "history", "run",
                          f"{commits[11]}..{commits[13]}", "--runs", "1", "--root", str(store),
                          "--", sys.executable, "bench.py"], cwd=repo, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[3/3]" in run.stdout and "3 run(s) saved over 3 commit(s)" in run.stdout
    shown = subprocess.run([sys.executable, "-m", "opbench", "history", "jump", "--root",
                            str(store)], capture_output=True, text=True, timeout=120)
    assert f"{short_commit(commits[12])}  -" in shown.stdout and "change 12" in shown.stdout
    bad = subprocess.run([sys.executable, "-m", "opbench", "history", "run", "--root",
                          str(store), "--", "true"], cwd=repo, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "give the revisions to run" in bad.stderr
