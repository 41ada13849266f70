"""opbench.environment: metadata collection and once-per-process warnings."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from opbench import environment, errors


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(errors, "_shown", set())


def test_collect_is_json_able_and_complete():
    env = environment.collect()
    assert json.loads(json.dumps(env)) == env
    for key in ("hostname", "cpu_model", "cpu_count", "governor", "python", "opbench",
                "torch", "cuda", "device", "num_threads"):
        assert key in env
    assert env["cpu_count"] >= 1 and env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert env["clock_read_cost_ns"] > 0 and env["clock_resolution_ns"] > 0


def test_collect_never_imports_torch():
    code = ("import sys, opbench.environment as e; env = e.collect(); "
            "assert 'torch' not in sys.modules; assert env['torch'] is None")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_collect_reports_an_imported_torch():
    torch = pytest.importorskip("torch")
    env = environment.collect()
    assert env["torch"] == str(torch.__version__)
    assert env["num_threads"] == torch.get_num_threads()
    assert env["cuda"] == torch.version.cuda


def fake_governors(monkeypatch, tmp_path, names):
    for i, name in enumerate(names):
        d = tmp_path / f"cpu{i}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(name + "\n")
    monkeypatch.setattr(environment, "_GOVERNOR_GLOB",
                        str(tmp_path / "cpu[0-9]*" / "cpufreq" / "scaling_governor"))


def test_governor_warning_fires_once(monkeypatch, tmp_path):
    fake_governors(monkeypatch, tmp_path, ["performance", "powersave"])
    assert environment.collect()["governor"] == "performance/powersave"
    with pytest.warns(errors.BenchmarkWarning, match="governor is powersave"):
        environment.check_machine()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        environment.check_machine()  # once per process


def test_performance_governor_is_quiet(monkeypatch, tmp_path):
    fake_governors(monkeypatch, tmp_path, ["performance", "performance"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        environment.check_machine()


def test_debug_build_warning(monkeypatch, tmp_path):
    fake_governors(monkeypatch, tmp_path, [])
    monkeypatch.setattr(sys, "gettotalrefcount", lambda: 0, raising=False)
    with pytest.warns(errors.BenchmarkWarning, match=r"debug build \(Python"):
        environment.check_machine()


def test_too_few_samples_message_names_the_minimum():
    with pytest.warns(errors.BenchmarkWarning, match=r"\(3\) for a 99%.*at least 8"):
        environment.warn_too_few_samples(3, 0.99)


def test_governors_are_read_once_per_process(monkeypatch, tmp_path):
    fake_governors(monkeypatch, tmp_path, ["performance"])
    reads = []
    real = environment.governors
    monkeypatch.setattr(environment, "governors", lambda: reads.append(1) or real())
    for _ in range(3):
        environment.check_machine()
    assert reads == [1]  # a sweep of measurements reads sysfs once, not per measurement
