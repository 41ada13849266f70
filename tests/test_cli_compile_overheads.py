"""``opbench compile-overheads MODULE:FUNCTION --shape ...``: the overheads table from the shell."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest

from opbench.integrations.cli import main

QUICK = ["--rounds", "1", "--min-run-time", "0.01", "--max-run-time", "0.05"]


@pytest.fixture
def module_file(tmp_path):
    path = tmp_path / "tiny_models.py"
    path.write_text(textwrap.dedent("""\
        def add1(x):
            return x + 1

        def add(x, y):
            return x + y

        NOT_A_FUNCTION = 3
    """))
    return str(path)


@pytest.mark.parametrize("target, message", [
    ("add1", "expected MODULE:FUNCTION"),
    ("no_such_module_xyz:f", "cannot import 'no_such_module_xyz'"),
    ("/no/such/file.py:f", "no such file: /no/such/file.py"),
])
def test_targets_that_cannot_be_loaded(target, message, capsys):
    assert main(["compile-overheads", target, "--shape", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage:") and message in err


def test_missing_attributes_and_non_functions(module_file, capsys):
    assert main(["compile-overheads", f"{module_file}:nothing", "--shape", "1"]) == 2
    assert "has no 'nothing'" in capsys.readouterr().err
    assert main(["compile-overheads", f"{module_file}:NOT_A_FUNCTION"]) == 2
    assert "is a int, not a function" in capsys.readouterr().err


@pytest.mark.parametrize("option, message", [
    (["--shape", "3,a"], "--shape must be integers"),
    (["--shape", "-1"], "--shape dimensions must be >= 0"),
    (["--columns", "training"], "unknown column(s) training"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--dtype", "floaty"], "--dtype 'floaty' is not a torch dtype"),
])
def test_bad_options(module_file, option, message, capsys):
    pytest.importorskip("torch")
    assert main(["compile-overheads", f"{module_file}:add1", *option]) == 2
    assert message in capsys.readouterr().err


def test_help_names_the_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compile-overheads", "--help"])
    assert exit_info.value.code == 0
    assert "MODULE:FUNCTION" in capsys.readouterr().out


def test_a_run_prints_the_table(module_file, capsys):
    pytest.importorskip("torch")
    # The "eager" backend compiles in about a second; it has no Inductor layer to split.
    assert main(["compile-overheads", f"{module_file}:add", "--shape", "3", "--shape", "3",
                 "--backend", "eager", "--columns", "inference_mode", *QUICK]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "inference_mode" in lines[1]
    assert [line.split("|")[0].strip() for line in lines[3:5]] == ["eager", "compiled"]
    assert "Split of the compiled call, inference_mode: skipped: " in out


@pytest.mark.slow
def test_the_issue_s_command_splits_the_compiled_call(module_file, capsys):
    pytest.importorskip("torch")
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    assert main(["compile-overheads", f"{module_file}:add1", "--shape", "1",
                 "--columns", "requires_grad=True", *QUICK]) == 0
    out = capsys.readouterr().out
    assert "Split of the compiled call, requires_grad=True (" in out
    for part in ("frame evaluation and cache lookup", "guards", "runtime wrappers",
                 "autograd Function", "compiled module call and launcher", "kernels"):
        assert part in out
