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
        # The passes alone: paired rounds (at a step in doubt by chance) are tested below.
        done = backfill.backfill([f"{commits[10]}..{commits[12]}"], [sys.executable, "bench.py"],
                                 runs=2, root=tmp_path / "store", repo=repo, settle=False,
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
    args = dict(root=tmp_path / "store", repo=repo, settle=False)
    first = backfill.backfill([f"{commits[3]}..{commits[4]}"], [sys.executable, "bench.py"],
                              runs=1, **args)
    assert len(first.saved) == 2
    again = backfill.backfill([f"{commits[3]}..{commits[4]}"], [sys.executable, "bench.py"],
                              runs=2, **args)
    assert again.skipped == 2 and [c for c, _ in again.saved] == commits[3:5]
    groups = history.load(tmp_path / "store").series("jump").by_commit()
    assert [len(points) for _, points in groups] == [2, 2]


# A command measuring the benchmarks its first argument (JSON) names, at the commit's index
# in costs.json, each {"step": s (s slower from commit 12 on), "slowed": f (its first run at
# commit 12 on a core another tenant slowed f times all along; with "slowed_at": [k, ...],
# its runs k there), "noise": r (a commit's run k
# reads 1 + r * (-1)**k), "later": o (every run after the first PASSES reads o times: a later
# state of the machine)}; only those $OPBENCH_SELECT names when it is set, as opbench's
# plugin does. Its second argument is a folder where it counts runs.
_BENCH = """
import json, os, sys
from pathlib import Path
from opbench.core.measurement import Measurement, TaskSpec
from opbench.store import results

config, seen, passes = json.loads(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
index = json.loads(Path("costs.json").read_text())["index"]


def count(name):
    path = seen / name
    k = int(path.read_text()) if path.exists() else 0
    path.write_text(str(k + 1))
    return k


k, n = count(f"{index}.runs"), count("all.runs")
out = []
for name in json.loads(os.environ.get("OPBENCH_SELECT") or json.dumps(sorted(config))):
    c = config[name]
    slow = c.get("slowed", 1.0) if k in c.get("slowed_at", [0]) and index == 12 else 1.0
    level = 1e-6 * (1 + c.get("step", 0.0) * (index >= 12)) * (1 + c.get("noise", 0.0) * (-1) ** k)
    level *= c.get("later", 1.0) if n >= passes else 1.0
    signals = {"waits": [0.0] * 40, "slowdowns": [slow] * 40, "threads": 1, "cpus": 2}
    times = [level * slow * (1 + 0.001 * (j % 7)) for j in range(40)]
    out.append(Measurement(1, times, TaskSpec(name, "pass", name=name),
                           info={"disturbance": signals}))
results.save(out, os.environ["OPBENCH_RESULTS_FILE"])
"""


def _bench(tmp_path: Path, config: dict, passes: int = 0) -> list[str]:
    """The command running ``_BENCH`` with ``config``, counting its runs in tmp_path."""
    import json

    script, seen = tmp_path / "bench_config.py", tmp_path / "seen"
    seen.mkdir(parents=True, exist_ok=True)
    script.write_text(_BENCH)
    return [sys.executable, str(script), json.dumps(config), str(seen), str(passes)]


def test_a_benchmark_short_of_runs_at_full_speed_gets_make_up_runs(history_commits, tmp_path):
    repo, commits = history_commits
    command = _bench(tmp_path, {"jump": {"step": 0.15, "slowed": 1.7}, "flat_a": {}})
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


def test_a_step_in_doubt_gets_paired_rounds_that_settle_it(history_commits, tmp_path):
    repo, commits = history_commits
    # A 7.5% step at commit 12 against 1% run-to-run noise: two runs a side make it z = 3.4,
    # within the noise (5), in doubt. Every run after the passes reads 5% slower (the
    # machine later): runs added to commit 12 as levels would make a step of their own at
    # 12..13; in rounds the offset is in both runs of each, and the ratio is the step.
    config = {"small": {"step": 0.075, "noise": 0.01, "later": 1.05}, "flat": {"noise": 0.01}}
    command = _bench(tmp_path, config, passes=6)
    store = tmp_path / "store"
    lines: list[str] = []
    done = backfill.backfill([f"{commits[11]}..{commits[13]}"], command, runs=2, root=store,
                             repo=repo, progress=lines.append)
    # Six rounds (3 per run asked for) of "small" alone, its two commits in turn first.
    assert not done.failed and done.makeup == 0 and done.rounds == 6
    assert [c for c, _ in done.saved[6:]] == [commits[11], commits[12], commits[12],
                                              commits[11]] * 3
    assert lines[6].startswith(f"[round 1/12] {short_commit(commits[11])}.."
                               f"{short_commit(commits[12])}: 1 benchmark(s) with a step in "
                               "doubt: saved")
    h = history.load(store)
    assert {r.task_spec.name for run in h.runs if run.settles for r in run.results} == {"small"}
    series = h.series("small")
    # The rounds are no levels: each commit keeps its two runs.
    assert [len(pts) for _, pts in series.by_commit()] == [2, 2, 2]
    assert [len(pairs) for pairs in series.paired().values()] == [6]
    levels = series.detect(rounds={})
    step, = levels.changes
    assert not step.exceeds_noise and step.z >= changepoints.DOUBT_Z
    step, = series.detect().changes
    assert (step.start, step.end, step.exceeds_noise, step.rounds) == (0, 1, True, 6)
    assert step.z > 6 and step.size == pytest.approx(0.075, abs=0.001)
    assert history.evidence(step) == f"z={step.z:.1f} with 6 paired rounds"
    # Resuming: the rounds are no passes, and the step has its rounds.
    again = backfill.backfill([f"{commits[11]}..{commits[13]}"], command, runs=2, root=store,
                              repo=repo)
    assert again.skipped == 6 and not again.saved and again.rounds == 0
    # Without rounds the same step stays within the noise.
    off = backfill.backfill([f"{commits[11]}..{commits[13]}"], _bench(tmp_path / "off", config, 6),
                            runs=2, repo=repo, root=tmp_path / "other", settle=False)
    assert off.rounds == 0 and len(off.saved) == 6
    step, = history.load(tmp_path / "other").series("small").detect().changes
    assert not step.exceeds_noise


def test_a_run_of_a_round_on_a_slowed_core_is_made_again_for_what_it_slowed(history_commits,
                                                                           tmp_path):
    repo, commits = history_commits
    # The step in doubt of the test above; commit 12's runs 2 and 3 (its first round's, and
    # that run made again) on a core another tenant slowed 1.7 times all along, for "small".
    config = {"small": {"step": 0.075, "noise": 0.01, "slowed": 1.7, "slowed_at": [2, 3]},
              "flat": {"noise": 0.01}}
    store = tmp_path / "store"
    lines: list[str] = []
    done = backfill.backfill([f"{commits[11]}..{commits[13]}"], _bench(tmp_path, config), runs=2,
                             root=store, repo=repo, progress=lines.append)
    # Round 1 ran 11, then 12 three times: slowed, slowed again, then at full speed; the
    # other rounds ran once a side. Every round counts, none more were tried.
    assert not done.failed and done.rounds == 6 and done.again == 2
    assert [c for c, _ in done.saved[6:10]] == [commits[11]] + [commits[12]] * 3
    where = f"[round 1/12] {short_commit(commits[11])}..{short_commit(commits[12])}"
    assert lines[8].startswith(f"{where}: 1 benchmark(s) with a step in doubt: again 1/2 at "
                               f"{short_commit(commits[12])}, 1 on a slowed core: saved")
    assert lines[9].startswith(f"{where}: 1 benchmark(s) with a step in doubt: again 2/2 at ")
    series = history.load(store).series("small")
    pairs, = series.rounds.values()
    assert len(pairs) == 6 and len(history.counted_rounds(pairs)) == 6
    step, = series.detect().changes
    assert step.exceeds_noise and step.rounds == 6
    assert step.size == pytest.approx(0.075, abs=0.001)
    # Made again no more than _AGAIN times: a run slowed three times leaves its round out.
    config["small"]["slowed_at"] = [2, 3, 4]
    done = backfill.backfill([f"{commits[11]}..{commits[13]}"],
                             _bench(tmp_path / "b", config), runs=2, root=tmp_path / "b" / "store",
                             repo=repo)
    assert done.again == 2 and done.rounds == 7
    pairs, = history.load(tmp_path / "b" / "store").series("small").rounds.values()
    assert len(pairs) == 7 and len(history.counted_rounds(pairs)) == 6


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
                          "--no-settle", "--", sys.executable, "bench.py"], cwd=repo,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[3/3]" in run.stdout
    assert "3 run(s) saved over 3 commit(s) (0 make-up, 0 paired round(s))" in run.stdout
    shown = subprocess.run([sys.executable, "-m", "opbench", "history", "jump", "--root",
                            str(store)], capture_output=True, text=True, timeout=120)
    assert f"{short_commit(commits[12])}  -" in shown.stdout and "change 12" in shown.stdout
    bad = subprocess.run([sys.executable, "-m", "opbench", "history", "run", "--root",
                          str(store), "--", "true"], cwd=repo, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "give the revisions to run" in bad.stderr
