"""opbench.revisions.session (``opbench ab``) end to end on a real git repository made here: two
commits' worth of code, statements with deterministic costs (no timing thresholds)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import PYTEST_PLUGIN_ARGS
from opbench.core.measurement import Measurement, TaskSpec
from opbench.gate.rounds import decide_rounds
from opbench.revisions import RevisionError
from opbench.revisions.session import run_ab
from opbench.store.results import Results
from test_checkout import SCRIPT, git

# Benchmarks on a fake clock that only the statement moves: every block costs exactly
# number x COST, whatever the machine does.
SUITE = textwrap.dedent("""
    import mylib

    class Clock:
        now = 0.0

        def __call__(self):
            return Clock.now

    def tick(cost):
        Clock.now += cost

    def test_work(opbench):
        opbench(lambda: tick(mylib.COST), timer=Clock(), min_run_time=1e-3, min_samples=5)

    def test_lenient(opbench):
        opbench(lambda: tick(mylib.LENIENT), timer=Clock(), min_run_time=1e-3, min_samples=5,
                threshold="30%")
""")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The base commit (COST 1 us); the working tree edits it as each test needs."""
    root = tmp_path / "proj"
    (root / "src" / "mylib").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "src" / "mylib" / "__init__.py").write_text("COST = 1e-6\nLENIENT = 1e-6\n")
    (root / "bench.py").write_text(SCRIPT)
    (root / "test_suite.py").write_text(SUITE)
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    monkeypatch.chdir(root)
    return root


def edit(repo: Path, cost: float, lenient: float = 1e-6) -> None:
    (repo / "src" / "mylib" / "__init__.py").write_text(f"COST = {cost!r}\nLENIENT = {lenient!r}\n")


PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PYTEST_PLUGIN_ARGS,
          "test_suite.py"]


def test_pytest_suite_takes_turns_and_stops_early(repo: Path) -> None:
    edit(repo, 2e-6, lenient=1.2e-6)  # 2x slower; 20% slower under its own 30% threshold
    report = run_ab(PYTEST, "HEAD", rounds=4, wave=2, log=None)
    assert report.interleave == "turns" and report.wave == 2
    assert (report.rounds, report.stopped_early) == (2, True)  # decided after the first wave
    rows = {r.key: r for r in report.gate.rows}
    work, lenient = rows["test_suite.py::test_work"], rows["test_suite.py::test_lenient"]
    assert work.status == "regression" and work.decision.ratio == pytest.approx(2.0)
    assert work.runs == (2, 2)
    assert lenient.status == "same" and lenient.decision.threshold == 0.3
    assert report.exit_status == 1
    assert report.base.commit == git(repo, "rev-parse", "HEAD")
    assert report.head.commit.endswith("+dirty")
    text = report.text()
    assert "FAILED: 1 regression in 2 benchmark(s)." in text
    assert "taking turns to time" in text and "stopped early" in text


def test_unchanged_code_is_the_same(repo: Path) -> None:
    report = run_ab(PYTEST, "HEAD", rounds=4, wave=2, log=None)
    assert {r.status for r in report.gate.rows} == {"same"}
    assert report.exit_status == 0 and report.stopped_early


def test_by_default_one_wave_of_three_pairs_runs_at_once(repo: Path) -> None:
    edit(repo, 1.5e-6)
    report = run_ab(PYTEST, "HEAD", log=None)
    assert (report.rounds, report.max_rounds, report.wave) == (3, 3, 3)
    assert not report.stopped_early  # one wave: one look, at the end
    assert "3 base and 3 head processes at once, taking turns to time" in report.text()
    assert json.loads(report.json())["wave"] == 3
    # One wave: the runs are replicates in one block, 2 x 3 - 2 degrees of freedom.
    assert "in 1 wave(s) of process pairs, each run a replicate" in report.gate.method
    work = {r.key: r for r in report.gate.rows}["test_suite.py::test_work"]
    assert work.status == "regression" and work.runs == (3, 3)


