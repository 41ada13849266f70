"""Benchmark identity: one definition of "the same benchmark" for files, sweeps, gates."""
from __future__ import annotations

import pytest
import torch

import opbench
from opbench import gate
from opbench.core import identity
from opbench.core.measurement import Measurement, TaskSpec
from opbench.errors import NothingToCompareError
from opbench.store.results import load, merge, save
from opbench.sweep import task_keys


def _m(clock=None, name="f", factor=1.0):
    # 40 runs: enough for a 95% interval of the 10th percentile (stats.run_figure).
    return Measurement(1, [factor * 1e-6 * (1 + i / 100) for i in range(40)],
                       TaskSpec("f()", "pass", name=name), clock=clock)


def test_the_clock_is_part_of_the_key():
    host, device = _m(), _m(clock="cuda-events")
    assert identity.key(host) == "f" and identity.key(device) == "f | clock=cuda-events"
    # A host-clock baseline is never compared with a CUDA-event result as one benchmark.
    with pytest.raises(NothingToCompareError):
        gate.compare([host], [_m(clock="cuda-events", factor=0.5)])
    report = gate.compare([host, device], [_m(factor=2.0), _m(clock="cuda-events")])
    assert {r.key: r.status for r in report.rows} == {"f": "regression",
                                                      "f | clock=cuda-events": "same"}


def test_one_file_holds_one_statement_timed_by_two_clocks(tmp_path):
    save([_m(), _m(clock="cuda-events")], tmp_path / "r.json")
    assert [identity.key(r) for r in load(tmp_path / "r.json")] == ["f", "f | clock=cuda-events"]


def test_taskspec_key_is_the_identity_of_its_spec():
    spec = TaskSpec("sorted(xs)", "pass", label="sort", description="v2", num_threads=4)
    assert spec.key == identity.spec_key(spec) == "sort | v2 | 4 threads"


def test_sweep_keys_follow_the_globals_not_the_order():
    small, big = torch.ones(10), torch.ones(1000)

    def timer(x):
        return opbench.Timer("x.sum()", globals={"x": x}, label="sum")

    forward = task_keys([timer(small), timer(big)])
    backward = task_keys([timer(big), timer(small)])
    assert forward[0] == backward[1] and forward[1] == backward[0] and forward[0] != forward[1]
    # Same shape, other content: another task; same content: the same one.
    assert task_keys([timer(torch.zeros(10))]) != task_keys([timer(small)])
    assert task_keys([timer(torch.ones(10))]) == task_keys([timer(small)])
    # Device settings are part of it too.
    c1 = opbench.Timer("1", language="c++")
    c2 = opbench.Timer("1", language="c++", layouts=2)
    assert task_keys([c1]) != task_keys([c2])


def test_merged_saves_keep_each_kept_results_own_environment(tmp_path):
    path = tmp_path / "r.json"
    save([_m(name="old")], path, environment={"hostname": "first"})
    kept = merge(load(path), [_m(name="new")])
    save(kept, path, environment={"hostname": "second"})
    again = {r.task_spec.name: r for r in load(path)}
    assert again["old"].info["environment"] == {"hostname": "first"}
    assert "environment" not in again["new"].info


def test_a_callables_source_names_no_folder_of_the_machine(tmp_path, monkeypatch):
    """Issue 34: results recorded where a callable was defined as an absolute path (a
    user's home, a CI runner's work folder)."""
    import json as json_
    import os

    from opbench import Timer
    from opbench.core.identity import callable_source, source_file

    project = tmp_path / "proj"
    (project / "bench").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    monkeypatch.chdir(project / "bench")
    code = compile("def work():\n    return 1\n", str(project / "bench" / "test_x.py"), "exec")
    namespace: dict = {}
    exec(code, namespace)
    assert callable_source(namespace["work"]) == "bench/test_x.py:1"
    m = Timer(namespace["work"]).timeit(1)
    assert m.info["source"] == "bench/test_x.py:1" and str(tmp_path) not in json_.dumps(m.info)
    import opbench

    # Outside the project: from the sys.path folder it was imported from, else the name.
    assert source_file(opbench.__file__) == "opbench/__init__.py"
    assert source_file(os.path.join(os.sep, "elsewhere", "entirely", "x.py")) == "x.py"
    assert source_file("<stdin>") == "<stdin>"
