"""opbench.store.pytest_benchmark_file: pytest-benchmark's JSON read as opbench results, so
an old suite's baseline compares with opbench's runs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opbench.errors import ResultsFileError, ResultsFileWarning
from opbench.gate import compare
from opbench.store.results import load


def _doc(benchmarks: list[dict]) -> dict:
    return {"machine_info": {"node": "ci-1", "python_version": "3.11.7", "machine": "x86_64",
                             "cpu": {"brand_raw": "AMD EPYC", "count": 2}},
            "commit_info": {"id": "abc123", "dirty": True}, "benchmarks": benchmarks,
            "datetime": "2024-05-01T10:00:00+00:00", "version": "5.1.0"}


def _bench(name: str, data: list[float] | None, iterations: int = 1, **extra) -> dict:
    stats = {"min": 1.0, "max": 2.0, "mean": 1.5, "rounds": 3, "iterations": iterations}
    if data is not None:
        stats["data"] = data
    return {"group": None, "name": name.split("::")[-1], "fullname": name, "params": None,
            "param": None, "extra_info": {}, "options": {}, "stats": stats, **extra}


def test_each_benchmark_is_a_measurement_keyed_by_its_node_id(tmp_path: Path) -> None:
    path = tmp_path / "pb.json"
    path.write_text(json.dumps(_doc([
        _bench("t.py::test_a", [1e-6 * (1 + i / 100) for i in range(50)], iterations=10,
               group="parse", extra_info={"n": 3})])))
    results = load(path)
    (m,) = results
    assert m.task_spec.key == "t.py::test_a" and m.number_per_run == 10
    assert m.times == pytest.approx([1e-6 * (1 + i / 100) for i in range(50)])
    assert m.info["group"] == "parse" and m.info["extra_info"] == {"n": 3}
    env = results.environment
    assert (env["python"], env["cpu_model"], env["cpu_count"], env["hostname"]) == \
        ("3.11.7", "AMD EPYC", 2, "ci-1")
    assert env["git_commit"] == "abc123+dirty" and env["source"] == "pytest-benchmark 5.1.0"
    # As a baseline for the gate: matched by key, decided as any other run.
    from opbench.core.measurement import Measurement, TaskSpec

    new = [Measurement(1, [2e-6 * (1 + i / 100) for i in range(50)],
                       TaskSpec("f()", "pass", name="t.py::test_a"))]
    (row,) = compare(results, new).rows
    assert row.status == "regression" and row.decision.ratio == pytest.approx(2.0, rel=0.01)


def test_benchmarks_saved_without_their_rounds_are_left_out_and_named(tmp_path: Path) -> None:
    path = tmp_path / "pb.json"
    path.write_text(json.dumps(_doc([_bench("t.py::a", [1e-6] * 5), _bench("t.py::b", None)])))
    with pytest.warns(ResultsFileWarning, match=r"1 pytest-benchmark benchmark\(s\) saved "
                                                r"without their rounds .* t.py::b; save them with"):
        assert [m.task_spec.key for m in load(path)] == ["t.py::a"]
    path.write_text(json.dumps(_doc([_bench("t.py::b", None)])))
    with pytest.raises(ResultsFileError, match="--benchmark-save-data"):
        load(path)


@pytest.mark.parametrize("bench, message", [
    (_bench("t.py::a", [1e-6, -1.0]), "stats.data must be a non-empty list of positive times"),
    (_bench("t.py::a", [1e-6], iterations=0), "stats.iterations must be a positive int"),
    ({"stats": {"data": [1e-6]}}, "no fullname or name"),
])
def test_impossible_entries_are_named(tmp_path: Path, bench: dict, message: str) -> None:
    path = tmp_path / "pb.json"
    path.write_text(json.dumps(_doc([bench])))
    with pytest.raises(ResultsFileError, match=message):
        load(path)


def test_rounds_left_single_calls_by_a_slow_first_call_are_named_with_the_fix(
        tmp_path: Path) -> None:
    # pytest-benchmark's own target round: 5 us. test_a's rounds are single calls of 0.3 us
    # (its sizing call was slow: a cold first call); test_b's are 20 calls of 0.3 us; test_c's
    # single calls of 20 us, past the target: sized as pytest-benchmark meant.
    target = {"min_time": 5e-06, "warmup": False}
    benches = [_bench("t.py::test_a", [3.3e-7] * 50, options=target),
               _bench("t.py::test_b", [3.0e-7] * 50, iterations=20, options=target),
               _bench("t.py::test_c", [2.0e-5] * 50, options={"min_time": "0.000005"}),
               _bench("t.py::test_d", [3.3e-7] * 50)]  # no target saved: nothing to say
    path = tmp_path / "pb.json"
    path.write_text(json.dumps(_doc(benches)))
    with pytest.warns(ResultsFileWarning) as caught:
        results = load(path)
    message, = [str(w.message) for w in caught]
    assert message.startswith(f"{path}: 1 pytest-benchmark benchmark(s) timed in rounds of one "
                              "call each, shorter than its own target round")
    assert "t.py::test_a;" in message and "test_b" not in message and "test_c" not in message
    assert message.endswith("save the baseline again with --benchmark-warmup=on")
    assert [m.task_spec.key for m in results] == ["t.py::test_a", "t.py::test_b", "t.py::test_c",
                                                  "t.py::test_d"]
    # The command line shows it as one line of its own, not in Python's warning format.
    shown = subprocess.run([sys.executable, "-m", "opbench", "show", str(path)],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.startswith(f"python -m opbench show: warning: {path}: 1 pytest-benchmark")
    assert "t.py::test_a;" in shown.stderr and "ResultsFileWarning" not in shown.stderr
    assert len(shown.stderr.splitlines()) == 1
