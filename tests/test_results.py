"""opbench.results: versioned JSON results files, exact round trips, strict loading."""
from __future__ import annotations

import dataclasses
import json
import os
import pickle

import pytest

from conftest import strip_object_line
from opbench import environment, errors, results
from opbench.measurement import Measurement, TaskSpec
from opbench.results import ResultsFileError, load, save

ENV = {"hostname": "h", "cpu_count": 2}


def sample() -> list[Measurement]:
    spec = TaskSpec("x.sum()", "x = torch.ones(3)\ny = 2", "", "Sum", "[3]", "sum", "env1", 4)
    return [
        Measurement(1000, [0.1 + 0.2, 1e-300, 5e-324, 123456789.123456789, 2 / 3], spec,
                    metadata={"n": 3, "tags": ["a", "b"], "nested": {"x": None, "y": 1.5}},
                    overhead=3.3e-8, clock="cuda-events",
                    info={"converged": True, "relative_ci": 0.0099, "stop_reason": "target"}),
        Measurement(1, [1.0, 2.0, 3.0], TaskSpec("f()", "pass")),
        Measurement(7, [], TaskSpec("g()", "pass", label="empty")),
    ]


def fields(m: Measurement) -> dict:
    return {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}


def test_round_trip_is_exact(tmp_path):
    path = tmp_path / "run.json"
    original = sample()
    assert save(original, path, environment=ENV) == path
    loaded = load(path)
    assert [fields(m) for m in loaded] == [fields(m) for m in original]
    for a, b in zip(loaded, original):
        assert [t.hex() for t in a.raw_times] == [t.hex() for t in b.raw_times]
        assert strip_object_line(repr(a)) == strip_object_line(repr(b))
    assert loaded.environment == ENV and loaded.version == results.VERSION


def test_file_layout_holds_statistics_and_environment(tmp_path):
    path = save(sample()[1], tmp_path / "one.json")  # a single Measurement is fine
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["version"]) == ("opbench-results", 1)
    assert doc["environment"]["cpu_count"] == os.cpu_count()
    (entry,) = doc["measurements"]
    assert entry["raw_times"] == [1.0, 2.0, 3.0]
    assert entry["statistics"]["median"] == 2.0 and entry["statistics"]["n"] == 3
    assert entry["task_spec"]["num_threads"] == 1


def test_unjsonable_metadata_is_left_out_with_a_warning(tmp_path):
    m = Measurement(1, [1.0], TaskSpec("f()", "pass"),
                    metadata={"ok": 1, "obj": object(), 3: "int key", "t": (1, 2)},
                    info={"fine": "yes", "nan": float("nan")})
    with pytest.warns(errors.BenchmarkWarning, match="not JSON-able"):
        save([m], tmp_path / "r.json", environment=ENV)
    (loaded,) = load(tmp_path / "r.json")
    assert loaded.metadata == {"ok": 1} and loaded.info == {"fine": "yes"}


def test_pickle_keeps_working():
    for m in sample():
        clone = pickle.loads(pickle.dumps(m))
        assert fields(clone) == fields(m)
        assert repr(clone).splitlines()[1:] == repr(m).splitlines()[1:]


@pytest.mark.parametrize("cut", [0, 1, 20, 100, -2])
def test_truncated_file_is_a_clear_error(tmp_path, cut):
    path = save(sample(), tmp_path / "r.json", environment=ENV)
    text = path.read_text()
    path.write_text(text[:cut] if cut >= 0 else text[:len(text) + cut])
    with pytest.raises(ResultsFileError, match=r"r\.json: truncated or corrupt JSON at line \d+"):
        load(path)


def test_corrupt_bytes_are_a_clear_error(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b'{"format": "opbench-results", \xff\xfe}')
    with pytest.raises(ResultsFileError, match="not UTF-8"):
        load(path)


def edit(tmp_path, change):
    path = save(sample(), tmp_path / "r.json", environment=ENV)
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


def test_future_version_says_upgrade(tmp_path):
    path = edit(tmp_path, lambda d: d.update(version=2))
    with pytest.raises(ResultsFileError, match="newer opbench.*upgrade opbench"):
        load(path)


@pytest.mark.parametrize("change, match", [
    (lambda d: d.update(format="pyperf"), "not an opbench results file"),
    (lambda d: d.pop("measurements"), "measurements: missing"),
    (lambda d: d.update(version="1"), "version"),
    (lambda d: d["measurements"][1].pop("raw_times"), r"measurements\[1\]: missing keys"),
    (lambda d: d["measurements"][1]["raw_times"].append("x"), r"measurements\[1\]\.raw_times"),
    (lambda d: d["measurements"][2]["task_spec"].pop("stmt"), r"task_spec\.stmt"),
    (lambda d: d["measurements"][0]["task_spec"].update(num_threads=0), "num_threads"),
    (lambda d: d["measurements"][0].update(number_per_run=True), "number_per_run"),
    (lambda d: d["measurements"][0].update(surprise=1), "unknown keys"),
])
def test_malformed_files_fail_before_building_anything(tmp_path, monkeypatch, change, match):
    path = edit(tmp_path, change)
    built = []
    real = results._measurement_from_dict
    monkeypatch.setattr(results, "_measurement_from_dict", lambda e: built.append(e) or real(e))
    with pytest.raises(ResultsFileError, match=match):
        load(path)
    assert built == []  # validation runs over the whole file first


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = save(sample()[:1], tmp_path / "r.json", environment=ENV)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save(sample(), path, environment=ENV)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["r.json"]


def test_bad_input_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match="finite"):
        save([Measurement(1, [float("inf")], TaskSpec("f()", "pass"))], tmp_path / "r.json")
    with pytest.raises(TypeError, match="Measurements"):
        save(["not a measurement"], tmp_path / "r.json")
    assert os.listdir(tmp_path) == []


def test_dumps_loads_round_trip_and_name_the_source():
    from opbench.results import dumps, loads

    m = Measurement(3, [1e-6, 2e-6], TaskSpec("f()", "pass", label="L"))
    back = loads(dumps([m], environment={"host": "x"}))
    assert back[0] == m and back.environment == {"host": "x"}
    with pytest.raises(ResultsFileError, match="^worker 3: truncated or corrupt JSON"):
        loads(dumps([m])[:-10], source="worker 3")
