"""`python -m opbench show FILE`: a saved results file as Compare tables, errors on stderr."""
from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from opbench import Compare, Measurement, TaskSpec, save

ENV = {"hostname": "box", "cpu_model": "CPU-9", "python": "3.11.7", "torch": None}


def opbench_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbench", *args], check=False,
                          capture_output=True, text=True, timeout=120)


def measurements() -> list[Measurement]:
    rng = random.Random(0)
    out = []
    for stmt, cost in (("add()", 2e-6), ("mul()", 7e-6)):
        for size in ("8", "64"):
            times = [cost * int(size) * (1 + rng.gauss(0, 0.02)) for _ in range(20)]
            out.append(Measurement(100, [t * 100 for t in times],
                                   TaskSpec(stmt, "pass", label="ops", sub_label=stmt,
                                            description=size)))
    return out


def keyed(results: list, path: str, title: str = "times") -> list:
    """``results`` as show lays them out: a row per gate key, a column per file."""
    from opbench.integrations.cli.show import _keyed

    return [_keyed(r, title, path) for r in results]


@pytest.fixture
def results_file(tmp_path):
    return str(save(measurements(), tmp_path / "run.json", environment=ENV))


def test_prints_compare_tables(results_file) -> None:
    r = opbench_cli("show", results_file)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.startswith(f"{results_file}: 4 measurement(s)\n"
                               "measured on: hostname=box, cpu_model=CPU-9, python=3.11.7\n")
    assert str(Compare(keyed(measurements(), results_file))) in r.stdout
    assert "Measurement object" not in r.stdout  # describe() only with --verbose


def test_trim_and_color(results_file) -> None:
    r = opbench_cli("show", results_file, "--trim", "--color", "always")
    assert r.returncode == 0, r.stderr
    table = Compare(keyed(measurements(), results_file))
    table.trim_significant_figures()
    table.colorize()
    assert str(table) in r.stdout and "\x1b[" in r.stdout


def test_verbose_adds_environment_and_describe(results_file) -> None:
    r = opbench_cli("show", results_file, "--verbose")
    assert r.returncode == 0, r.stderr
    assert "environment: " + json.dumps(ENV, sort_keys=True) in r.stdout
    for m in measurements():
        assert m.describe().split("\n", 1)[1] in r.stdout  # past the object-address line


