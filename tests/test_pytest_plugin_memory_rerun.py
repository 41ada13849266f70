"""opbench.integrations.pytest_plugin.memory_rerun: memory mode re-runs the session with the
allocation counter preloaded and exits with its status; the re-run checks it has it."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import preloaded
from conftest import PYTEST_PLUGIN_ARGS
from opbench.integrations.pytest_plugin import memory_rerun
from opbench.memory import counter
from plugin_doubles import FakeConfig


def test_other_modes_disabled_runs_and_the_rerun_itself_run_here(monkeypatch):
    monkeypatch.delenv(memory_rerun._PRELOADED, raising=False)
    assert memory_rerun.rerun_with_counter(FakeConfig()) is None  # type: ignore[arg-type]
    disabled = FakeConfig(opbench_mode="memory", opbench_disable=True)
    assert memory_rerun.rerun_with_counter(disabled) is None  # type: ignore[arg-type]
    monkeypatch.setenv(memory_rerun._PRELOADED, "1")
    assert memory_rerun.rerun_with_counter(FakeConfig(opbench_mode="memory")) is None  # type: ignore[arg-type]


def test_xdist_and_a_missing_counter_are_usage_errors(monkeypatch):
    monkeypatch.delenv(memory_rerun._PRELOADED, raising=False)
    with pytest.raises(pytest.UsageError, match="drop -n"):
        memory_rerun.rerun_with_counter(FakeConfig(opbench_mode="memory", numprocesses=2))  # type: ignore[arg-type]
    monkeypatch.setattr(counter, "unavailable_reason", lambda: "not on this OS")
    with pytest.raises(pytest.UsageError, match="memory: not on this OS"):
        memory_rerun.rerun_with_counter(FakeConfig(opbench_mode="memory"))  # type: ignore[arg-type]


def test_the_rerun_is_this_command_with_the_counter_preloaded(monkeypatch):
    preloaded.needs_counter()
    monkeypatch.delenv(memory_rerun._PRELOADED, raising=False)
    monkeypatch.setattr(memory_rerun.sys, "orig_argv", ["python", "-m", "pytest", "-k", "bench"])
    seen: dict[str, Any] = {}

    def call(command: list[str], env: dict[str, str]) -> int:
        seen.update(command=command, env=env)
        return 4
    monkeypatch.setattr(memory_rerun.subprocess, "call", call)
    assert memory_rerun.rerun_with_counter(FakeConfig(opbench_mode="memory")) == 4  # type: ignore[arg-type]
    assert seen["command"] == [sys.executable, "-m", "pytest", "-k", "bench"]
    assert seen["env"]["LD_PRELOAD"].split()[0] == str(counter.library_path())
    assert seen["env"][memory_rerun._PRELOADED] == "1"


def test_a_rerun_whose_loader_ignored_the_counter_stops(monkeypatch):
    monkeypatch.setenv(memory_rerun._PRELOADED, "1")
    with pytest.raises(pytest.UsageError, match="ignored it"):
        memory_rerun.check_counter()


def test_a_memory_session_counts_each_benchmark_and_saves_the_counts(tmp_path):
    preloaded.needs_counter()
    (tmp_path / "test_bench.py").write_text(
        "def test_rep(opbench):\n"
        "    xs = [0]\n"
        "    counts = opbench(lambda: xs * 100, name='rep')\n"
        "    assert counts.allocations == 1 and counts.bytes == 800\n")
    saved = tmp_path / "memory.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", *PYTEST_PLUGIN_ARGS, "-p", "no:cacheprovider",
                           "-q", "--opbench-mode=memory", "--opbench-memory-number=20",
                           f"--opbench-save={saved}", "test_bench.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Allocs / bytes per call" in proc.stdout and "1 / 800 B" in proc.stdout
    (entry,) = json.loads(saved.read_text())["memory"]
    assert entry["number_per_run"] == 20 and entry["counts"]["python"]["bytes"] == [16_000] * 3
