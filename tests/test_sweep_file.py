"""Sweep files: whole-line appends, cut-short lines, refusals, and reading as Results."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

import opbench
from opbench import Measurement, TaskSpec
from opbench.errors import ResultsFileError, ResultsFileWarning
from opbench.store import sweep_file
from opbench.store.results import dumps
from opbench.store.sweep_file import SweepWriter


def _doc(host, median, sub_label="n=1", env=None):
    m = Measurement(10, [median * 10] * 3, TaskSpec("f()", "pass", label="L", sub_label=sub_label,
                                                     description="d", env=env or host))
    return json.loads(dumps(m, environment={"hostname": host, "cpu_model": "X", "worker": host}))


def test_each_result_is_one_line_readable_as_it_is_written(tmp_path):
    path = tmp_path / "s.jsonl"
    with SweepWriter(path, "timeit", {"number": 10}) as out:
        header = json.loads(path.read_text())
        assert header["format"] == "opbench-sweep" and header["method"] == "timeit"
        assert header["kwargs"] == {"number": 10} and "hostname" in header["environment"]
        out.add_result("k0", 0, _doc("a", 1e-6))
        assert len(opbench.load(path)) == 1  # while the writer still holds the file
        out.add_failure("k1", 1, {"title": "t", "error": "E: boom", "attempts": 2})
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines)
    assert sweep_file.failures(path.read_bytes()) == [
        {"key": "k1", "index": 1, "status": "failed", "title": "t", "error": "E: boom",
         "attempts": 2}]


def test_a_cut_short_last_line_is_skipped_and_resume_removes_it(tmp_path):
    path = tmp_path / "s.jsonl"
    with SweepWriter(path, "timeit", {}) as out:
        out.add_result("k0", 0, _doc("a", 1e-6))
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"key": "k1", "index": 1, "sta')  # a crash mid-write
    with pytest.warns(ResultsFileWarning, match="incomplete last line"):
        loaded = opbench.load(path)
    assert len(loaded) == 1
    with pytest.warns(ResultsFileWarning):
        out = SweepWriter(path, "timeit", {}, resume=True)
    with out:
        assert list(out.completed) == ["k0"]
        out.add_result("k1", 1, _doc("a", 2e-6, sub_label="n=2"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [m.sub_label for m in opbench.load(path)] == ["n=1", "n=2"]


def test_existing_results_are_never_overwritten(tmp_path):
    path = tmp_path / "s.jsonl"
    with SweepWriter(path, "timeit", {"number": 1}) as out:
        out.add_result("k0", 0, _doc("a", 1e-6))
    before = path.read_bytes()
    with pytest.raises(ResultsFileError, match=r"already holds 1 result.*resume=True"):
        SweepWriter(path, "timeit", {"number": 1})
    with pytest.raises(ResultsFileError, match=r"blocked_autorange.*Resume with the same"):
        SweepWriter(path, "blocked_autorange", {"number": 1}, resume=True)
    other = tmp_path / "results.json"
    opbench.save([Measurement(1, [1.0], TaskSpec("f()", "pass"))], other)
    with pytest.raises(ResultsFileError, match="not an opbench sweep file"):
        SweepWriter(other, "timeit", {}, resume=True)
    assert path.read_bytes() == before


def test_one_sweep_writes_a_file_at_a_time(tmp_path):
    path = tmp_path / "s.jsonl"
    with SweepWriter(path, "timeit", {}), \
            pytest.raises(ResultsFileError, match="another sweep is writing"):
        SweepWriter(path, "timeit", {}, resume=True)
    SweepWriter(path, "timeit", {}, resume=True).close()  # released on close


@pytest.mark.parametrize("line", ['{"key": "k", "status": "ok", "result": ' + "[" * 100_000,
                                  '{"key": "k", "index": ' + "7" * 5000 + ', "status": "ok"}'])
def test_a_line_nested_too_deeply_or_with_too_long_a_number_is_named(tmp_path, line):
    """Issue 34: these raised RecursionError and ValueError, which stopped `history`."""
    path = tmp_path / "s.jsonl"
    with SweepWriter(path, "timeit", {}) as out:
        out.add_result("k0", 0, _doc("a", 1e-6))
    path.write_text(path.read_text() + line + "\n")
    with pytest.raises(ResultsFileError, match=r"s\.jsonl: line 3: corrupt"):
        opbench.load(path)


def test_corrupt_and_future_files_name_the_problem(tmp_path):
    path = tmp_path / "s.jsonl"
    with SweepWriter(path, "timeit", {}) as out:
        out.add_result("k0", 0, _doc("a", 1e-6))
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ResultsFileError, match="line 2: corrupt JSON"):
        opbench.load(path)
    header = json.loads(lines[0])
    path.write_text(json.dumps({**header, "version": 99}) + "\n")
    with pytest.raises(ResultsFileError, match=r"version 99.*upgrade"):
        opbench.load(path)
    path.write_text(lines[0] + "\n" + json.dumps({"key": "k", "status": "ok"}) + "\n")
    with pytest.raises(ResultsFileError, match="line 2: a result line without its result"):
        opbench.load(path)


def test_a_sweep_over_two_hosts_loads_with_each_environment_and_shows_one_block_per_host(
        tmp_path):
    path = tmp_path / "s.jsonl"
    with SweepWriter(path, "timeit", {}) as out:
        out.add_result("k0", 0, _doc("host-a", 1e-6))
        out.add_result("k1", 1, _doc("host-b", 3e-6))
        out.add_result("k2", 2, _doc("host-a", 2e-6, sub_label="n=2"))
    loaded = opbench.load(path)
    assert [m.info["environment"]["hostname"] for m in loaded] == ["host-a", "host-b", "host-a"]
    # Shared facts stay as they are; differing ones list their values.
    assert loaded.environment == {"hostname": "host-a, host-b", "cpu_model": "X"}

    proc = subprocess.run([sys.executable, "-m", "opbench", "show", str(path)],
                          check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # A row per benchmark, keyed as the gate keys it: the host (the env) is part of it.
    rows = {line.split("|  ")[0].strip(): line.rsplit("|", 1)[1].strip()
            for line in proc.stdout.splitlines() if "n=" in line}
    assert rows == {"L | n=1 | d | env=host-a": "1.0", "L | n=1 | d | env=host-b": "3.0",
                    "L | n=2 | d | env=host-a": "2.0"}, proc.stdout
    assert "hostname=host-a, host-b" in proc.stdout


def test_a_file_holding_only_a_header_starts_afresh(tmp_path):
    path = tmp_path / "s.jsonl"
    SweepWriter(path, "timeit", {"number": 1}).close()  # a sweep refused before any result
    with SweepWriter(path, "blocked_autorange", {}) as out:
        assert out.completed == {}
    (header,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert header["method"] == "blocked_autorange"
