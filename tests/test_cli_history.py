"""``opbench history`` (opbench.integrations.cli.history): a machine's runs, their change
points and the regressions that fail a CI job, over history_repo's 30 measured commits
(run as the user runs it: ``python -m opbench``); the options checked in process."""
from __future__ import annotations

import subprocess
import sys

import pytest

import history_repo
from opbench._text import short_commit
from opbench.integrations.cli import main
from opbench.store import baselines


def opbench_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbench", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def short(commit: str) -> str:
    return short_commit(commit)


def test_regressions_names_the_step_and_the_drift_at_their_commits_and_nothing_else(measured_history):
    store, commits = measured_history
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


def test_regressions_below_the_threshold_pass(measured_history):
    r = opbench_cli("history", "--root", str(measured_history[0]), "--regressions", "--threshold", "20%")
    assert r.returncode == 0, r.stderr
    assert [line.split()[0] for line in r.stdout.splitlines()] == ["slower", "slower"]


def test_history_lists_a_benchmarks_runs_in_commit_order(measured_history):
    store, commits = measured_history
    r = opbench_cli("history", "--root", str(store), "jump")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("  ")
            and not line.strip().startswith("change:")]
    # One line per commit: commit, tag (none here), its one run, its value, the subject.
    assert [row[0] for row in rows] == [short(c) for c in commits]
    assert {tuple(row[1:4]) for row in rows} == {("-", "1", "run(s)")}
    assert rows[0][-2:] == ["change", "0"] and rows[-1][-2:] == ["change", "29"]
    each = opbench_cli("history", "--root", str(store), "jump", "--each-run")
    runs = [line.split() for line in each.stdout.splitlines() if line.startswith("  ")
            and not line.strip().startswith("change:")]
    assert [row[1] for row in runs] == [short(c) for c in commits]
    assert {row[2] for row in runs} == {"main"}
    changes = [line for line in r.stdout.splitlines() if "change:" in line]
    beyond = [line for line in changes if "beyond the noise" in line]
    assert len(beyond) == 1 and "step +15." in beyond[0]
    assert f"{short(commits[11])}..{short(commits[12])}" in beyond[0]
    assert all("within the noise" in line for line in changes if line not in beyond)


def test_an_unknown_benchmark_is_named_with_those_there(measured_history):
    r = opbench_cli("history", "--root", str(measured_history[0]), "nope")
    assert r.returncode == 2
    assert "'nope'" in r.stderr and "creep, flat_a, flat_b, jump" in r.stderr


def test_no_history_says_how_to_make_one(tmp_path):
    r = opbench_cli("history", "--root", str(tmp_path))
    assert r.returncode == 2 and "--autosave" in r.stderr


def test_prune_from_the_command_line(measured_store):
    store = measured_store
    r = opbench_cli("history", "--root", str(store), "--prune-keep", "5", "jump")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("pruned 25 run(s)") and len(baselines.runs(store)) == 5



def test_another_machine_is_named_with_the_machines_there(measured_history, capsys):
    root = str(measured_history[0])
    assert main(["history", "--root", root, "--machine", "elsewhere", "jump"]) == 2
    err = capsys.readouterr().err
    assert "no saved runs of machine elsewhere" in err
    assert f"machines there: {baselines.machine_id()}; --machine picks one" in err


@pytest.mark.parametrize("args, message", [
    (["--threshold", "five"], "--threshold must look like '5%' or '0.05'"),
    (["--threshold", "150%"], "--threshold must be between 0% and 100%"),
    (["--prune-keep", "-1"], "--prune-keep must be >= 0, got -1"),
])
def test_bad_options_are_named_and_prune_nothing(measured_store, capsys, args, message):
    before = baselines.runs(measured_store)
    assert main(["history", "--root", str(measured_store), *args]) == 2
    assert message in capsys.readouterr().err
    assert baselines.runs(measured_store) == before


def test_pruning_everything_is_not_an_error(measured_store, capsys):
    assert main(["history", "--root", str(measured_store), "--prune-older-than", "0"]) == 0
    assert capsys.readouterr().out.startswith("pruned 30 run(s)")
    assert baselines.runs(measured_store) == []


def test_control_characters_of_names_never_reach_the_terminal(tmp_path, monkeypatch, capsys):
    """Issue 34: the history's benchmark names, branches and commits are shown with their
    control characters as escapes."""
    import hostile

    root = hostile.history(tmp_path / "store", monkeypatch)
    machine = baselines.machine_id()
    for args in ([], ["--regressions", "--z", "0.1"]):
        main(["history", "--root", str(root), "--machine", machine, *args])
        out = capsys.readouterr().out
        assert not hostile.TERMINAL_CONTROLS.search(out), repr(out)
    main(["history", "--root", str(root), "--machine", machine])
    out = capsys.readouterr().out
    assert "\\x1b[2J\\x1b]0;title\\x07" in out
    assert "fake\\n### opbench: no regression" in out  # no line of a name's


