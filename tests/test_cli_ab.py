"""``python -m opbench ab``: the command line of opbench.revisions.session."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from opbench.integrations.cli import main
from test_session import edit, repo  # noqa: F401  (the fixture)


def test_usage_errors_exit_2(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    assert main(["ab", "--base", "HEAD"]) == 2
    assert "give the benchmark command after --" in capsys.readouterr().err
    assert main(["ab", "--base", "nope", "--", sys.executable, "bench.py"]) == 2
    assert "'nope' names no commit" in capsys.readouterr().err
    assert main(["ab", "--base", "HEAD", "--rounds", "0", "--", "x"]) == 2
    assert main(["ab", "--base", "HEAD", "--wave", "0", "--", "x"]) == 2
    assert "--wave must be a positive integer" in capsys.readouterr().err
    assert main(["ab", "--base", "HEAD", "--threshold", "150%", "--", "x"]) == 2


def test_end_to_end_with_a_markdown_report_file(repo: Path, tmp_path: Path) -> None:  # noqa: F811
    edit(repo, 2e-6)
    out = tmp_path / "report.md"
    proc = subprocess.run([sys.executable, "-m", "opbench", "ab", "--base", "HEAD", "--rounds",
                           "3", "--format", "markdown", "--output", str(out), "--",
                           sys.executable, "bench.py"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == out.read_text()
    assert proc.stdout.startswith("### opbench: 1 regression — 1 of 1 benchmark(s) slower")
    assert "round 1/3" in proc.stderr and "1 of 1 benchmark(s) decided" in proc.stderr


def test_options_before_the_double_dash_are_abs_and_after_it_the_commands(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace

    import opbench.revisions.session

    seen: dict = {}

    def run_ab(command: list[str], base: str, **kwargs: object) -> SimpleNamespace:
        seen.update(command=command, base=base, **kwargs)
        return SimpleNamespace(render=lambda fmt: f"{fmt} report\n", interrupted=False,
                               exit_status=0)
    monkeypatch.setattr(opbench.revisions.session, "run_ab", run_ab)
    assert main(["ab", "--base", "v1", "--rounds", "2", "--wave", "1", "--", "pytest", "-x",
                 "--rounds", "9"]) == 0
    assert seen["command"] == ["pytest", "-x", "--rounds", "9"]
    assert (seen["base"], seen["rounds"], seen["wave"]) == ("v1", 2, 1)
    assert capsys.readouterr().out == "text report\n"


def test_a_bad_keep_folder_is_refused_before_the_checkout(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    """Issue 34: --keep naming a file failed after the base was checked out, and left its
    worktree behind."""
    from test_checkout import worktrees

    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    for keep in (not_a_folder, not_a_folder / "sub"):
        assert main(["ab", "--base", "HEAD", "--keep", str(keep), "--", sys.executable,
                     "bench.py"]) == 2
        err = capsys.readouterr().err
        assert f"cannot keep the results files in {keep}: it cannot be a folder" in err, err
        assert worktrees(repo) == [f"worktree {repo}"]


def test_redact_leaves_host_names_and_paths_out_of_the_report(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import opbench.revisions.session
    from opbench.gate.session_verdicts import ABReport, FailedRun, Side

    def run_ab(command: list[str], base: str, **kwargs: object) -> ABReport:
        env = {"hostname": "build-host-7", "python": "3.11.7"}
        return ABReport(None, Side("base", base, "a" * 40, env), Side("head", "working tree",
                        "b" * 40, env), tuple(command), "time", rounds=0, max_rounds=3,
                        failed=(FailedRun("base", 1, 'File "/home/ann/b.py", line 1'),))

    monkeypatch.setattr(opbench.revisions.session, "run_ab", run_ab)
    for fmt in ("markdown", "text", "json"):
        assert main(["ab", "--base", "v1", "--format", fmt, "--", "pytest"]) == 1
        assert "build-host-7" in capsys.readouterr().out
        assert main(["ab", "--base", "v1", "--format", fmt, "--redact", "--", "pytest"]) == 1
        out = capsys.readouterr().out
        assert "build-host-7" not in out and "/home/ann" not in out and "b.py" in out
