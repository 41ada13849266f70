"""opbench.store.pytest_benchmark_file: pytest-benchmark's JSON read as opbench results, so
an old suite's baseline compares with opbench's runs."""
from __future__ import annotations

import json
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
