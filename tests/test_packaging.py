"""Packaging metadata: the `torch` extra keeps a user's own torch build, and only the test
requirements pin the exact torch CI runs. (That the wheel ships the whole header tree,
opbench/detail/ included, is checked by tools/compat-check: it installs a built wheel, and
the C++ Timer tests compile against the installed headers.)"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def _torch_requirements(requirements: list[str]) -> list[str]:
    return [r.replace(" ", "") for r in requirements if re.match(r"torch\b", r)]


def test_torch_extra_names_a_floor_and_no_ceiling():
    # An exact pin here made `pip install "opbench[torch]"` replace a user's CUDA
    # build with the CPU wheel the tests use.
    (requirement,) = _torch_requirements(EXTRAS["torch"])
    assert re.fullmatch(r"torch>=\d+\.\d+(\.\d+)?", requirement), requirement


def test_exact_torch_pin_only_where_tests_need_it():
    (test_pin,) = _torch_requirements(EXTRAS["test"])
    assert re.fullmatch(r"torch==\d+\.\d+\.\d+", test_pin), test_pin
    dev = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert _torch_requirements([line for line in dev if not line.startswith("#")]) == [test_pin]
    floor = _torch_requirements(EXTRAS["torch"])[0].removeprefix("torch>=")
    assert tuple(map(int, floor.split("."))) <= tuple(map(int, test_pin[7:].split(".")))


def test_error_messages_do_not_pin_torch():
    sources = [*(ROOT / "python").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    pinned = [str(p.relative_to(ROOT)) for p in sources if "pip install torch==" in p.read_text()]
    assert pinned == []

