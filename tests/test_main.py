"""opbench.__main__: ``python -m opbench`` is the command line."""
from __future__ import annotations

import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opbench", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_help_lists_the_commands() -> None:
    proc = _run("--help")
    assert proc.returncode == 0
    for command in ("timeit", "compare", "show", "demo"):
        assert command in proc.stdout


def test_a_bad_command_exits_with_a_usage_error() -> None:
    proc = _run("no-such-command")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_timeit_runs_from_the_module() -> None:
    proc = _run("timeit", "-n", "100", "-r", "2", "x = 1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("x = 1\n  Median: ")
    assert "2 measurements, 100 runs per measurement" in proc.stdout
