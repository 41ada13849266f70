"""opbench.store.baselines: numbered runs per machine, the latest one found for a gate."""
from __future__ import annotations

from pathlib import Path

import pytest

from opbench import Measurement, TaskSpec, load
from opbench.store import baselines

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
    assert baselines.root_dir() == Path(".opbench")


def test_files_that_are_not_numbered_runs_are_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    for name in ("0002_a.json", "0010_b.json", "notes.json", "0003_c.txt"):
        (folder / name).write_text("{}")
    assert [p.name for p in baselines.runs(root=tmp_path, machine="m")] == ["0002_a.json", "0010_b.json"]
