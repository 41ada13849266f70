"""The public surface: ``opbench.__all__`` is the one list of public names, and the lazy
loader serves each from the ``if TYPE_CHECKING:`` block of ``opbench/__init__.py``; here
both are checked against each other, and the module paths users import (README, docs,
torch's paths) are listed so that a reorganisation of the package cannot drop one unnoticed.
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

# module path -> names imported from it (README, docs, torch's paths)
PATHS = {
    "opbench.timer": ["Timer", "Language", "default_timer"],
    "opbench.engines.cuda": ["DeviceTimer", "Event", "MODES", "CACHES"],
    "opbench.engines.cpp": ["load_inline", "include_dir"],
    "opbench.analysis.compile": ["bench_all", "benchmark_compile", "overheads"],
    "opbench.op_fuzzers": [],
    "opbench.op_fuzzers.binary": ["BinaryOpFuzzer"],
    "opbench.op_fuzzers.unary": ["UnaryOpFuzzer"],
    "opbench.op_fuzzers.spectral": ["SpectralOpFuzzer"],
    "opbench.op_fuzzers.sparse_unary": ["UnaryOpSparseFuzzer"],
    "opbench.op_fuzzers.sparse_binary": ["BinaryOpSparseFuzzer"],
    "opbench.fuzz.fuzzer": ["Fuzzer", "FuzzedParameter", "FuzzedTensor", "ParameterAlias"],
    "opbench.fuzz.sparse_fuzzer": ["FuzzedSparseTensor"],
    "opbench.callgrind": ["CallgrindStats", "FunctionCounts", "CopyIfCallgrind"],
    "opbench.stats": ["median_ci", "relative_ci", "outliers", "summary"],
    "opbench.analysis.plot": ["plot_bars", "plot_speedup"],
    "opbench.analysis.export": ["to_csv", "to_html", "to_markdown"],
    "opbench.core.profile": ["profile"],
    "opbench.progress": ["Progress"],
    "opbench.store.results": ["save", "load"],
    "opbench.core.measurement": ["Measurement", "TaskSpec"],
    "opbench.analysis.compare": ["Compare"],
    "opbench.gate.ab": ["compare_ab"],
    "opbench.gate": ["compare"],
    "opbench.sweep": ["run_all"],
    "opbench.errors": ["Error", "BenchmarkWarning"],
    "opbench.integrations.cli": ["main"],
    "opbench.integrations.pytest_plugin": ["pytest_addoption"],
    "opbench.core.work": ["COUNT", "Work", "count"],
    "opbench.core.peaks": ["Peak", "get", "load", "measure", "path"],
    "opbench.core.throughput": ["Throughput"],
    "opbench.analysis.columns": ["METRICS"],
    "opbench.core.roofline": ["plot_roofline"],
}

LAZY = opbench._lazy_table()


@pytest.mark.parametrize("name", opbench.__all__)
def test_every_public_name_resolves(name):
    assert getattr(opbench, name) is not None


def test_each_public_name_is_imported_once_and_listed_once():
    assert len(opbench.__all__) == len(set(opbench.__all__))
    eager = {n for n in opbench.__all__ if n in vars(opbench)} - set(LAZY)
    # What the package imports on `import opbench` (errors, Progress, the version) is
    # not in the lazy table as well; everything else is, exactly once.
    assert set(opbench.__all__) - eager <= set(LAZY)


def test_the_lazy_table_holds_public_names_and_submodules_only():
    extra = [n for n in LAZY if n not in opbench.__all__
             and not isinstance(getattr(opbench, n), types.ModuleType)]
    assert not extra, f"imported under TYPE_CHECKING but not in __all__: {extra}"


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        opbench.no_such_name
    assert not hasattr(opbench, "compile")  # an old flat path, gone


def test_import_opbench_imports_no_torch_and_no_lazy_module():
    code = ("import sys, opbench; assert 'torch' not in sys.modules, 'torch'; "
            "assert 'opbench.timer' not in sys.modules, 'opbench.timer'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("path", sorted(PATHS))
def test_public_module_paths_import(path):
    module = importlib.import_module(path)
    missing = [n for n in PATHS[path] if not hasattr(module, n)]
    assert not missing, f"{path} lacks {missing}"


def test_the_timer_module_is_callable_as_torchs_clock():
    assert isinstance(opbench.timer, types.ModuleType)
    assert opbench.timer() <= opbench.timer()
    assert importlib.import_module("opbench.timer") is opbench.timer


def test_entry_points_name_real_modules():
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    script = pyproject["project"]["scripts"]["opbench"]
    module, _, attribute = script.partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))
    plugin = pyproject["project"]["entry-points"]["pytest11"]["opbench"]
    assert plugin == "opbench.integrations.pytest_plugin"
    importlib.import_module(plugin)


def test_python_dash_m_opbench_and_the_plugin(tmp_path):
    r = subprocess.run([sys.executable, "-m", "opbench", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "timeit" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "pytest", *PYTEST_PLUGIN_ARGS, "--help"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0 and "--opbench-autosave" in r.stdout, r.stderr
