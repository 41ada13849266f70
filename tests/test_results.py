"""opbench.store.results: versioned JSON results files, exact round trips, strict loading."""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import pickle
import random
import stat

import pytest

import opbench
from conftest import strip_object_line
from opbench import errors
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import Measurement, TaskSpec
from opbench.core.memory import MemoryCounts
from opbench.store import results
from opbench.store.results import ResultsFileError, dumps, load, save

ENV = {"hostname": "h", "cpu_count": 2}


def sample() -> list[Measurement]:
    spec = TaskSpec("x.sum()", "x = torch.ones(3)\ny = 2", "", "Sum", "[3]", "sum", "env1", 4)
    return [
        Measurement(1000, [0.1 + 0.2, 1.0000000000000002e-27, 5e-27, 123456789.123456789, 2 / 3], spec,
                    metadata={"n": 3, "tags": ["a", "b"], "nested": {"x": None, "y": 1.5}},
                    overhead=3.3e-8, clock="cuda-events",
                    info={"converged": True, "relative_ci": 0.0099, "stop_reason": "target"}),
        Measurement(1, [1.0, 2.0, 3.0], TaskSpec("f()", "pass")),
        Measurement(7, [3e-6], TaskSpec("g()", "pass", label="one time")),
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
    assert (doc["format"], doc["version"]) == ("opbench-results", 2)
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
    path = edit(tmp_path, lambda d: d.update(version=results.VERSION + 1))
    with pytest.raises(ResultsFileError, match=r"newer opbench.*upgrade opbench"):
        load(path)


@pytest.mark.parametrize("change, match", [
    (lambda d: d.update(format="pyperf"), "not an opbench results file"),
    (lambda d: d.pop("measurements"), "measurements: missing"),
    (lambda d: d.update(version="1"), "version"),
    (lambda d: d["measurements"][1].pop("raw_times"), r"measurements\[1\]: missing keys"),
    (lambda d: d["measurements"][1]["raw_times"].append("x"),
     r"measurements\[1\] \(f\(\)\)\.raw_times"),
    (lambda d: d["measurements"][2]["task_spec"].pop("stmt"), r"task_spec\.stmt"),
    (lambda d: d["measurements"][0]["task_spec"].update(num_threads=0), "num_threads"),
    (lambda d: d["measurements"][0].update(number_per_run=True), "number_per_run"),
    (lambda d: d["measurements"][0].update(surprise=1), "unknown keys"),
    # Values no Measurement can have: they used to load and crash later (ZeroDivisionError
    # in significant_figures, ValueError/OverflowError in Compare).
    (lambda d: d["measurements"][1].update(raw_times=[]), r"measurements\[1\] \(f\(\)\)\.raw_times: "
                                                          "expected a non-empty"),
    (lambda d: d["measurements"][1]["raw_times"].append(0.0), "finite positive numbers, got 0.0"),
    (lambda d: d["measurements"][1]["raw_times"].append(-1e-6), "finite positive"),
    (lambda d: d["measurements"][1]["raw_times"].append(float("nan")), "finite positive"),
    (lambda d: d["measurements"][1]["raw_times"].append(float("inf")), "finite positive"),
    (lambda d: d["measurements"][1].update(number_per_run=0), "number_per_run"),
    (lambda d: d["measurements"][1].update(overhead=-1.0), "overhead"),
    (lambda d: d["measurements"][1]["task_spec"].update(num_threads=10**9), "num_threads"),
    (lambda d: d["measurements"][1]["task_spec"].update(name=3), r"task_spec\.name"),
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
    from opbench.store.results import dumps, loads

    m = Measurement(3, [1e-6, 2e-6], TaskSpec("f()", "pass", label="L"))
    back = loads(dumps([m], environment={"host": "x"}))
    assert back[0] == m and back.environment == {"host": "x"}
    with pytest.raises(ResultsFileError, match=r"^worker 3: truncated or corrupt JSON"):
        loads(dumps([m])[:-10], source="worker 3")


def test_an_error_names_the_file_the_measurement_and_the_field(tmp_path):
    path = edit(tmp_path, lambda d: d["measurements"][0]["raw_times"].append(0))
    with pytest.raises(ResultsFileError) as e:
        load(path)
    # the file, the entry with its benchmark key, the field
    assert str(e.value).startswith(f"{path}: measurements[0] (Sum | [3] | sum | 4 threads | "
                                   "env=env1).raw_times: times must be finite positive")


def _usable(loaded) -> None:
    """What a user does with loaded results; none of it may raise."""
    for m in loaded:
        repr(m)
        m.describe()
        assert m.median > 0 and m.significant_figures >= 1
    if len(loaded):
        str(opbench.Compare(loaded))
    for c in loaded.instructions:
        assert c.per_run >= 0


def _mutations(text: str, rng: random.Random):
    """Byte flips, truncations and JSON-level type swaps of a valid file."""
    raw = text.encode()
    for _ in range(150):
        data = bytearray(raw)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        yield bytes(data)
    for _ in range(60):
        yield raw[:rng.randrange(len(raw))]
    doc = json.loads(text)
    # The last four are issue 34's: times that are floats but no clock's (they crashed
    # `show` with OverflowError), and counts past any counter's 64 bits.
    replacements = [None, True, 0, -1, 1.5, float("nan"), float("inf"), "", "x", [], {}, [0], 10**30,
                    1e-320, 1e308, 10**400, 2**64]

    def paths(node, prefix=()):
        yield prefix
        children = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        for k, v in children:
            yield from paths(v, (*prefix, k))

    every = [p for p in paths(doc) if p]
    for _ in range(400):
        mutated = json.loads(text)
        where = rng.choice(every)
        parent = mutated
        for k in where[:-1]:
            parent = parent[k]
        parent[where[-1]] = rng.choice(replacements)
        yield json.dumps(mutated).encode()
    yield from _damaged(text, rng)


def _damaged(text: str, rng: random.Random):
    """Issue 34's damage: a number of 5,000 digits (past Python's int conversion limit),
    nesting deeper than the parser recurses, at random places of a valid file."""
    import re

    numbers = [m.span() for m in re.finditer(r"(?<![\w.])\d+(?![\w.])", text)]
    for _ in range(20):
        start, end = rng.choice(numbers)
        yield (text[:start] + "7" * 5000 + text[end:]).encode()
    values = [m.end() for m in re.finditer(r'": ', text)]
    for depth in (2_000, 200_000):
        at = rng.choice(values)
        yield (text[:at] + "[" * depth + "1" + "]" * depth + text[at:].split(",", 1)[-1]).encode()
        yield (text[:at] + '{"a": ' * depth + "1" + "}" * depth + ", " + text[at:]).encode()


def test_fuzzed_files_load_usable_or_raise_results_file_error(tmp_path):
    items = [*sample(), InstructionCounts(100, (5000, 5010), TaskSpec("x + 1", "x = 1"),
                                          baseline=1000)]
    text = dumps(items, environment=ENV)
    rng = random.Random(0)
    outcomes = collections.Counter()
    for data in _mutations(text, rng):
        try:
            loaded = results.loads(data, source="fuzzed")
        except ResultsFileError:
            outcomes["refused"] += 1
            continue
        _usable(loaded)
        outcomes["loaded"] += 1
    assert outcomes["refused"] > 100 and outcomes["loaded"] > 10, outcomes


@pytest.mark.parametrize("damage, message", [
    (lambda t: t.replace('"number_per_run": 1000', '"number_per_run": ' + "9" * 5000),
     "a number of more than 4300 digits"),
    (lambda t: t.replace('"metadata": {', '"metadata": {"deep": ' + "[" * 100_000 + "]" * 100_000
                         + ", ", 1), "nested too deeply"),
    (lambda t: t.replace("0.30000000000000004", "1e-320"), r"between 1e-30 and 1e\+30 seconds"),
    (lambda t: t.replace("0.30000000000000004", "1e308"), r"between 1e-30 and 1e\+30 seconds"),
    (lambda t: t.replace('"counts": [\n    5000', '"counts": [\n    ' + "9" * 400), "counts"),
    (lambda t: t.replace('"num_threads": ', '"flops": 1e300, "num_threads": ', 1), "flops"),
])
def test_damage_that_used_to_escape_is_a_results_file_error(tmp_path, damage, message):
    """Issue 34: these escaped as ValueError, RecursionError or (later, in show)
    OverflowError."""
    items = [*sample(), InstructionCounts(100, (5000, 5010), TaskSpec("x + 1", "x = 1"),
                                          baseline=1000)]
    text = dumps(items, environment=ENV)
    damaged = damage(text)
    assert damaged != text
    with pytest.raises(ResultsFileError, match=message):
        results.loads(damaged, source="damaged")


def test_a_file_past_the_size_limit_is_refused_unread(tmp_path, monkeypatch):
    path = save(sample(), tmp_path / "r.json", environment=ENV)
    monkeypatch.setenv("OPBENCH_MAX_FILE_MB", "0.001")  # 1,048 bytes
    with pytest.raises(ResultsFileError, match=r"r\.json: [\d,]+ bytes, more than the 1,048 .*"
                                                r"OPBENCH_MAX_FILE_MB"):
        load(path)
    results_, problems = results.load_valid(path)
    assert len(results_) == 0 and "OPBENCH_MAX_FILE_MB" in problems[0]


def test_files_get_the_umask_permissions_not_mkstemp_s(tmp_path):
    old = os.umask(0o022)
    try:
        path = save(sample(), tmp_path / "r.json", environment=ENV)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644  # readable by a CI artifact server
    os.chmod(path, 0o640)
    save(sample(), path, environment=ENV)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640  # an existing file keeps its mode


def test_saving_onto_a_directory_or_into_a_missing_one_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        save(sample(), tmp_path, environment=ENV)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save(sample(), tmp_path / "missing" / "r.json", environment=ENV)
    with pytest.raises(ResultsFileError, match="is a directory"):
        load(tmp_path)


def test_instruction_counts_round_trip(tmp_path):
    c = InstructionCounts(100, (52_000, 52_010), TaskSpec("x + 1", "x = 1", name="add"),
                          baseline=2_000, info={"denoised": True})
    loaded = load(save([sample()[1], c], tmp_path / "r.json", environment=ENV))
    assert loaded.instructions == [c] and loaded.instructions[0].info == {"denoised": True}
    assert loaded.instructions[0].per_run == pytest.approx(500.0)
    assert len(loaded) == 1


def test_memory_counts_round_trip_and_bad_counts_are_named(tmp_path):
    host = {"allocations": [500, 500], "bytes": [409_600] * 2, "peak": [4096] * 2, "growth": [0, 0]}
    c = MemoryCounts(100, {"host": host}, TaskSpec("torch.add(a, b)", "pass", name="add"),
                     info={"memory_counter": "preloaded"})
    path = save([sample()[1], c], tmp_path / "r.json", environment=ENV)
    loaded = load(path)
    assert loaded.memory == [c] and loaded.memory[0].info == {"memory_counter": "preloaded"}
    assert json.loads(path.read_text())["memory"][0]["per_call"]["host"]["bytes"] == 4096.0
    doc = json.loads(path.read_text())
    doc["memory"][0]["counts"]["host"]["bytes"] = [1.5, 2]
    with pytest.raises(ResultsFileError, match=r"memory\[0\] \(add\)\.counts: host\.bytes"):
        results.loads(json.dumps(doc))


def test_torch_measurements_are_saved_converted(tmp_path):
    tb = pytest.importorskip("torch.utils.benchmark")
    theirs = tb.Timer("x + 1", setup="x = 1", label="add").timeit(100)
    (ours,) = load(save(theirs, tmp_path / "r.json", environment=ENV))
    assert ours.raw_times == theirs.raw_times and ours.number_per_run == 100
    assert ours.task_spec.label == "add" and ours.stmt == "x + 1"


def test_two_statements_under_one_key_are_refused_naming_both(tmp_path):
    import opbench.timer

    a = opbench.Timer(lambda: 1).timeit(10)
    b = opbench.Timer(lambda: 2).timeit(10)  # same module-qualified name, other line
    assert a.task_spec.key == b.task_spec.key
    with pytest.raises(errors.KeyCollisionError, match=r"(?s)share the benchmark key.*"
                       r"test_results\.py:\d+\).* and .*test_results\.py:\d+\)"):
        save([a, b], tmp_path / "r.json", environment=ENV)
    assert not (tmp_path / "r.json").exists()
    # replicates of one statement pool, as before
    t = opbench.timer.Timer("x + 1", setup="x = 1")
    save([t.timeit(10), t.timeit(10)], tmp_path / "r.json", environment=ENV)


def test_merge_replaces_what_ran_and_keeps_the_rest():
    old = sample()
    rerun = Measurement(1, [9.0], TaskSpec("f()", "pass"))
    merged = results.merge(old, [rerun])
    assert [m.task_spec.key for m in merged] == [old[0].task_spec.key, "one time", "f()"]
    assert merged[-1] is rerun
