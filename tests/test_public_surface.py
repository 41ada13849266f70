"""The public surface: the names and module paths users import, listed, so that a
reorganisation of the package (opbench._floors) cannot drop one unnoticed.

Old flat module paths (opbench._moved) are the modules at their new paths, so a
user patching `opbench.results.save` patches what opbench itself calls.
"""
from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

import opbench
from conftest import PYTEST_PLUGIN_ARGS

tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")

ALL = {
    "__version__", "ABResult", "BenchmarkWarning", "CallgrindError", "CallgrindStats",
    "CallgrindUnavailableError", "Colorize", "Compare", "CompileError", "CompilerNotFoundError",
    "CopyIfCallgrind", "CppCompileError", "CudaError", "ElisionWarning", "Error", "FunctionCount",
    "FunctionCounts", "FuzzedParameter", "FuzzedSparseTensor", "FuzzedTensor", "Fuzzer",
    "FuzzerSpecError", "KeyCollisionError", "Language", "LaunchHoldWarning", "MachineWarning",
    "Measurement", "MemoryCountError", "MemoryCounts", "MemoryUnavailableError",
    "NothingToCompareError", "OverheadError", "ParameterAlias", "PlacementError",
    "Progress",
    "RecompileError",
    "ResolutionWarning", "ResultsFileError", "ResultsFileWarning", "SampleSizeWarning",
    "SchedulerUnreachableError", "SerializationError", "SweepError", "TaskSpec", "ThrottleWarning",
    "Timer", "UsageError", "collect_callgrind_all", "compare_ab", "cuda", "default_timer",
    "include_dir", "load", "ordered_unique", "plot_roofline", "run_all", "save", "select_unit",
    "set_torch_threads",
    "timer", "trim_sigfig", "unit_to_english",
}

# module path -> names imported from it (README, torch's paths, opbench 0.1's flat modules)
PATHS = {
    "opbench.timer": ["Timer", "Language", "default_timer"],
    "opbench.cuda": ["DeviceTimer", "Event", "MODES", "CACHES"],
    "opbench.cpp": ["load_inline", "include_dir"],
    "opbench.compile": ["bench_all", "benchmark_compile"],
    "opbench.op_fuzzers": [],
    "opbench.op_fuzzers.binary": ["BinaryOpFuzzer"],
    "opbench.op_fuzzers.unary": ["UnaryOpFuzzer"],
    "opbench.op_fuzzers.spectral": ["SpectralOpFuzzer"],
    "opbench.op_fuzzers.sparse_unary": ["UnaryOpSparseFuzzer"],
    "opbench.op_fuzzers.sparse_binary": ["BinaryOpSparseFuzzer"],
    "opbench.fuzzer": ["Fuzzer", "FuzzedParameter", "FuzzedTensor", "ParameterAlias"],
    "opbench.sparse_fuzzer": ["FuzzedSparseTensor"],
    "opbench.callgrind": ["CallgrindStats", "FunctionCounts", "CopyIfCallgrind"],
    "opbench.stats": ["median_ci", "relative_ci", "outliers", "summary"],
    "opbench.plot": ["plot_bars", "plot_speedup"],
    "opbench.export": ["to_csv", "to_html", "to_markdown"],
    "opbench.profile": ["profile"],
    "opbench.progress": ["Progress", "run_all"],
    "opbench.results": ["save", "load"],
    "opbench.measurement": ["Measurement", "TaskSpec"],
    "opbench.compare": ["Compare"],
    "opbench.ab": ["compare_ab"],
    "opbench.gate": ["compare"],
    "opbench.sweep": ["run_all"],
    "opbench.errors": ["Error", "BenchmarkWarning"],
    "opbench.cli": ["main"],
    "opbench.pytest_plugin": ["pytest_addoption"],
    "opbench.work": ["COUNT", "Work", "count"],
    "opbench.peaks": ["Peak", "get", "load", "measure", "path"],
    "opbench.throughput": ["Throughput"],
    "opbench.columns": ["METRICS"],
    "opbench.roofline": ["plot_roofline"],
}


def test_all_is_the_listed_surface():
    assert set(opbench.__all__) == ALL
    for name in ALL:
        assert getattr(opbench, name) is not None, name


@pytest.mark.parametrize("path", sorted(PATHS))
def test_public_module_paths_import(path):
    module = importlib.import_module(path)
    missing = [n for n in PATHS[path] if not hasattr(module, n)]
    assert not missing, f"{path} lacks {missing}"


def test_lazy_submodules_are_attributes():
    for name in opbench._LAZY_MODULES:
        assert isinstance(getattr(opbench, name), types.ModuleType), name


def test_the_timer_module_is_callable_as_torchs_clock():
    assert isinstance(opbench.timer, types.ModuleType)
    assert opbench.timer() <= opbench.timer()
    assert importlib.import_module("opbench.timer") is opbench.timer


def test_old_paths_are_the_same_module_objects():
    assert importlib.import_module("opbench.results") is importlib.import_module("opbench.store.results")
    build = importlib.import_module("opbench.engines.cpp.build")
    assert importlib.import_module("opbench.cpp.build") is build
    assert opbench.cuda is importlib.import_module("opbench.cuda")
    # The module keeps its own spec (pickling by name and reload rely on it).
    assert importlib.import_module("opbench.results").__spec__.name == "opbench.store.results"


def test_entry_points_name_real_modules():
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    script = pyproject["project"]["scripts"]["opbench"]
    module, _, attribute = script.partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))
    plugin = pyproject["project"]["entry-points"]["pytest11"]["opbench"]
    assert importlib.import_module(plugin) is importlib.import_module("opbench.pytest_plugin")


def test_python_dash_m_opbench_and_the_old_plugin_path(tmp_path):
    r = subprocess.run([sys.executable, "-m", "opbench", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "timeit" in r.stdout, r.stderr
    # `-p opbench.pytest_plugin`, the documented way before the entry point, still loads it.
    args = ["-p", "opbench.pytest_plugin"] if PYTEST_PLUGIN_ARGS else []
    r = subprocess.run([sys.executable, "-m", "pytest", *args, "--help"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0 and "--opbench-autosave" in r.stdout, r.stderr
