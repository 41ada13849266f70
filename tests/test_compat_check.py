"""tools/compat-check's own logic: which tests form the parity suite, what the venv gets
besides torch, and how pytest's results are counted. (Running it builds a multi-GB venv:
that is done by hand, per torch version; the README lists the versions that pass.)"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tomllib", reason="tools/compat-check reads pyproject.toml with tomllib")

TOOL = Path(__file__).resolve().parents[1] / "tools" / "compat-check"


def _load_tool():
    loader = importlib.machinery.SourceFileLoader("compat_check", str(TOOL))
    spec = importlib.util.spec_from_loader("compat_check", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


compat = _load_tool()


def test_parity_suite_is_the_differential_tests():
    files = compat.parity_files()
    # Module-level imports, imports inside a test, importorskip, the fuzzer fixture.
    assert {"tests/test_compare.py", "tests/test_measurement.py", "tests/test_callgrind_collect.py",
            "tests/test_compile.py", "tests/test_op_fuzzers.py"} <= set(files)
    # Files that only mention torch.utils.benchmark, or do not compare with torch.
    assert not {"tests/test_compat_check.py", "tests/test_cpp_headers.py",
                "tests/test_packaging.py", "tests/test_recipe.py"} & set(files)


def test_venv_gets_the_test_extra_without_its_torch_pin():
    requirements = compat.test_requirements()
    assert "pytest-xdist" in requirements
    assert not [r for r in requirements if r.startswith("torch")]


def test_results_are_counted_from_junit(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_a" name="test_ok"/>'
        '<testcase classname="tests.test_a" name="test_bad">'
        '<failure message="assert 1 == 2&#10;more">trace</failure></testcase>'
        '<testcase classname="tests.test_b" name="test_boom"><error message="fixture">x</error>'
        '</testcase>'
        '<testcase classname="tests.test_b" name="test_gpu">'
        '<skipped message="needs a CUDA device"/></testcase>'
        '<testcase classname="tests.test_b" name="test_gpu2">'
        '<skipped message="needs a CUDA device"/></testcase>'
        '</testsuite></testsuites>')
    counts, failures, skips = compat.summarise(junit)
    assert dict(counts) == {"passed": 1, "failed": 1, "errors": 1, "skipped": 2}
    assert failures == ["FAILURE tests.test_a::test_bad: assert 1 == 2",
                        "ERROR tests.test_b::test_boom: fixture"]
    assert skips == {"needs a CUDA device": 2}


def test_a_bad_version_is_refused_before_any_work():
    proc = subprocess.run([sys.executable, str(TOOL), "2.x; rm"], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 2
    assert "is not a version such as 2.14.1" in proc.stderr
