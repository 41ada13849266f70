"""opbench.engines.cpp.engine and its template, csrc/templates/timer.cpp: the slots the engine
fills, the template compiling alone (the engine's behaviour with a compiler is in
tests/test_engines_cpp.py)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from opbench.engines.cpp import include_dir, template_path
from opbench.engines.cpp.engine import CppEngine, generate_source, layout_flags

TEMPLATE = Path(template_path())
CXX = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")


def test_the_template_is_the_real_file_with_four_slots() -> None:
    checkout = Path(__file__).resolve().parents[1] / "csrc" / "templates" / "timer.cpp"
    assert TEMPLATE.read_text() == checkout.read_text()
    slots = re.findall(r"^\s*// opbench:slot (\w+)\s*$", TEMPLATE.read_text(), re.MULTILINE)
    assert slots == ["torch_include", "global_setup", "setup", "stmt"]


def test_the_engine_fills_every_slot_and_keeps_the_rest() -> None:
    src = generate_source("work(s);", "int s = 0;", "#include <vector>")
    assert not re.search(r"^\s*// opbench:slot", src, re.MULTILINE)
    template_code = [ln.strip() for ln in TEMPLATE.read_text().splitlines()
                     if ln.strip() and "opbench:slot" not in ln]
    generated = [ln.strip() for ln in src.splitlines()]
    assert all(ln in generated for ln in template_code)
    # The statement sits inside the timing loop, between the clobber and the counter.
    stmt_at = generated.index("work(s);")
    assert generated[stmt_at - 1] == '#line 1 "stmt"'
    assert generated[stmt_at + 2] == "opbench::clobber_memory();"


def test_the_torch_header_fills_its_slot_only_for_torch_code() -> None:
    assert "#include <torch/types.h>" in generate_source("torch::ones({2});", "", "")
    assert "#include <torch" not in generate_source("int y = 1;", "", "")


_OVERLAP = """
import dataclasses, json, sys
from pathlib import Path
from opbench.engines.cpp import build, engine, torch_headers
calls = []
def fake_build(source, **kwargs):  # records the flags of each build instead of compiling
    calls.append([f for f in kwargs["cflags"] if "ABI" in f])
    return Path("timer.so")
build.build_library = fake_build
guess = torch_headers.flags_unimported()
if sys.argv[1] == "misled":
    guess = dataclasses.replace(guess, cflags=tuple(
        "-D_GLIBCXX_USE_CXX11_ABI=7" if "ABI" in f else f for f in guess.cflags))
torch_headers.flags_unimported = lambda python_extension=False: guess
assert "torch" not in sys.modules
code = ("auto x = torch::ones({2});", "", "")
engine._compile(torch_headers.choose(*code), code, [])
imported = "torch" in sys.modules
print(json.dumps([calls, imported, [f for f in build.torch_flags().cflags if "ABI" in f]]))
"""


@pytest.mark.parametrize("guess", ["right", "misled"])
def test_torch_imports_while_the_first_build_compiles(tmp_path: Path, guess: str) -> None:
    # The flags are read from torch's files so the compiler starts at once; torch's own,
    # once imported, decide: a build from flags they disagree with is done again.
    pytest.importorskip("torch")
    import json
    import sys

    env = dict(os.environ, OPBENCH_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _OVERLAP, guess], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    calls, imported, real = json.loads(out.stdout)
    assert imported and real[0] != "-D_GLIBCXX_USE_CXX11_ABI=7"
    assert calls == ([real] if guess == "right" else [["-D_GLIBCXX_USE_CXX11_ABI=7"], real])


def test_layout_shifts_are_nops_before_each_function_entry() -> None:
    assert layout_flags(0, 4) == []
    assert layout_flags(1, 4) == ["-fpatchable-function-entry=16,16"]
    assert layout_flags(3, 4) == ["-fpatchable-function-entry=48,48"]


def test_construction_checks_before_compiling() -> None:
    with pytest.raises(ValueError, match="layouts must be an int from 1 to 64"):
        CppEngine("x;", layouts=0)
    with pytest.raises(ValueError, match="does not support globals"):
        CppEngine("x;", globals={"x": 1})


@pytest.mark.slow
@pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH")
def test_the_template_compiles_alone_warning_free(tmp_path: Path) -> None:
    # Left as it is, it is the timer of an empty statement: a complete library.
    library = tmp_path / "timer.so"
    proc = subprocess.run([CXX, "-std=c++17", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror",
                           f"-I{include_dir()}", str(TEMPLATE), "-o", str(library)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                             text=True, timeout=60, check=True).stdout
    for name in ("opbench_open", "opbench_step", "opbench_run", "opbench_error", "opbench_close",
                 "opbench_callgrind_available", "opbench_set_collect", "opbench_empty_loop_ns"):
        assert re.search(rf"\bT {name}$", symbols, re.MULTILINE), name


def test_the_wheel_installs_the_template_where_template_path_looks() -> None:
    # template_path() looks in <package>/templates/ first (a wheel), then the checkout.
    cmake = (Path(__file__).resolve().parents[1] / "CMakeLists.txt").read_text()
    assert "install(FILES csrc/templates/timer.cpp DESTINATION opbench/templates)" in cmake
