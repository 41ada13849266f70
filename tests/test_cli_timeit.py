"""`python -m opbench timeit`: statements from the shell, statistics, --save, --callgrind, errors."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from opbench.results import load


def opbench_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbench", *args], check=False,
                          capture_output=True, text=True, timeout=120, env=env)


def test_times_statement_with_setup() -> None:
    r = opbench_cli("timeit", "-s", "xs = list(range(100))", "--min-run-time", "0.02",
                    "sorted(xs)")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith("<opbench.measurement.Measurement object at")
    assert lines[1:3] == ["sorted(xs)", "setup: xs = list(range(100))"]
    assert "runs per measurement, 1 thread" in r.stdout or "runs, 1 thread" in r.stdout


def test_number_and_repeat_join_lines(tmp_path) -> None:
    path = tmp_path / "t.json"
    r = opbench_cli("timeit", "-n", "10", "-r", "3", "-s", "x = 1", "-s", "y = 2",
                    "--threads", "2", "--label", "add", "--save", str(path), "z = x", "z + y")
    assert r.returncode == 0, r.stderr
    assert "3 measurements, 10 runs per measurement, 2 threads" in r.stdout
    assert f"saved to {path}" in r.stdout
    (m,) = load(path)
    assert (m.stmt, m.setup, m.label, m.num_threads) == ("z = x\nz + y", "x = 1\ny = 2", "add", 2)
    assert (m.number_per_run, len(m.raw_times)) == (10, 3)


def test_converge_verbose_describes() -> None:
    r = opbench_cli("timeit", "--converge", "50%", "--min-run-time", "0.02", "--verbose",
                    "sum(range(10))")
    assert r.returncode == 0, r.stderr
    assert "Median 95% CI:" in r.stdout and "Outliers" in r.stdout
    assert "Converged:" in r.stdout and "target 50.00%" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["x = ("], "stmt does not parse: '(' was never closed (line 1): x = ("),
    (["-s", "import", "pass"], "setup does not parse: invalid syntax (line 1): import"),
    (["-n", "0", "pass"], "--number must be a positive integer, got 0"),
    (["--converge", "150%", "pass"], "--converge must be between 0% and 100%"),
    (["--converge", "1%", "-n", "5", "pass"], "--converge chooses the block size itself"),
    (["--callgrind", "--save", "x.json", "pass"], "--callgrind counts instructions"),
    (["--min-run-time", "0", "pass"], "--min-run-time must be > 0"),
])
def test_bad_input_exits_2_on_stderr(args, message) -> None:
    r = opbench_cli("timeit", *args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert message in r.stderr and "usage: python -m opbench timeit" in r.stderr


def test_statement_that_raises_exits_1_with_traceback() -> None:
    r = opbench_cli("timeit", "-s", "d = {}", "d['missing']")
    assert r.returncode == 1
    assert "KeyError: 'missing'" in r.stderr
    assert "error: the statement raised KeyError" in r.stderr


def test_help_lists_options() -> None:
    r = opbench_cli("timeit", "--help")
    assert r.returncode == 0
    for option in ("--setup", "--number", "--min-run-time", "--threads", "--converge",
                   "--callgrind", "--save", "--verbose"):
        assert option in r.stdout


def test_callgrind_without_valgrind_is_a_clear_error(tmp_path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # an empty PATH: no valgrind on it
    r = opbench_cli("timeit", "--callgrind", "pass", env=env)
    assert r.returncode == 2
    assert "valgrind" in r.stderr and "not on PATH" in r.stderr
    assert r.stdout == ""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind on PATH")
def test_callgrind_counts_instructions() -> None:
    pytest.importorskip("opbench._C", reason="needs the native extension (tools/build-dev)")
    r = opbench_cli("timeit", "--callgrind", "-n", "10", "-s", "x = 1", "y = x + 1")
    assert r.returncode == 0, r.stderr
    assert "<opbench.callgrind.stats.CallgrindStats object at" in r.stdout
    assert "Instructions:" in r.stdout and "10 runs per measurement, 1 thread" in r.stdout
