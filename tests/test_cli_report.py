"""``opbench report`` (opbench.integrations.cli.report): the history written as a static site
by the command, its errors named (the site itself is checked in Chromium by test_report.py)."""
from __future__ import annotations

import subprocess
import sys

from opbench.integrations.cli import main


def test_report_command_writes_the_site_or_says_there_is_no_history(measured_history, tmp_path):
    store = measured_history[0]
    r = subprocess.run([sys.executable, "-m", "opbench", "report", "--root", str(store),
                        "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "index.html").is_file()
    assert len(list((tmp_path / "out" / "bench").iterdir())) == 4
    r = subprocess.run([sys.executable, "-m", "opbench", "report", "--root", str(tmp_path / "no"),
                        "-o", str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no saved runs" in r.stderr


def test_machines_and_z_reach_the_site(monkeypatch, tmp_path, capsys):
    from opbench.analysis import report

    calls = []
    monkeypatch.setattr(report, "write", lambda out, **kw: calls.append((out, kw)) or tmp_path)
    assert main(["report", "-o", "site", "--root", "r", "--machine", "m1", "--machine", "m2",
                 "--z", "3"]) == 0
    assert calls == [("site", dict(root="r", machines=["m1", "m2"], z_min=3.0, redact=False))]
    assert capsys.readouterr().out == f"wrote {tmp_path / 'index.html'}\n"
    assert main(["report", "-o", "site", "--redact"]) == 0
    assert calls[-1][1]["redact"] is True


def test_a_folder_that_cannot_be_written_is_named(measured_history, tmp_path, capsys):
    (tmp_path / "taken").write_text("a file where the folder would go")
    out = str(tmp_path / "taken")
    assert main(["report", "--root", str(measured_history[0]), "-o", out]) == 2
    assert f"error: cannot write {out}: " in capsys.readouterr().err


def test_an_unknown_machine_is_no_history(measured_history, tmp_path, capsys):
    assert main(["report", "--root", str(measured_history[0]), "--machine", "elsewhere",
                 "-o", str(tmp_path / "out")]) == 2
    assert "no saved runs under" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