def _synthetic_history(root, levels: dict[str, list[float]], runs: int = 3) -> list[str]:
    """A history saved directly: per commit ``runs`` runs of each benchmark at its level
    (tiny, deterministic noise); commit i is tagged ``v0.<i>``. Returns the commits."""
    from opbench.core.measurement import Measurement, TaskSpec

    commits = [f"{i + 1:040x}" for i in range(len(next(iter(levels.values()))))]
    for r in range(runs):
        for i, commit in enumerate(commits):
            git = {"commit": commit, "branch": None, "dirty": False, "position": i + 1,
                   "commit_time": f"2026-01-01T00:{i:02d}:00Z", "subject": f"release {i}",
                   "tags": [f"v0.{i}"]}
            ms = [Measurement(1, [v * 1e-6 * (1 + 0.002 * ((r + i + k) % 3 - 1)) for k in range(40)],
                              TaskSpec("f()", "pass", name=name)) for name, lv in levels.items()
                  for v in [lv[i]]]
            baselines.autosave(ms, root=root, git=git)
    return commits


def test_regressions_list_what_still_holds_and_name_what_was_fixed(tmp_path, capsys):
    commits = _synthetic_history(tmp_path, {
        "stepped": [1.0] * 4 + [1.2] * 4,
        "spiky": [1.0] * 4 + [1.8] + [1.0] * 3,
    })
    status = main(["history", "--root", str(tmp_path), "--regressions"])
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert status == 1 and "1 change(s) up of 5.0% or more still hold" in out.err
    assert lines[0].startswith("REGRESSION  stepped  (time)  step +20.0%")
    assert f"commits {short_commit(commits[3])}..{short_commit(commits[4])} (v0.3..v0.4)" in lines[0]
    assert lines[0].endswith("still +20.0% at the latest commit")
    assert lines[1].startswith("fixed       spiky  (time)  step +80.0%")
    assert lines[1].endswith(f"undone at {short_commit(commits[4])}..{short_commit(commits[5])} (v0.4..v0.5) "
                             "(step -44.4%)")
    assert lines[2].startswith("faster      spiky  (time)  step -44.4%") and len(lines) == 3
    shown = main(["history", "--root", str(tmp_path), "spiky"])
    text = capsys.readouterr().out
    assert shown == 0 and "up to 3 run(s) a commit" in text
    assert f"  {short_commit(commits[4])}  v0.4" in text and "3 run(s)" in text and "release 4" in text


def test_a_commits_line_and_its_steps_rounds_show_the_runs_that_count(tmp_path, capsys):
    # Commit 1's first run shared its core (1.7x): its value and range are its other run's.
    # Four rounds at 1..2, one of them with a slowed run: three count, 6% faster.
    from history_runs import save

    for rep in range(2):
        for commit in range(3):
            slowed = commit == 1 and rep == 0
            save(tmp_path, commit, {"a": (1.7 if slowed else 1.0) * (0.94 if commit == 2 else 1.0)
                                    * (1 + 0.01 * rep) * 1e-6},
                 slowdowns=1.7 if slowed else 1.0, speed_ns=1000)
    for number in range(4):
        save(tmp_path, 1, {"a": 1.2e-6}, slowdowns=1.0, speed_ns=1000, settles=(1, 2, number))
        slowed = number == 3
        save(tmp_path, 2, {"a": 1.2e-6 * 0.94 * (1.7 if slowed else 1.0)},
             slowdowns=1.6 if slowed else 1.0, speed_ns=1000, settles=(1, 2, number))
    assert main(["history", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("\na (time,") and "\\n" not in out
    line = next(x for x in out.splitlines() if x.startswith(f"  {short(f'{2:040x}')}"))
    count, value, low, high = (float(line.split()[i].strip("[,]")) for i in (2, 4, 6, 8))
    assert count == 2 and low <= value <= high < 1.1  # not the slowed run's interval
    rounds = [x for x in out.splitlines() if x.startswith("  rounds ")]
    assert rounds == [f"  rounds {short(f'{2:040x}')}..{short(f'{3:040x}')}: 3 of 4 at full speed, "
                      "after/before -6.0% [-6.0%, -6.0%]"]
    assert main(["history", "--root", str(tmp_path), "--each-run"]) == 0
    each = capsys.readouterr().out.splitlines()
    shown = each[each.index(rounds[0]) + 1:][:4]
    assert [x.split()[-1] for x in shown] == ["-6.0%"] * 3 + ["core"]
    assert shown[-1].endswith("+59.8%  on a slowed core")
