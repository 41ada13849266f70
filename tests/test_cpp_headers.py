"""The public C++ headers: each compiles on its own, and the unit tests under
tests/cpp/ compile and pass. Needs a C++ compiler (skipped, with the reason,
where there is none)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from opbench.cpp import include_dir

CXX = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH")

HEADERS = sorted(p.name for p in (Path(include_dir()) / "opbench").glob("*.h"))
UNIT_TESTS = sorted((Path(__file__).parent / "cpp").glob("test_*.cpp"))


def test_include_dir_holds_the_library() -> None:
    for name in ("opbench.h", "clock.h", "barrier.h", "loop.h", "stats.h", "autorange.h", "fiber.h"):
        assert name in HEADERS


@pytest.mark.parametrize("header", HEADERS)
def test_header_compiles_alone(header: str, tmp_path: Path) -> None:
    tu = tmp_path / "tu.cpp"
    tu.write_text(f'#include "opbench/{header}"\n')
    proc = subprocess.run(
        [CXX, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", f"-I{include_dir()}", str(tu)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("source", UNIT_TESTS, ids=lambda p: p.stem)
def test_header_unit_tests(source: Path, tmp_path: Path) -> None:
    exe = tmp_path / source.stem
    build = subprocess.run(
        [CXX, "-std=c++17", "-O2", "-Wall", "-Wextra", f"-I{include_dir()}", str(source), "-o", str(exe)],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "OK"
