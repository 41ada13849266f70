"""baselines: where numbered runs live, the same place for the CLI and the pytest plugin."""
from __future__ import annotations

import subprocess
import sys
import textwrap

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


