"""Every benchmark script and example runs (with --quick), so none can rot."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from conftest import standalone_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
@pytest.mark.slow
def test_benchmark_runs_quick(script):
    proc = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=standalone_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.strip(), "a benchmark must print its table"


@pytest.mark.slow
def test_demo_prints_a_compare_table():
    proc = subprocess.run(
        [sys.executable, "-m", "opbench", "demo", "--sizes", "1", "64", "--threads", "1",
         "--min-run-time", "0.01"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout  # piped: no colour codes by default
    lines = proc.stdout.splitlines()
    assert "Batched dot" in lines[0] and "mul/sum" in lines[1] and "bmm" in lines[1]
    assert sum("[64, 64]" in line for line in lines) == 1
    assert "Times are in" in proc.stdout


@pytest.mark.slow
def test_cli_errors_go_to_stderr():
    proc = subprocess.run([sys.executable, "-m", "opbench", "demo", "--min-run-time", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--min-run-time must be > 0" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "opbench", "nope"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
