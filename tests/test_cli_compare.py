"""`opbench compare`: the regression gate from the shell: table, verdicts, exit status."""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest

from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import Measurement, TaskSpec
from opbench.integrations.cli import UsageError, main, parse_fraction
from opbench.store import baselines
from opbench.store.results import save

ENV = {"hostname": "h"}


def times(seed, scale=1.0, n=40):
    rng = random.Random(seed)
    return [1e-5 * scale * (1 + rng.gauss(0, 0.01)) for _ in range(n)]


def m(stmt, ts, **spec):
    return Measurement(1, ts, TaskSpec(stmt, "pass", **spec))


def write(tmp_path, name, results, env=ENV):
    return str(save(results, tmp_path / name, environment=env))


def run_cli(capsys, *argv):
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out):
    return {line.split("  ")[0]: line for line in out.splitlines() if "  " in line}


def test_regression_beyond_threshold_fails(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1)), m("b()", times(2), label="B")])
    new = write(tmp_path, "new.json", [m("a()", times(3)), m("b()", times(4, 1.2), label="B")])
    code, out, _ = run_cli(capsys, base, new, "--threshold", "5%")
    assert code == 1
    table = rows(out)
    assert table["a()"].endswith("same")
    assert table["B"].endswith("REGRESSION") and " 1.2" in table["B"]
    assert out.index("B  ") < out.index("a()  ")  # worst first
    assert "FAILED: 1 regression in 2 benchmark(s).\n  B: 1.2" in out


def test_improvement_and_small_changes_pass(tmp_path, capsys):
    # 200 blocks a side: each side's 10th percentile known to well under 1%.
    base = write(tmp_path, "base.json", [m("a()", times(1, n=200)), m("b()", times(2, n=200))])
    new = write(tmp_path, "new.json", [m("a()", times(3, 0.8, n=200)),
                                       m("b()", times(4, 1.03, n=200))])
    code, out, _ = run_cli(capsys, base, new, "--threshold", "0.05")
    assert code == 0
    assert "improvement" in out and "PASSED: no regression" in out
    code, out, _ = run_cli(capsys, base, new, "--threshold", "1%")
    assert code == 1  # 3% slower is a regression at a 1% threshold


def test_a_2x_slowdown_with_3_samples_per_side_fails(tmp_path, capsys):
    # 3 samples each: no interval can be formed. The gate used to print "inconclusive"
    # and pass a 2x regression with exit 0; the medians show it, so it must fail.
    base = write(tmp_path, "base.json", [m("matmul()", times(1, n=3))])
    new = write(tmp_path, "new.json", [m("matmul()", times(2, 2.0, n=3))])
    code, out, _ = run_cli(capsys, base, new)
    assert code == 1
    assert "POSSIBLE REGRESSION" in rows(out)["matmul()"]
    assert " 1.98" in rows(out)["matmul()"]  # the ratio of medians is always shown
    assert "none (3 vs 3 samples)" in out
    code, out, _ = run_cli(capsys, base, new, "--inconclusive", "warn")
    assert code == 0 and "POSSIBLE REGRESSION" in out
    # an undecided benchmark whose medians stay within the threshold passes
    same = write(tmp_path, "same.json", [m("matmul()", times(3, 1.01, n=3))])
    code, out, _ = run_cli(capsys, base, same)
    assert code == 0 and rows(out)["matmul()"].endswith("inconclusive")


def test_a_renamed_callable_with_a_name_still_matches(tmp_path, capsys):
    def sort_v1():
        pass

    def sort_v2():
        pass

    import opbench

    fast = opbench.Timer(sort_v1, name="sort").repeat(10, 1000)
    slow_times = [t * 2 for t in fast.raw_times]
    base = write(tmp_path, "base.json", [fast])
    renamed = opbench.Timer(sort_v2, name="sort").timeit(1000)
    new = write(tmp_path, "new.json",
                [Measurement(1000, slow_times, renamed.task_spec, info=renamed.info)])
    code, out, _ = run_cli(capsys, base, new)
    assert code == 1 and rows(out)["sort"].endswith("REGRESSION")
    assert "Only in" not in out


