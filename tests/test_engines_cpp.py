"""CppTimer (the engine of ``Timer(..., language="c++")``) end to end with a real
compiler on torch-free statements (about a second each to compile, cached per
test session), plus text parity with torch through a mock engine."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from opbench.cpp import build
from opbench.engines.cpp import CppEngine as CppTimer, generate_source, uses_torch

HAS_CXX = any(shutil.which(c) for c in ("c++", "g++", "clang++"))
needs_cxx = pytest.mark.skipif(not HAS_CXX, reason="no C++ compiler on PATH")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("opbench-cpp-cache")


@pytest.fixture(autouse=True)
def _use_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(cache))


# -- source generation (no compiler) -----------------------------------------

def test_torch_detection() -> None:
    assert uses_torch("auto y = torch::ones({2});")
    assert uses_torch("", "at::Tensor x;")
    assert uses_torch("", "", "#include <ATen/ATen.h>")
    assert not uses_torch("auto y = x + 1;", "int x = 1;", "#include <vector>")
    assert not uses_torch("int torchlight = 3;")


def test_generated_source_keeps_the_users_line_numbers() -> None:
    src = generate_source("a;\nb;", "int s = 0;", "#include <vector>").split("\n")
    for name, first in (("global_setup", "#include <vector>"), ("setup", "int s = 0;"), ("stmt", "a;")):
        i = src.index(f'#line 1 "{name}"')
        assert src[i + 1] == first
    # Every return to timer.cpp names the physical line that follows it.
    for i, line in enumerate(src):
        if line.startswith("#line") and "timer.cpp" in line:
            assert line == f'#line {i + 2} "timer.cpp"'
    assert "torch/all.h" not in "\n".join(src)
    assert "#include <torch/all.h>" in generate_source("torch::Tensor t;", "", "")


def test_globals_are_rejected_like_torch() -> None:
    with pytest.raises(ValueError, match="does not support globals"):
        CppTimer(stmt="", setup="", global_setup="", timer=None, globals={"x": 1})


def test_cache_dir_follows_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPBENCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert build.cache_dir() == Path("/somewhere/opbench/cpp")
    monkeypatch.setenv("OPBENCH_CACHE_DIR", "/explicit")
    assert build.cache_dir() == Path("/explicit")


# -- errors -------------------------------------------------------------------

def test_missing_compiler_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(build.CompilerNotFoundError, match="no C\\+\\+ compiler found"):
        CppTimer(stmt="int unique_for_this_test = 1;").timeit(1)
    monkeypatch.setenv("CXX", "definitely-not-a-compiler")
    with pytest.raises(build.CompilerNotFoundError, match="definitely-not-a-compiler"):
        CppTimer(stmt="int unique_for_this_test = 2;").timeit(1)


@needs_cxx
def test_compile_error_points_at_the_users_line() -> None:
    timer = CppTimer(stmt="int a = 1;\nauto y = x + undefined_name;", setup="int x = 1;")
    with pytest.raises(build.CompileError) as info:
        timer.timeit(1)
    message = str(info.value)
    assert message.startswith("C++ statement failed to compile: stmt:2:")
    assert "undefined_name" in message
    assert "auto y = x + undefined_name;" in message  # the compiler quotes the user's line
    assert "opbench_body_" not in message  # the wrapper's name is noise


@needs_cxx
def test_setup_error_points_at_setup() -> None:
    with pytest.raises(build.CompileError, match="setup:2:"):
        CppTimer(stmt="", setup="int x = 1;\nnot_a_type y;").timeit(1)


# -- behaviour with a real compiler -------------------------------------------

# stmt counts its runs in a setup variable and throws on the 25th: whether
# setup ran again between blocks decides whether it is reached.
_COUNTING = dict(
    stmt='if (++runs == 25) throw std::runtime_error("run 25");',
    setup="int runs = 0;",
    global_setup="#include <stdexcept>",
)


@needs_cxx
def test_setup_runs_once_per_measurement() -> None:
    timer = CppTimer(**_COUNTING)
    assert timer.timeit(0) >= 0  # runs setup and the warm-up run: 1
    assert timer.timeit(10) > 0  # 11
    timer.timeit(10)  # 21
    with pytest.raises(RuntimeError, match="C\\+\\+ statement threw: run 25"):
        timer.timeit(10)
    # After an exception the next call starts from a fresh setup.
    timer.timeit(10)


@needs_cxx
def test_setup_per_block_is_torchs_behaviour() -> None:
    timer = CppTimer(**_COUNTING, setup_per_block=True)
    for _ in range(4):
        timer.timeit(10)  # setup + warm-up + 10 runs: never reaches 25


@needs_cxx
def test_reset_reruns_setup_and_destroys_its_locals(tmp_path: Path) -> None:
    marker = tmp_path / "destroyed"
    timer = CppTimer(
        stmt="*owned += 1;",
        # A move-only local: setup's frame is kept, never copied.
        setup="auto owned = std::make_unique<int>(0);\nMark mark;",
        global_setup=textwrap.dedent(f"""\
            #include <cstdio>
            #include <memory>
            struct Mark {{ ~Mark() {{ std::fclose(std::fopen("{marker}", "w")); }} }};"""),
    )
    timer.timeit(5)
    assert not marker.exists()
    timer.reset()
    assert marker.exists()
    timer.timeit(5)


@needs_cxx
def test_elided_statement_is_flagged() -> None:
    # `y` is never read: -O2 deletes the statement. Noise can only make the
    # loop look slower, so a few fresh tries (cached, no recompile) suffice.
    for _ in range(5):
        timer = CppTimer(stmt="auto y = x + 1;", setup="int x = 1;")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            timer.timeit(1_000_000)
        if timer.suspect_elided:
            assert any("do_not_optimize" in str(w.message) for w in caught)
            break
    assert timer.suspect_elided


@needs_cxx
def test_real_work_is_not_flagged() -> None:
    # A chain of dependent floating-point operations through a volatile: several
    # cycles per run (a volatile integer increment alone can cost ~0 cycles on
    # CPUs that rename memory, and would rightly look empty).
    timer = CppTimer(stmt="sink = sink * 1.0000001 + 0.5;", setup="volatile double sink = 1;")
    timer.timeit(1_000_000)
    assert timer.suspect_elided is False


@needs_cxx
def test_barrier_statements_are_trusted() -> None:
    timer = CppTimer(stmt="auto y = x + 1; opbench::do_not_optimize(y);", setup="int x = 1;")
    timer.timeit(1_000_000)
    assert timer.suspect_elided is None  # not second-guessed


@needs_cxx
def test_empty_statement_costs_time_and_is_not_flagged() -> None:
    timer = CppTimer(stmt="")
    assert timer.timeit(10_000_000) > 0
    assert timer.suspect_elided is None


# -- the on-disk cache ----------------------------------------------------------

def _logging_compiler(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "cxx.log"
    real = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    wrapper = tmp_path / "logging-cxx"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper, log


_CHILD = """
import sys
from opbench.engines.cpp import CppEngine as CppTimer
t = CppTimer(stmt="sink = sink + 2;", setup="volatile int sink = 0;")
assert t.timeit(100) > 0
print("torch" in sys.modules)
"""


@needs_cxx
def test_second_process_reuses_the_cache(tmp_path: Path) -> None:
    wrapper, log = _logging_compiler(tmp_path)
    env = dict(os.environ, CXX=str(wrapper), OPBENCH_CACHE_DIR=str(tmp_path / "cache"))

    def child() -> list[str]:
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "False"  # torch-free statements never import torch
        return [line for line in log.read_text().splitlines() if "timer.cpp" in line]

    assert len(child()) == 1  # compiled once
    assert len(child()) == 1  # second process: loaded from the cache, no compile
    assert len(list((tmp_path / "cache").glob("*.so"))) == 1


@needs_cxx
def test_concurrent_builds_of_one_source_both_succeed(tmp_path: Path) -> None:
    env = dict(os.environ, OPBENCH_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert len(list((tmp_path / "cache").glob("*.so"))) == 1
    assert not list((tmp_path / "cache").glob(".build-*"))  # temp dirs cleaned up


# -- through opbench.Timer ------------------------------------------------------

@needs_cxx
def test_timer_language_cpp_end_to_end() -> None:
    from opbench.timer import Timer

    timer = Timer("auto y = x * 3; opbench::do_not_optimize(y);", "int x = 7;", language="c++")
    m = timer.blocked_autorange(min_run_time=0.02)
    assert m.median > 0
    text = str(m)
    assert "auto y = x * 3; opbench::do_not_optimize(y);" in text
    assert "setup: int x = 7;" in text
    assert timer.timeit(1000).median > 0
    assert timer.adaptive_autorange(min_run_time=0.01, max_run_time=0.5).median > 0


class _MockCppEngine:
    """Deterministic stand-in for both libraries' C++ engines: 2 us per run."""

    def __init__(self, stmt, setup, global_setup, timer, globals, **kwargs):
        self._calls = 0

    def timeit(self, number: int) -> float:
        self._calls += 1
        return 50e-9 + 2e-6 * number * (1 + 0.01 * (self._calls % 3))


def test_measurement_text_matches_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_timer_mod = pytest.importorskip("torch.utils.benchmark.utils.timer")
    import opbench.engines.cpp as cpp_timer_mod
    from opbench.timer import Timer

    monkeypatch.setattr(torch_timer_mod, "CPPTimer", _MockCppEngine)
    monkeypatch.setattr(cpp_timer_mod, "CppEngine", _MockCppEngine)
    args = dict(stmt="\n    auto y = x + 1;\n", setup="\n    auto x = torch::ones({4});\n",
                global_setup="#include <vector>", language="c++")
    for method, kwargs in (("timeit", {"number": 1000}), ("blocked_autorange", {}),
                           ("adaptive_autorange", {})):
        ours = getattr(Timer(**args), method)(**kwargs)
        theirs = getattr(torch_timer_mod.Timer(**args), method)(**kwargs)
        assert ours.stmt == theirs.stmt and ours.setup == theirs.setup
        assert repr(ours).split("\n", 1)[1] == repr(theirs).split("\n", 1)[1]
