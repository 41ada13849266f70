"""opbench.__main__: ``python -m opbench`` is the command line."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest


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


def test_the_module_runs_the_command_line_and_exits_with_its_status(monkeypatch, capsys) -> None:
    # In this process too (the subprocesses above run untraced by coverage).
    monkeypatch.setattr(sys, "argv", ["opbench", "no-such-command"])
    # What `python -m` does, by hand: runpy cannot take the code from pytest's assertion
    # rewriter, the package's loader where opbench is installed (it has the plugin); the
    # spec in the globals is how coverage knows the file as opbench.__main__.
    spec = importlib.util.find_spec("opbench.__main__")
    assert spec is not None and spec.origin is not None
    code = compile(Path(spec.origin).read_text(), spec.origin, "exec")
    with pytest.raises(SystemExit) as exited:
        exec(code, {"__name__": "__main__", "__spec__": spec, "__file__": spec.origin})
    assert exited.value.code == 2 and "invalid choice" in capsys.readouterr().err