def test_a_script_runs_one_after_the_other_in_abba_order(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    (repo / "bench.py").write_text(
        f"import mylib\nopen({str(log)!r}, 'a').write(str(mylib.COST) + '\\n')\n" + SCRIPT)
    git(repo, "commit", "-qam", "log the order")
    edit(repo, 3e-6)
    report = run_ab([sys.executable, "bench.py"], "HEAD", rounds=3, interleave="runs",
                    log=None)
    assert report.interleave == "runs" and report.rounds == 2  # stopped early
    assert log.read_text().split() == ["1e-06", "3e-06", "3e-06", "1e-06"]  # AB BA
    assert report.gate.rows[0].status == "regression"


def test_a_failed_run_is_reported_and_its_round_not_counted(repo: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "count"
    (repo / "bench.py").write_text(textwrap.dedent(f"""
        import os
        path = {str(counter)!r}
        n = int(open(path).read()) + 1 if os.path.exists(path) else 1
        open(path, "w").write(str(n))
        if n == 3:
            raise SystemExit("boom on the third run")
    """) + SCRIPT)
    git(repo, "commit", "-qam", "flaky")
    edit(repo, 2e-6)
    report = run_ab([sys.executable, "bench.py"], "HEAD", rounds=3, interleave="runs", log=None)
    assert [(f.side, f.round) for f in report.failed] == [("head", 2)]
    assert "exited with status 1" in report.failed[0].problem
    assert "boom on the third run" in report.failed[0].problem
    assert report.rounds == 2  # rounds 1 and 3
    assert report.gate.rows[0].runs == (2, 2)
    assert "Runs that failed (not counted, nor their round): 1" in report.text()


def test_no_complete_round_fails_with_nothing_compared(repo: Path) -> None:
    report = run_ab([sys.executable, "-c", "raise SystemExit(2)"], "HEAD", rounds=2,
                    interleave="runs", log=None)
    assert report.gate is None and report.exit_status == 1 and len(report.failed) == 4
    assert "nothing was compared" in report.text()


def test_ctrl_c_keeps_the_rounds_that_finished(repo: Path, tmp_path: Path) -> None:
    counter, marker = tmp_path / "count", tmp_path / "hanging"
    (repo / "bench.py").write_text(textwrap.dedent(f"""
        import os, time
        path = {str(counter)!r}
        n = int(open(path).read()) + 1 if os.path.exists(path) else 1
        open(path, "w").write(str(n))
        if n >= 3:
            open({str(marker)!r}, "w").close()
            time.sleep(120)
    """) + SCRIPT)
    git(repo, "commit", "-qam", "hangs from the third run")
    edit(repo, 2e-6)
    proc = subprocess.Popen([sys.executable, "-m", "opbench", "ab", "--base", "HEAD",
                             "--rounds", "4", "--interleave", "runs", "--format", "json",
                             "--", sys.executable, "bench.py"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["interrupted"] is True and doc["rounds"] == 1
    assert doc["gate"]["rows"][0]["runs"] == [1, 1]  # round 1 kept, reported
    assert "interrupted" in err
    assert git(repo, "worktree", "list").count("\n") == 0  # the base's worktree removed


def test_ctrl_c_in_a_wave_keeps_the_rounds_whose_runs_finished(repo: Path, tmp_path: Path) -> None:
    marker, keep = tmp_path / "hanging", tmp_path / "runs"
    # Both runs of round 3 hang after timing (their results file names the round).
    (repo / "test_suite.py").write_text(SUITE + textwrap.dedent(f"""
        import os, time

        def test_zz_hang():
            if "round3_" in os.environ.get("OPBENCH_RESULTS_FILE", ""):
                open({str(marker)!r}, "a").close()
                time.sleep(120)
    """))
    git(repo, "commit", "-qam", "round 3 hangs")
    edit(repo, 2e-6)
    proc = subprocess.Popen([sys.executable, "-m", "opbench", "ab", "--base", "HEAD",
                             "--format", "json", "--keep", str(keep), "--", *PYTEST], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finished = [keep / f"round{r}_{side}.json" for r in (1, 2) for side in ("base", "head")]

    def rounds_1_and_2_running() -> bool:  # their --basetemp names them
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"round1_" in cmdline or b"round2_" in cmdline:
                return True
        return False

    deadline = time.monotonic() + 120
    # Ctrl-C once rounds 1 and 2 wrote their files and their processes exited.
    while not (marker.exists() and all(f.exists() for f in finished)
               and not rounds_1_and_2_running()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists() and all(f.exists() for f in finished)
    assert not rounds_1_and_2_running()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["interrupted"] is True and doc["rounds"] == 2 and doc["failed_runs"] == []
    work = [r for r in doc["gate"]["rows"] if r["key"] == "test_suite.py::test_work"]
    assert work[0]["runs"] == [2, 2]


@pytest.mark.slow  # valgrind
def test_instruction_mode_decides_in_one_round_and_names_the_function(repo: Path) -> None:
    (repo / "test_count.py").write_text(textwrap.dedent("""
        import mylib

        DATA = [0] * mylib.N  # small ints only: no allocation, so repeats count alike

        def work():
            flag = 0
            for _ in DATA:
                flag ^= 1
            return flag

        def test_loop(opbench):
            opbench(work)
    """))
    (repo / "src" / "mylib" / "__init__.py").write_text("N = 2000\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "a loop")
    (repo / "src" / "mylib" / "__init__.py").write_text("N = 2020\n")  # 1% more work
    command = [*PYTEST[:-1], "test_count.py"]
    report = run_ab(command, "HEAD", rounds=5, mode="instructions", threshold=0.005, log=None)
    assert report.rounds == 1 and report.interleave == "concurrent"
    (row,) = report.gate.rows
    assert row.status == "regression" and row.decision.ratio == pytest.approx(1.01, abs=0.003), \
        row.decision
    ((key, changes),) = report.functions
    assert key == "test_count.py::test_loop" and 0 < len(changes) <= 15
    top = changes[0]
    assert top.group == "Python interpreter" and top.exclusive_change > 0
    assert "Where" in report.text() and top.short_name in report.text()
    # The Python function whose own cost changed heads the Python table, by name and line.
    ((key, python),) = report.python_functions
    assert key == "test_count.py::test_loop" and python[0].function == "test_count.py:work"
    assert python[0].short_name == "work (test_count.py:6)" and python[0].exclusive_change > 0
    text = report.text()
    assert text.index("Python functions whose own") < text.index("Native functions")


@pytest.mark.slow  # two pytest sessions, each re-run with the allocation counter
def test_memory_mode_decides_in_one_round_and_catches_one_more_allocation(repo: Path) -> None:
    from opbench.memory import counter

    if counter.unavailable_reason() is not None:
        pytest.skip(counter.unavailable_reason())
    (repo / "test_mem.py").write_text(textwrap.dedent("""
        import mylib

        def test_copy(opbench):
            xs = [0] * 100
            opbench(lambda: mylib.work(xs))
    """))
    (repo / "src" / "mylib" / "__init__.py").write_text("def work(xs):\n    return xs[:]\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "a copy")
    (repo / "src" / "mylib" / "__init__.py").write_text(
        "def work(xs):\n    return xs[:] + [0]\n")  # one more list, and its items
    report = run_ab([*PYTEST[:-1], "test_mem.py"], "HEAD", rounds=3, mode="memory", log=None)
    assert report.rounds == 1 and report.interleave == "concurrent" and report.mode == "memory"
    rows = {r.key: r for r in report.gate.rows}
    assert rows["test_mem.py::test_copy [allocations]"].status == "regression"
    assert report.exit_status == 1 and "memory counts do not depend on load" in report.text()


def test_decisions_hold_the_suite_error_with_holm(tmp_path: Path) -> None:
    """Ten unchanged benchmarks with run-to-run noise: Holm's levels make every interval
    wider than a lone 95% one, so a suite of them is not decided on noise."""
    def results(side: int, r: int) -> Results:
        ms = []
        for k in range(10):
            wobble = 1 + 0.03 * ((k * 7 + r * 3 + side * 5) % 5 - 2) / 2
            ms.append(Measurement(1, [1e-6 * wobble] * 5, TaskSpec("f()", "pass", name=f"b{k}")))
        return Results(ms)

    rounds = [(results(0, r), results(1, r)) for r in range(5)]
    report = decide_rounds(rounds, threshold=0.05, confidence=0.95, inconclusive="fail",
                           look=4, looks=4)
    assert len(report.rows) == 10
    assert all(r.decision.confidence > 0.95 for r in report.rows)
    assert report.exit_status == 0
    assert "Holm's step-down over 10 benchmark(s) at look 4 of 4" in report.text()


def test_bad_arguments_are_named(repo: Path) -> None:
    with pytest.raises(ValueError, match="rounds must be a positive integer"):
        run_ab(PYTEST, "HEAD", rounds=0, log=None)
    with pytest.raises(ValueError, match="no command"):
        run_ab([], "HEAD", log=None)
    with pytest.raises(RevisionError, match="names no commit"):
        run_ab(PYTEST, "no-such-rev", log=None)
    assert os.getcwd() == str(repo)


def test_each_run_gives_its_fast_tail_or_its_median() -> None:
    """Runs on a shared machine: the code alone (fast) or sharing a core (5x), in a mix that
    changes from run to run. The 10th percentile follows the code; the median, the mix."""
    def run(fast: float, slow_share: float, r: int) -> Results:
        n_slow = round(20 * slow_share)
        times = [fast * (1 + 0.001 * i) for i in range(20 - n_slow)] + [5 * fast] * n_slow
        return Results([Measurement(1, times, TaskSpec("f()", "pass", name="f"))])

    rounds = [(run(1e-6, 0.3, r), run(1.1e-6, 0.6 if r % 2 else 0.2, r)) for r in range(4)]
    kwargs = dict(threshold=0.05, confidence=0.95, inconclusive="fail", look=3, looks=3)
    (fast,) = decide_rounds(rounds, statistic="p10", **kwargs).rows  # type: ignore[arg-type]
    (middle,) = decide_rounds(rounds, statistic="median", **kwargs).rows  # type: ignore[arg-type]
    assert fast.decision.ratio == pytest.approx(1.1, rel=0.01) and fast.status == "regression"
    assert middle.decision.verdict == "inconclusive"  # the mix swings the medians 1x to 5x
    with pytest.raises(ValueError, match="statistic must be one of p10, median"):
        run_ab(PYTEST, "HEAD", statistic="mean", log=None)


def test_a_side_whose_opbench_has_no_turns_is_told_apart(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from opbench.revisions.waves import speaks_turns

    def side(root: Path, turns: str | None) -> SimpleNamespace:
        """An opbench whose turns module is at ``turns`` (None: it has none)."""
        (root / "opbench" / "gate").mkdir(parents=True)
        (root / "opbench" / "__init__.py").write_text("")
        if turns is not None:
            (root / "opbench" / turns).parent.mkdir(parents=True, exist_ok=True)
            (root / "opbench" / turns).write_text("")
        env = {**os.environ, "PYTHONPATH": str(root)}
        return SimpleNamespace(path=root, environment=lambda: env)

    # Revisions before opbench.revisions kept the module in gate/: they take turns too.
    assert speaks_turns([side(tmp_path / "old", None), side(tmp_path / "gate", "gate/turns.py"),
                         side(tmp_path / "new", "revisions/turns.py")]) == [False, True, True]


def _round(values: dict[str, float], waits: float = 0.0, slowdown: float | None = None) -> Results:
    """One run: each benchmark's blocks at its value (40 of them, a tight spread); ``waits``:
    the share of each block its thread waited for a CPU (1: disturbed all along);
    ``slowdown``: what the speed probe read around every block (a process at 1000 ns)."""
    info: dict = {"disturbance": {"waits": [waits] * 40, "threads": 1, "cpus": 2}}
    if slowdown is not None:
        info["disturbance"].update(slowdowns=[slowdown] * 40, speed_ns=1000)
    return Results([Measurement(1, [v * (1 + 0.0005 * (i % 9)) for i in range(40)],
                                TaskSpec("f()", "pass", name=k), info=dict(info))
                    for k, v in values.items()])


def test_the_columns_are_the_runs_geometric_means_and_divide_to_the_ratio() -> None:
    rounds = [(_round({"f": b}), _round({"f": h})) for b, h in
              ((1.0e-6, 1.21e-6), (1.02e-6, 1.19e-6), (0.98e-6, 1.22e-6))]
    (row,) = decide_rounds(rounds, threshold=0.05, confidence=0.95, inconclusive="fail",
                           look=1, looks=1, blocks=[0, 0, 0]).rows
    assert row.new / row.baseline == pytest.approx(row.decision.ratio)
    assert row.status == "regression"


def test_an_unchanged_pair_is_the_same_where_the_interval_allows() -> None:
    rounds = [(_round({k: b for k in ("a", "b", "c")}), _round({k: h for k in ("a", "b", "c")}))
              for b, h in ((1.0e-6, 1.01e-6), (1.03e-6, 0.99e-6), (0.97e-6, 1.0e-6))]
    report = decide_rounds(rounds, threshold=0.05, confidence=0.95, inconclusive="fail",
                           look=1, looks=1, blocks=[0, 0, 0])
    # Holm's level over three benchmarks (99.2%) straddles 5% on four degrees of freedom;
    # each one's equivalence test (its 90% interval) does not.
    assert [r.status for r in report.rows] == ["same"] * 3
    assert all(r.decision.confidence == 0.9 and r.decision.ci[1] < 1.05 for r in report.rows)
    assert "equivalence test at 95.0% (its 90% interval within the threshold)" in report.text()


def test_a_round_disturbed_all_along_cannot_make_a_verdict() -> None:
    """Issue 38: one disturbed round made "faster 0.558" of an unchanged pair."""
    good = [(_round({"f": 1e-6}), _round({"f": 1.0e-6 * s})) for s in (1.0, 1.01, 0.995, 1.005)]
    bad = (_round({"f": 1.8e-6}, waits=0.9), _round({"f": 1e-6}))  # base on a busy CPU
    kwargs = dict(threshold=0.05, confidence=0.95, inconclusive="fail", look=1, looks=1)
    kept = decide_rounds([*good, bad], **kwargs).rows[0]  # type: ignore[arg-type]
    assert kept.decision.verdict in ("same", "inconclusive") and kept.runs == (4, 4)
    report = decide_rounds([*good, bad], **kwargs)  # type: ignore[arg-type]
    assert "1 of 5 round(s) left out of the decision" in report.text()


def test_a_run_the_speed_probe_read_slowed_is_left_out_of_the_decision() -> None:
    """packaging 25.0 against 26.0 beside spinning processes: a head run at 2x the others,
    on a core the speed probe read 2.1x slow, left an +86% change inconclusive."""
    figures = ((20.9e-6, 130e-6, 2.1), (20.0e-6, 38.0e-6, 1.0), (19.7e-6, 38.4e-6, 1.0))
    rounds = [(_round({"f": b}, slowdown=1.0), _round({"f": h}, slowdown=s))
              for b, h, s in figures]
    kwargs = dict(threshold=0.05, confidence=0.95, inconclusive="fail", look=1, looks=1,
                  blocks=[0, 0, 0])
    report = decide_rounds(rounds, **kwargs)  # type: ignore[arg-type]
    (row,) = report.rows
    assert row.status == "regression" and row.runs == (2, 2)
    assert "1 of 3 round(s) left out of the decision" in report.text()
    # Read at full speed, the same figures are three rounds, and their scatter decides.
    even = [(_round({"f": b}, slowdown=1.0), _round({"f": h}, slowdown=1.0)) for b, h, _ in figures]
    (row,) = decide_rounds(even, **kwargs).rows  # type: ignore[arg-type]
    assert row.runs == (3, 3) and row.status == "inconclusive"
