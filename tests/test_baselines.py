"""baselines: where numbered runs live, the same place for the CLI and the pytest plugin."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opbench import Measurement, TaskSpec, load
from opbench.store import baselines


def test_root_is_the_project_root_from_any_subdirectory(tmp_path, monkeypatch):
    monkeypatch.delenv(baselines.ENV_VAR, raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    sub = tmp_path / "tests" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert baselines.root_dir() == tmp_path / ".opbench"
    monkeypatch.setenv(baselines.ENV_VAR, str(tmp_path / "elsewhere"))
    assert baselines.root_dir() == tmp_path / "elsewhere"
    assert baselines.root_dir(tmp_path / "given") == tmp_path / "given"


def test_pytest_autosave_is_what_the_cli_finds_from_a_subdirectory(tmp_path):
    # pytest's rootdir (the ini file's folder) and the CLI's working directory used to
    # give two different .opbench folders: `compare --latest` found nothing.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        def test_x(opbench):
            opbench(lambda: None, min_run_time=0.01, min_samples=2)
    """))
    sub = tmp_path / "sub"
    sub.mkdir()
    env_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "opbench.pytest_plugin",
               "-p", "no:cacheprovider", "--opbench-autosave", str(tmp_path / "test_x.py")]
    done = subprocess.run(env_cmd, cwd=sub, capture_output=True, text=True, timeout=300,
                          env=_env_without_baseline_dir())
    assert done.returncode == 0, done.stdout + done.stderr
    found = subprocess.run([sys.executable, "-c", "from opbench import baselines; "
                            "print(baselines.latest())"], cwd=sub, capture_output=True,
                           text=True, timeout=60, env=_env_without_baseline_dir())
    latest = found.stdout.strip()
    assert latest != "None" and latest.startswith(str(tmp_path / ".opbench")), latest


def _env_without_baseline_dir() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != baselines.ENV_VAR}

RESULT = [Measurement(1, [1e-6], TaskSpec("f()", "pass"))]
ENV = {"platform": "Linux-6.1-x86_64", "machine": "x86_64", "python_implementation": "CPython",
       "python": "3.11.7", "cpu_model": "Zen 4", "cpu_count": 2, "hostname": "runner-17"}


def test_machine_id_ignores_the_host_name_but_not_the_cpu() -> None:
    name = baselines.machine_id(ENV)
    assert name.startswith("Linux-x86_64-CPython3.11-")
    assert baselines.machine_id({**ENV, "hostname": "runner-18"}) == name
    assert baselines.machine_id({**ENV, "cpu_count": 4}) != name
    assert baselines.machine_id({**ENV, "machine": "arm 64/v8"}).split("-")[1] == "arm_64_v8"


def test_runs_are_numbered_in_order_and_latest_is_the_last(tmp_path: Path) -> None:
    assert baselines.latest(root=tmp_path) is None and baselines.runs(root=tmp_path) == []
    saved = [baselines.autosave(RESULT, root=tmp_path) for _ in range(3)]
    assert [p.name[:5] for p in saved] == ["0001_", "0002_", "0003_"]
    assert baselines.runs(root=tmp_path) == saved
    assert baselines.latest(root=tmp_path) == saved[-1]
    assert saved[0].parent.name == baselines.machine_id()
    env = load(saved[-1]).environment
    assert env["machine_id"] == baselines.machine_id()
    assert "git_commit" in env


def test_the_environment_variable_moves_the_root(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(baselines.ENV_VAR, str(tmp_path / "elsewhere"))
    assert baselines.root_dir() == tmp_path / "elsewhere"
    assert baselines.root_dir(tmp_path) == tmp_path
    monkeypatch.delenv(baselines.ENV_VAR)
    assert baselines.root_dir() == baselines.project_root() / ".opbench"


def test_files_that_are_not_numbered_runs_are_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    for name in ("0002_a.json", "0010_b.json", "notes.json", "0003_c.txt"):
        (folder / name).write_text("{}")
    assert [p.name for p in baselines.runs(root=tmp_path, machine="m")] == ["0002_a.json", "0010_b.json"]
