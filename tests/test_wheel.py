"""Wheels: built as a user's pip builds them, they time Python with no compiler anywhere.

The fast tests read the release configuration (``[tool.cibuildwheel]`` in
pyproject.toml) against what the documentation promises. The slow test builds a
wheel (``pip wheel . --no-deps``), checks its platform tags with ``auditwheel show``,
installs it into a fresh virtual environment and, with no g++, c++, clang++ or cmake
on ``PATH``, runs the demo and a Python Timer there and checks that a C++ statement
fails with the clear "no compiler" error.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import fresh_venv

_run = fresh_venv.run
ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())
INSTALL_PAGE = (ROOT / "docs" / "install.md").read_text()
COMPILERS = ("g++", "c++", "clang++", "gcc", "cc", "cmake")


def test_release_wheels_are_manylinux_2_28_for_both_architectures() -> None:
    cibw = CONFIG["tool"]["cibuildwheel"]
    assert cibw["manylinux-x86_64-image"] == cibw["manylinux-aarch64-image"] == "manylinux_2_28"
    assert cibw["linux"]["archs"] == ["x86_64", "aarch64"]
    assert "musllinux" in cibw["skip"]
    # Every CPython the package says it supports gets a wheel.
    floor = re.fullmatch(r">=3\.(\d+)", CONFIG["project"]["requires-python"])
    assert floor and f"cp3{floor[1]}-*" in cibw["build"].split()
    # The wheel's own check times Python: nothing in it needs a compiler.
    assert "Timer(" in cibw["test-command"] and "c++" not in cibw["test-command"]


def test_the_documentation_states_the_platforms_and_tags() -> None:
    for needed in ("manylinux_2_28", "manylinux_2_35", "x86-64", "aarch64",
                   "macOS and Windows are not supported"):
        assert needed in INSTALL_PAGE, needed
    readme = (ROOT / "README.md").read_text()
    assert "manylinux_2_28" in readme and "macOS and Windows are not supported" in readme


def _glibc() -> tuple[int, int]:
    name, version = platform.libc_ver()
    assert name == "glibc", "the wheel test needs a glibc Linux"
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


@pytest.mark.slow
def test_a_built_wheel_times_python_with_no_compiler_on_path(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(dist)],
         timeout=1800)
    (wheel,) = dist.glob("opbench-*.whl")

    auditwheel = shutil.which("auditwheel", path=str(Path(sys.executable).parent)) or "auditwheel"
    shown = _run([auditwheel, "show", str(wheel)]).stdout
    tag = re.search(r'"(manylinux_(\d+)_(\d+)_\w+)"', shown)
    assert tag, shown
    # Tagged for the glibc that built it (this machine's), never for a newer one.
    assert (int(tag[2]), int(tag[3])) <= _glibc(), shown
    print(f"{wheel.name}: auditwheel: {tag[1]}")

    python, site = fresh_venv.create(tmp_path / "venv", wheel, "--no-index")

    bin_dir = tmp_path / "bin"  # PATH: the venv's own scripts only
    bin_dir.mkdir()
    path = f"{python.parent}{os.pathsep}{bin_dir}"
    assert not [c for c in COMPILERS if shutil.which(c, path=path)]
    env = {"PATH": path, "HOME": str(tmp_path), "OPBENCH_CACHE_DIR": str(tmp_path / "cache"),
           "LANG": "C.UTF-8"}

    fresh_venv.assert_imports_from(python, site, env, tmp_path)

    demo = _run([str(python), "-m", "opbench", "demo", "--color", "never", "--sizes", "1", "64",
                 "--threads", "1", "--min-run-time", "0.01"], env=env, cwd=tmp_path, timeout=600)
    assert "Batched dot" in demo.stdout and "mul/sum" in demo.stdout, demo.stdout

    timed = _run([str(python), "-c",
                  "import opbench\n"
                  "m = opbench.Timer('sorted(xs)', setup='xs = list(range(100, 0, -1))')"
                  ".blocked_autorange(min_run_time=0.05)\n"
                  "assert m.median > 0, m\n"
                  "print(opbench.Timer(lambda: None).timeit(1000).median > 0)\n"],
                 env=env, cwd=tmp_path, timeout=300)
    assert timed.stdout.strip() == "True"

    cpp = subprocess.run([str(python), "-c",
                          "import opbench\n"
                          "try:\n"
                          "    opbench.Timer('int x = 1;', language='c++').timeit(10)\n"
                          "except opbench.CompilerNotFoundError as e:\n"
                          "    print('refused:', e)\n"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert cpp.returncode == 0 and cpp.stdout.startswith("refused: no C++ compiler found"), (
        cpp.stdout + cpp.stderr)
    assert "Install g++ or clang++" in cpp.stdout