def test_unmatched_benchmarks_are_listed_and_can_fail(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1)), m("old()", times(2))])
    new = write(tmp_path, "new.json", [m("a()", times(3)), m("a()", times(5), num_threads=2)])
    code, out, _ = run_cli(capsys, base, new)
    assert code == 0
    assert "Only in the baseline (missing from the new results; --fail-on-missing fails on " \
           "these): old()" in out
    assert "Only in the new results (new benchmarks): a() | 2 threads" in out
    code, out, _ = run_cli(capsys, base, new, "--fail-on-missing")
    assert code == 1 and "old(): missing from the new results" in out


@pytest.mark.parametrize("empty_side", ["base", "new"])
def test_nothing_matched_is_an_error_not_a_pass(tmp_path, capsys, empty_side):
    full = write(tmp_path, "full.json", [m("a()", times(1))])
    empty = write(tmp_path, "empty.json", [])
    args = (empty, full) if empty_side == "base" else (full, empty)
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and out == ""
    assert "no benchmark is in both" in err


def test_comparing_a_file_with_itself_is_refused(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1))])
    code, _, err = run_cli(capsys, base, base)
    assert code == 2 and "same file" in err


def test_replicates_are_pooled(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1, n=20)), m("a()", times(2, n=20))])
    new = write(tmp_path, "new.json", [m("a()", times(3, 1.5))])
    code, out, _ = run_cli(capsys, base, new)
    assert code == 1 and out.count("a()  ") == 1


def test_instruction_counts_are_compared_exactly(tmp_path, capsys):
    def counts(per_run, name="add"):
        return InstructionCounts(100, (per_run * 100 + 500,), TaskSpec("x + 1", "x = 1",
                                                                      name=name), baseline=500)

    base = write(tmp_path, "base.json", [counts(10_000)])
    new = write(tmp_path, "new.json", [counts(10_100)])  # 1% more instructions
    code, out, _ = run_cli(capsys, base, new, "--threshold", "0.5%")
    assert code == 1
    assert "10,000 instr" in out and "10,100 instr" in out and "exact" in out
    code, _, _ = run_cli(capsys, base, new, "--threshold", "2%")
    assert code == 0


def test_different_environments_are_named(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1))],
                 env={"hostname": "a", "torch": "2.13.0", "num_threads": 1})
    new = write(tmp_path, "new.json", [m("a()", times(2))],
                env={"hostname": "b", "torch": "2.14.1", "num_threads": 1})
    _, out, _ = run_cli(capsys, base, new)
    assert "warning: the results come from different environments (machine: a vs b; " \
           "torch: 2.13.0 vs 2.14.1)" in out


