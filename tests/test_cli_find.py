"""``opbench find`` (opbench.integrations.cli.find): the command over opbench.revisions.bisection.

In process, with bisection.find replaced: its arguments, the report it prints and
its exit status. Then (slow: a git worktree per commit tested) the real command on
history_repo's 30 commits."""
from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

import history_repo
from opbench.integrations.cli import main
from opbench.revisions import RevisionError, bisection


@pytest.fixture
def fake_find(monkeypatch):
    """bisection.find replaced: records its call, then returns (or raises) ``answer[0]``."""
    calls: list[tuple[tuple, dict]] = []
    answer: list[object] = []

    def find(*args, **kwargs):
        calls.append((args, kwargs))
        if isinstance(answer[0], BaseException):
            raise answer[0]
        return answer[0]

    monkeypatch.setattr(bisection, "find", find)
    return calls, answer


def found(*, uncertain: bool = False) -> bisection.Bisection:
    good = bisection.Probe("a" * 40, "change 11", [1.0, 1.0, 1.0], "good")
    bad = bisection.Probe("b" * 40, "change 12", [1.15, 1.15, 1.15], "bad")
    middle = bisection.Probe("c" * 40, "change 6", [1.07], "good", uncertain=uncertain)
    return bisection.Bisection("jump", first_bad=bad, last_good=good, size=0.15, noise=0.004,
                               probes=[good, bad, middle])


def test_find_passes_its_options_and_prints_the_commit(fake_find, capsys):
    calls, answer = fake_find
    answer.append(found())
    assert main(["find", "--runs", "2", "--max-runs", "6", "--timeout", "30", "--prepare",
                 "pip install -e .", "jump", "v1", "v2", "--", "python", "bench.py"]) == 0
    ((args, kwargs),) = calls
    assert args == ("jump", "v1", "v2", ["python", "bench.py"])
    assert kwargs == dict(runs=2, max_runs=6, timeout=30.0, prepare=["pip", "install", "-e", "."],
                          progress=print)
    out = capsys.readouterr().out
    assert f"first commit at the new level (+15.0%): {'b' * 40} change 12" in out
    assert f"last at the old level: {'a' * 40} change 11" in out
    assert "1 bisection step(s), 3 commits measured" in out and "noise 0.40%" in out
    assert "warning" not in out


def test_options_after_bad_are_options_not_part_of_the_command(fake_find):
    # The usage line's order, `find BENCHMARK GOOD BAD [options] -- COMMAND`: argparse's
    # REMAINDER once took `--runs 2` as the start of COMMAND and ran with runs=1.
    calls, answer = fake_find
    answer.append(found())
    assert main(["find", "jump", "v1", "v2", "--runs", "2", "--max-runs", "6", "--",
                 "python", "-m", "pytest", "--runs", "9"]) == 0
    ((args, kwargs),) = calls
    assert args == ("jump", "v1", "v2", ["python", "-m", "pytest", "--runs", "9"])
    assert (kwargs["runs"], kwargs["max_runs"]) == (2, 6)


def test_an_uncertain_probe_is_warned_about(fake_find, capsys):
    fake_find[1].append(found(uncertain=True))
    assert main(["find", "jump", "v1", "v2", "--", "python", "bench.py"]) == 0
    assert "warning: some commits stayed within the noise" in capsys.readouterr().out