def test_empty_file(tmp_path) -> None:
    path = save([], tmp_path / "empty.json", environment={})
    r = opbench_cli("show", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{path}: 0 measurement(s)\nmeasured on: (no environment recorded)\n"


@pytest.mark.parametrize("content, message", [
    (None, "No such file or directory"),
    ('{"format": "opbench-res', "truncated or corrupt JSON"),
    ('{"format": "opbench-results", "version": 99, "environment": {}, "measurements": []}',
     "upgrade opbench"),
])
def test_unloadable_file_exits_2(tmp_path, content, message) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    r = opbench_cli("show", str(path))
    assert r.returncode == 2
    assert r.stdout == ""
    assert f"python -m opbench show: error: cannot load {path}" in r.stderr
    assert message in r.stderr


def test_help() -> None:
    r = opbench_cli("show", "--help")
    assert r.returncode == 0
    assert all(option in r.stdout for option in ("FILE", "--trim", "--color", "--verbose"))


def test_color_follows_the_terminal_and_no_color(results_file) -> None:
    # Piped (not a terminal): no colour unless asked.
    assert "\x1b[" not in opbench_cli("show", results_file).stdout
    assert "\x1b[" not in opbench_cli("show", results_file, "--color", "never").stdout
    from opbench.integrations.cli import use_color

    class Tty:
        def isatty(self):
            return True

    assert use_color("auto", Tty()) is True
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NO_COLOR", "1")
        assert use_color("auto", Tty()) is False
        assert use_color("always", Tty()) is True


def test_several_files_and_instruction_counts(tmp_path) -> None:
    from opbench.core.instructions import InstructionCounts

    first = str(save(measurements()[:2], tmp_path / "a.json", environment=ENV))
    counts = InstructionCounts(100, (52_000,), TaskSpec("x + 1", "x = 1", label="ops",
                                                        sub_label="add()"), baseline=2_000)
    second = str(save([*measurements()[2:], counts], tmp_path / "b.json", environment=ENV))
    r = opbench_cli("show", first, second)
    assert r.returncode == 0, r.stderr
    assert f"{first}: 2 measurement(s)" in r.stdout
    assert f"{second}: 2 measurement(s), 1 instruction count(s)" in r.stdout
    # Both files in one table, a column each.
    assert str(Compare(keyed(measurements()[:2], first) + keyed(measurements()[2:], second))) \
        in r.stdout
    assert "Counts are instructions per run." in r.stdout and "500" in r.stdout


def test_demo_colours_only_on_a_terminal_by_default() -> None:
    r = opbench_cli("demo", "--help")
    assert "--color {auto,always,never}" in r.stdout and "NO_COLOR" in r.stdout


def _cell(table_text: str, row: str, column: int) -> str:
    """The text of ``row``'s cell in value column ``column`` (0-based) of a table."""
    (line,) = [ln for ln in table_text.splitlines() if ln.strip().startswith(row + " ")
               or ln.strip().startswith(row + "|")]
    return line.split("|")[1 + column].strip()


def test_every_benchmark_of_every_file_appears_keyed_as_the_gate_keys_it(tmp_path) -> None:
    def m(name, cost, label="tests/test_x.py::test_add", stmt="<lambda>()"):
        return Measurement(1, [cost * (1 + i / 1000) for i in range(10)],
                           TaskSpec(stmt, "pass", label=label, name=name))

    # Two benchmarks of one test: one `<lambda>()` statement, one label, two names.
    a = str(save([m("tests/test_x.py::test_add::plus", 1e-6),
                  m("tests/test_x.py::test_add::builtin", 3e-6)], tmp_path / "a.json",
                 environment=ENV))
    b = str(save([m("tests/test_x.py::test_add::plus", 2e-6),
                  m("tests/test_x.py::test_add::builtin", 4e-6)], tmp_path / "b.json",
                 environment=ENV))
    # Saved by `opbench timeit --name`: no label.
    c = str(save([m("sort", 5e-6, label=None, stmt="sorted(xs)")], tmp_path / "c.json",
                 environment=ENV))
    r = opbench_cli("show", a, b, c, "--color", "never")
    assert r.returncode == 0, r.stderr
    assert _cell(r.stdout, "tests/test_x.py::test_add::plus", 0) == "1.0"
    assert _cell(r.stdout, "tests/test_x.py::test_add::builtin", 0) == "3.0"
    assert _cell(r.stdout, "tests/test_x.py::test_add::plus", 1) == "2.0"
    assert _cell(r.stdout, "tests/test_x.py::test_add::builtin", 1) == "4.0"
    assert _cell(r.stdout, "sort", 2) == "5.0"


@pytest.mark.parametrize("fmt, export", [("markdown", "to_markdown"), ("csv", "to_csv"),
                                         ("html", "to_html")])
def test_format_prints_the_export_of_the_text_tables(results_file, fmt, export) -> None:
    from opbench.analysis import export as exports
    from opbench.core import identity
    from opbench.integrations.cli import show
    from opbench.store.results import load

    r = opbench_cli("show", results_file, "--format", fmt)
    assert r.returncode == 0, r.stderr
    (times,) = show._groups([(results_file, load(results_file))])  # what the text shows
    assert r.stdout == getattr(exports, export)(Compare(times))
    for m in measurements():  # a row per benchmark, as the gate keys it
        key = identity.key(m)
        assert (key.replace("|", "\\|") if fmt == "markdown" else key) in r.stdout


def test_csv_of_times_and_counts_has_one_header(tmp_path) -> None:
    from opbench.core.instructions import InstructionCounts

    counts = InstructionCounts(100, (12_345, 12_350), TaskSpec("add()", "pass", label="ops"))
    path = save([*measurements(), counts], tmp_path / "both.json", environment=ENV)
    r = opbench_cli("show", str(path), "--format", "csv")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("label,") and sum(line == lines[0] for line in lines) == 1
    assert len(lines) == 1 + 4 + 1  # header, four time cells, one count cell


def test_format_with_verbose_is_a_usage_error(results_file) -> None:
    r = opbench_cli("show", results_file, "--format", "csv", "--verbose")
    assert r.returncode == 2 and "--format text" in r.stderr


def test_control_characters_of_names_never_reach_the_terminal(tmp_path, capsys):
    """Issue 34: a name holding escape sequences could clear the screen or rewrite what
    was printed; they are shown as escapes (\\x1b, \\r) instead."""
    import hostile
    from opbench.integrations.cli import main

    path = tmp_path / ("run\x1b[2J.json")
    save(hostile.measurements(), path, environment={**ENV, "hostname": "box\x1b]0;x\x07"})
    for args in ([], ["-v"], ["--trim"]):
        assert main(["show", *args, "--color", "never", str(path)]) == 0
        out = capsys.readouterr().out
        assert not hostile.TERMINAL_CONTROLS.search(out), repr(out)
        assert "\\x1b[2J\\x1b]0;title\\x07" in out and "run\\x1b[2J.json" in out
        assert "fake\\n### opbench: no regression" in out  # no line of a name's


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "html"])
def test_redact_leaves_host_names_and_paths_out(tmp_path, capsys, fmt):
    from opbench.integrations.cli import main

    path = tmp_path / "run.json"
    name = f"{tmp_path}/bench.py::test_sort"
    save([Measurement(1, [1e-6] * 5, TaskSpec("f()", "pass", name=name))], path,
         environment={**ENV, "hostname": "build-host-7"})
    folder = str(tmp_path).replace("_", "\\_") if fmt == "markdown" else str(tmp_path)
    assert main(["show", "--format", fmt, "--color", "never", str(path)]) == 0
    assert folder in capsys.readouterr().out
    assert main(["show", "--format", fmt, "--redact", "--color", "never", str(path)]) == 0
    out = capsys.readouterr().out
    assert "build-host-7" not in out and folder not in out and "run.json" in out
