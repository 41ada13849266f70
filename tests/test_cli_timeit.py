"""`python -m opbench timeit`: statements from the shell, statistics, --save, --callgrind, errors."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from opbench.store.results import load


def opbench_cli(*args: str, env: dict[str, str] | None = None,
                cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbench", *args], check=False,
                          capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def test_times_statement_with_setup() -> None:
    r = opbench_cli("timeit", "-s", "xs = list(range(100))", "--min-run-time", "0.02",
                    "sorted(xs)")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    # The Measurement's text without its `<... object at 0x...>` line.
    assert lines[:2] == ["sorted(xs)", "setup: xs = list(range(100))"]
    assert "object at 0x" not in r.stdout
    blocks = int(re.search(r"(\d+) measurements,", r.stdout).group(1))
    assert blocks >= 10  # enough samples for a regression gate to decide


def test_number_and_repeat_join_lines(tmp_path) -> None:
    path = tmp_path / "t.json"
    r = opbench_cli("timeit", "-n", "10", "-r", "3", "-s", "x = 1", "-s", "y = 2",
                    "--threads", "2", "--label", "add", "--save", str(path), "z = x", "z + y")
    assert r.returncode == 0, r.stderr
    assert "3 measurements, 10 runs per measurement, 2 threads" in r.stdout
    assert f"saved to {path}" in r.stdout
    (m,) = load(path)
    assert (m.stmt, m.setup, m.label, m.num_threads) == ("z = x\nz + y", "x = 1\ny = 2", "add", 2)
    assert (m.number_per_run, len(m.raw_times)) == (10, 3)


def test_converge_verbose_describes() -> None:
    r = opbench_cli("timeit", "--converge", "50%", "--min-run-time", "0.02", "--verbose",
                    "sum(range(10))")
    assert r.returncode == 0, r.stderr
    assert "Median 95% CI:" in r.stdout and "Outliers" in r.stdout
    assert "Converged:" in r.stdout and "target 50.00%" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["x = ("], "stmt does not parse: '(' was never closed (line 1): x = ("),
    (["-s", "import", "pass"], "setup does not parse: invalid syntax (line 1): import"),
    (["-n", "0", "pass"], "--number must be a positive integer, got 0"),
    (["--converge", "150%", "pass"], "--converge must be between 0% and 100%"),
    (["--converge", "1%", "-n", "5", "pass"], "--converge chooses the block size and count"),
    (["--callgrind", "--converge", "1%", "pass"], "--callgrind counts instructions"),
    (["--min-run-time", "0", "pass"], "--min-run-time must be > 0"),
    (["--save", "no/such/dir/x.json", "pass"], "--save: cannot write no/such/dir/x.json"),
    (["--save", ".", "pass"], "--save: cannot write .: it is a directory"),
    (["--bogus", "pass"], "unrecognized arguments: --bogus"),
])
def test_bad_input_exits_2_on_stderr(args, message, tmp_path) -> None:
    r = opbench_cli("timeit", *args, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == ""
    assert message in r.stderr and "usage: python -m opbench timeit" in r.stderr


def test_statement_that_raises_exits_1_with_traceback() -> None:
    r = opbench_cli("timeit", "-s", "d = {}", "d['missing']")
    assert r.returncode == 1
    assert "KeyError: 'missing'" in r.stderr
    assert "error: the statement raised KeyError" in r.stderr


def test_help_lists_options() -> None:
    r = opbench_cli("timeit", "--help")
    assert r.returncode == 0
    for option in ("--setup", "--number", "--min-run-time", "--threads", "--converge",
                   "--callgrind", "--save", "--verbose"):
        assert option in r.stdout


def test_callgrind_without_valgrind_is_a_clear_error(tmp_path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # an empty PATH: no valgrind on it
    r = opbench_cli("timeit", "--callgrind", "pass", env=env)
    assert r.returncode == 2
    assert "valgrind" in r.stderr and "not on PATH" in r.stderr
    assert r.stdout == ""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind on PATH")
@pytest.mark.slow
def test_callgrind_counts_instructions() -> None:
    pytest.importorskip("opbench._C", reason="needs the native extension (tools/build-dev)")
    r = opbench_cli("timeit", "--callgrind", "-n", "10", "-s", "x = 1", "y = x + 1")
    assert r.returncode == 0, r.stderr
    assert "object at 0x" not in r.stdout
    assert "Instructions:" in r.stdout and "10 runs per measurement, 1 thread" in r.stdout
    assert re.search(r"[\d,.]+ instructions per run", r.stdout)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind on PATH")
@pytest.mark.slow
def test_callgrind_counts_are_saved_for_an_instruction_gate(tmp_path) -> None:
    r = opbench_cli("timeit", "--callgrind", "-n", "10", "-r", "2", "--name", "add",
                    "--save", str(tmp_path / "c.json"), "-s", "x = 1", "y = x + 1")
    assert r.returncode == 0, r.stderr
    (counts,) = load(tmp_path / "c.json").instructions
    assert counts.task_spec.key == "add" and len(counts.counts) == 2
    assert counts.number_per_run == 10 and counts.per_run > 0


def test_repeat_without_number_times_that_many_blocks() -> None:
    r = opbench_cli("timeit", "-r", "7", "--min-run-time", "0.01", "pass")
    assert r.returncode == 0, r.stderr
    assert "7 measurements," in r.stdout


def test_name_and_autosave(tmp_path) -> None:
    env = dict(os.environ, OPBENCH_BASELINE_DIR=str(tmp_path / "b"))
    r = opbench_cli("timeit", "--name", "sum", "--autosave", "--min-run-time", "0.01",
                    "sum(range(10))", env=env)
    assert r.returncode == 0, r.stderr
    saved = re.search(r"saved to (\S+)", r.stdout).group(1)
    assert "/0001_" in saved
    (m,) = load(saved)
    assert m.task_spec.key == "sum"


def test_a_statement_needing_missing_torch_is_a_one_line_error(tmp_path) -> None:
    # A `torch` that cannot be imported: a package that raises on import.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = opbench_cli("timeit", "torch.ones(3)", env=env, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == ("python -m opbench timeit: error: the statement uses `torch`, which is not "
                    "installed: pip install torch")
    assert "Traceback" not in r.stderr


def test_program_name_follows_how_it_was_run(tmp_path) -> None:
    r = subprocess.run([sys.executable, "-c", "import sys; from opbench.integrations.cli import main; "
                        "sys.argv[0] = '/usr/bin/opbench'; sys.exit(main(['timeit', '-n', '0']))"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "opbench timeit: error: --number" in r.stderr
    assert "python -m opbench" not in r.stderr


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind on PATH")
@pytest.mark.slow
def test_callgrind_verbose_prints_the_top_functions_with_full_names() -> None:
    r = opbench_cli("timeit", "--callgrind", "-v", "-n", "10", "-s", "xs = list(range(50))",
                    "sorted(xs)")
    assert r.returncode == 0, r.stderr
    assert "object at 0x" not in r.stdout and " ... " not in r.stdout
    top = r.stdout.split("Top functions", 1)[1].splitlines()[1:]
    rows = [line.split(None, 1) for line in top if re.match(r"\s*-?[\d,]+\s+\S", line)]
    assert rows and all(int(count.replace(",", "")) for count, _ in rows)
    # Names whole: the function after the file, never the file (library path) alone.
    assert any(name.rstrip().endswith(":list_sort_impl") or "list_sort" in name
               for _, name in rows), top


def test_timeit_takes_work_and_prints_throughput(fake_peaks, capsys):
    from opbench.integrations.cli import main

    code = main(["timeit", "--bytes", "count", "--flops", "count", "--min-run-time", "0.01",
                 "-s", "x = torch.ones(1000)", "x + x"])
    out = capsys.readouterr().out
    assert code == 0
    assert "  Work: 1000 FLOPs (counted), 8000 bytes (counted): " in out and "-bound, " in out
    assert main(["timeit", "--bytes", "16", "--min-run-time", "0.01", "pass"]) == 0
    assert "16 bytes (declared)" in capsys.readouterr().out
    assert main(["timeit", "--flops", "-3", "pass"]) == 2
    assert "--flops must be a number >= 0 or 'count', got '-3'" in capsys.readouterr().err


def test_a_disturbed_measurement_is_measured_again_unless_told_not_to(monkeypatch, capsys) -> None:
    from opbench.core import recovery
    from opbench.integrations.cli import main

    calls = []

    def recovered(measure, **kwargs):
        calls.append("recovered")
        return measure()

    monkeypatch.setattr(recovery, "recovered", recovered)
    assert main(["timeit", "--min-run-time", "0.01", "--min-samples", "3", "pass"]) == 0
    assert main(["timeit", "--no-recover", "--min-run-time", "0.01", "--min-samples", "3",
                 "pass"]) == 0
    assert calls == ["recovered"]
    assert capsys.readouterr().out.count("measurements,") == 2


def test_memory_counts_per_call_and_saves_them_for_a_memory_gate(tmp_path) -> None:
    from opbench.memory import counter

    if counter.unavailable_reason() is not None:
        pytest.skip(counter.unavailable_reason())
    r = opbench_cli("timeit", "--memory", "-n", "10", "-r", "2", "--name", "rep",
                    "--save", str(tmp_path / "m.json"), "-s", "xs = [0]", "xs * 100")
    assert r.returncode == 0, r.stderr
    assert "10 calls counted, 2 repeat(s), exact" in r.stdout
    assert "python: 1 allocation, 800 B per call" in r.stdout and "no leak" in r.stdout
    (counts,) = load(tmp_path / "m.json").memory
    assert counts.task_spec.key == "rep" and counts.bytes == 800.0


def test_memory_takes_no_converge_and_a_raising_statement_exits_1() -> None:
    r = opbench_cli("timeit", "--memory", "--converge", "1%", "pass")
    assert r.returncode == 2 and "--memory counts memory" in r.stderr
    from opbench.memory import counter

    if counter.unavailable_reason() is None:
        r = opbench_cli("timeit", "--memory", "-n", "1", "-r", "1", "1 / 0")
        assert r.returncode == 1 and "the statement raised ZeroDivisionError" in r.stderr