def test_no_step_exits_1_and_other_failures_are_usage_errors(fake_find, capsys):
    answer = fake_find[1]
    answer.append(bisection.BisectError("no step in 'jump' between v1 and v2"))
    assert main(["find", "jump", "v1", "v2", "--", "python", "bench.py"]) == 1
    assert "opbench find: no step in 'jump'" in capsys.readouterr().out
    for error in (bisection.BisectError("no benchmark 'nope' in the results"),
                  RevisionError("no-such-rev: unknown revision")):
        answer[0] = error
        assert main(["find", "nope", "v1", "no-such-rev", "--", "python", "bench.py"]) == 2
        assert f"error: {error}" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--runs", "0"], "need 1 <= --runs <= --max-runs"),
    (["--runs", "4", "--max-runs", "3"], "need 1 <= --runs <= --max-runs"),
    (["--max-runs", "1"], "--max-runs >= 2"),
    ([], "give the command after --"),
])
def test_bad_options_are_refused_before_anything_runs(fake_find, capsys, args, message):
    command = ["--", "python", "bench.py"] if args else []
    assert main(["find", *args, "jump", "v1", "v2", *command]) == 2
    assert message in capsys.readouterr().err and fake_find[0] == []


def find(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbench", "find", *args], cwd=repo,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow  # git worktrees of each commit tested
def test_find_names_the_slow_commit_in_log2_n_steps(history_commits):
    path, commits = history_commits
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


@pytest.mark.slow  # git worktrees of each commit tested
def test_no_step_between_good_and_bad_exits_1(history_commits):
    path, commits = history_commits
    r = find(path, "flat_a", commits[0], commits[-1], "--", sys.executable, "bench.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no step in 'flat_a'" in r.stdout and "beyond the noise" in r.stdout


@pytest.mark.slow  # git worktrees of each commit tested
@pytest.mark.parametrize("args, message", [
    (("nope", "{0}", "{1}"), "no benchmark 'nope'"),
    (("jump", "{1}", "{0}"), "is not an ancestor"),
    (("jump", "{0}", "no-such-rev"), "no-such-rev"),
])
def test_bad_input_exits_2_naming_it(history_commits, args, message):
    path, commits = history_commits
    filled = [a.format(commits[0], commits[-1]) for a in args]
    r = find(path, *filled, "--", sys.executable, "bench.py")
    assert r.returncode == 2 and message in r.stderr, r.stdout + r.stderr


@pytest.mark.slow  # git worktrees of each commit tested
def test_a_failing_command_is_named(history_commits):
    path, commits = history_commits
    r = find(path, "jump", commits[0], commits[-1], "--", sys.executable, "-c", "raise SystemExit(3)")
    assert r.returncode == 2 and "exited with status 3" in r.stderr


def test_no_command_is_a_usage_error(history_commits):
    path, commits = history_commits
    r = find(path, "jump", commits[0], commits[-1])
    assert r.returncode == 2 and "give the command after --" in r.stderr


def _two_commit_repo(root: Path) -> Path:
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    root.mkdir()
    subprocess.run([*git, "init", "-q"], check=True)
    for n in (1, 2):
        (root / "m.py").write_text(f"X = {n}\n")
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", f"c{n}"], check=True)
    return root


def test_sigterm_removes_the_worktree_and_stops_the_command(tmp_path):
    """Issue 34: a CI runner's cancel (SIGTERM) during `find` left its worktree and the
    command's process (in a session of its own) running."""
    import os
    import signal
    import time

    repo = _two_commit_repo(tmp_path / "repo")
    marker = tmp_path / "started"
    command = [sys.executable, "-c", f"import os, time; open({str(marker)!r}, 'w').write("
               "f'{os.getpid()} {os.getcwd()}'); time.sleep(120)"]
    proc = subprocess.Popen([sys.executable, "-m", "opbench", "find", "b", "HEAD~1", "HEAD",
                             "--", *command], cwd=repo, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (marker.exists() and " " in marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid_text, worktree = marker.read_text().split(" ", 1)
    pid = int(pid_text)
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "interrupted" in err, err
        for _ in range(100):  # the command's group gets SIGINT, then SIGKILL
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert not Path(worktree).exists()
        listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"],
                                capture_output=True, text=True).stdout.splitlines()
        assert len(listed) == 1, listed
    finally:
        try:
            os.kill(pid, signal.SIGKILL)  # an orphan left by the unfixed command
        except ProcessLookupError:
            pass