def test_markdown_and_json_formats(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a|b()", times(1))])
    new = write(tmp_path, "new.json", [m("a|b()", times(2, 2.0))])
    code, out, _ = run_cli(capsys, base, new, "--format", "markdown")
    assert code == 1 and out.startswith(
        "### opbench: 1 regression — 1 of 1 benchmark(s) slower\n\n| Benchmark |")
    assert "| a\\|b() |" in out and "\n- a\\|b(): 1.9" in out
    code, out, _ = run_cli(capsys, base, new, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["passed"] is False
    assert doc["rows"][0]["status"] == "regression" and doc["rows"][0]["key"] == "a|b()"


def test_latest_uses_this_machines_last_autosaved_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(baselines.ENV_VAR, str(tmp_path / "baselines"))
    new = write(tmp_path, "new.json", [m("a()", times(2, 2.0))])
    code, _, err = run_cli(capsys, "--latest", new)
    assert code == 2 and "no saved run of this machine" in err
    baselines.autosave([m("a()", times(1, 9.0))])
    second = baselines.autosave([m("a()", times(1))])
    code, out, _ = run_cli(capsys, "--latest", new)
    assert code == 1 and out.startswith(f"baseline: {second}\n")


@pytest.mark.parametrize("content, match", [
    (None, "cannot load .*missing.json"),
    ("{\"format\": \"opbench-res", "truncated or corrupt JSON at line 1"),
    ('{"format": "opbench-results", "version": 9, "environment": {}, "measurements": []}',
     "newer opbench"),
])
def test_bad_files_are_usage_errors(tmp_path, capsys, content, match):
    base = write(tmp_path, "base.json", [m("a()", times(1))])
    other = tmp_path / "missing.json"
    if content is not None:
        other.write_text(content)
    code, out, err = run_cli(capsys, base, str(other))
    assert code == 2 and out == ""
    assert re.search(match, err), err


def test_threshold_parsing(tmp_path, capsys):
    assert parse_fraction("5%", "--threshold") == pytest.approx(0.05)
    assert parse_fraction(" 0.02 ", "--threshold") == 0.02
    for bad in ("five", "0", "150%", "-1%"):
        with pytest.raises(UsageError, match="--threshold"):
            parse_fraction(bad, "--threshold")
    base = write(tmp_path, "base.json", [m("a()", times(1))])
    new = write(tmp_path, "new.json", [m("a()", times(1))])
    code, _, err = run_cli(capsys, base, new, "--threshold", "lots")
    assert code == 2 and "--threshold" in err


def test_module_entry_point(tmp_path):
    base = write(tmp_path, "base.json", [m("a()", times(1))])
    new = write(tmp_path, "new.json", [m("a()", times(2, 2.0))])
    proc = subprocess.run([sys.executable, "-m", "opbench", "compare", base, new],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "REGRESSION" in proc.stdout


def test_gate_on_throughput_judges_time_per_unit_of_work(tmp_path, capsys):
    # The new run does twice the work in twice the time: slower per run, same GB/s.
    base = write(tmp_path, "base.json", [m("f()", times(1), bytes=1e6)])
    new = write(tmp_path, "new.json", [m("f()", times(2, scale=2.0), bytes=2e6)])
    code, out, _ = run_cli(capsys, base, new)
    assert code == 1 and "REGRESSION" in out
    code, out, _ = run_cli(capsys, base, new, "--gate-on", "byte_rate")
    assert code == 0 and "GB/s" in out and "same" in out
    code, out, _ = run_cli(capsys, base, new, "--gate-on", "flop_rate")  # no FLOPs: on time
    assert code == 1 and " us " in out


def test_control_characters_of_names_never_reach_the_terminal(tmp_path, capsys):
    """Issue 34: names, and environment facts in the notes, are shown with their control
    characters as escapes."""
    import hostile

    old = write(tmp_path, "old.json", hostile.measurements(1e-6), {"torch": "2\x1b[2J"})
    new = write(tmp_path, "new.json", hostile.measurements(2e-6), {"torch": "3\r"})
    assert main(["compare", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert not hostile.TERMINAL_CONTROLS.search(out), repr(out)
    assert "\\x1b[2J\\x1b]0;title\\x07" in out and "torch: 2\\x1b[2J vs 3\\r" in out
    assert "fake\\n### opbench: no regression" in out  # no line of a name's


def test_redact_leaves_host_names_and_paths_out_of_the_pr_comment(tmp_path, capsys):
    key = f"{tmp_path}/bench.py::test_sort"
    old = write(tmp_path, "old.json", [m("f()", times(1), name=key)], {"hostname": "build-host-7"})
    new = write(tmp_path, "new.json", [m("f()", times(2, 2.0), name=key)], {"hostname": "build-host-8"})
    assert main(["compare", "--format", "markdown", str(old), str(new)]) == 1
    folder = str(tmp_path).replace("_", "\\_")  # as Markdown escapes it
    shown = capsys.readouterr().out
    assert "build-host-7" in shown and folder in shown
    assert main(["compare", "--format", "markdown", "--redact", str(old), str(new)]) == 1
    redacted = capsys.readouterr().out
    assert "build-host" not in redacted and folder not in redacted
    assert "…/bench.py::test\\_sort" in redacted
