"""CppTimer (the engine of ``Timer(..., language="c++")``) end to end with a real
compiler on torch-free statements (about a second each to compile, cached per
test session), plus text parity with torch through a mock engine."""
from __future__ import annotations

import ctypes
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from opbench.engines.cpp import build
from opbench.engines.cpp.engine import (
    CppEngine as CppTimer,
)
from opbench.engines.cpp.engine import (
    generate_source,
    layout_flags,
    uses_torch,
)
from opbench.errors import PrecompiledHeaderWarning

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
    assert "torch/" not in "\n".join(src)


def test_torch_code_gets_the_headers_it_needs() -> None:
    # Which ones: opbench.engines.cpp.torch_headers (test_torch_headers.py).
    assert "#include <torch/types.h>\n#include <c10/util/irange.h>\n#include <ATen/ops/ones.h>" \
        in generate_source("auto t = torch::ones({2});", "", "")
    assert "#include <torch/torch.h>" in generate_source("", "torch::nn::Linear m(2, 2);", "")
    assert "#include <torch" not in generate_source("auto y = x + 1;", "int x = 1;", "")


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
@pytest.mark.slow
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
@pytest.mark.slow
def test_setup_error_points_at_setup() -> None:
    with pytest.raises(build.CompileError, match="setup:2:"):
        CppTimer(stmt="", setup="int x = 1;\nnot_a_type y;").timeit(1)


# -- behaviour with a real compiler -------------------------------------------

# stmt counts its runs in a setup variable and throws on the 25th: whether
# setup ran again between blocks decides whether it is reached.
_COUNTING = {
    "stmt": 'if (++runs == 25) throw std::runtime_error("run 25");',
    "setup": "int runs = 0;",
    "global_setup": "#include <stdexcept>",
}


@needs_cxx
@pytest.mark.slow
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
@pytest.mark.slow
def test_setup_per_block_is_torchs_behaviour() -> None:
    timer = CppTimer(**_COUNTING, setup_per_block=True)
    for _ in range(4):
        timer.timeit(10)  # setup + warm-up + 10 runs: never reaches 25


@needs_cxx
@pytest.mark.slow
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
@pytest.mark.slow
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
@pytest.mark.slow
def test_real_work_is_not_flagged() -> None:
    # A chain of dependent floating-point operations through a volatile: several
    # cycles per run (a volatile integer increment alone can cost ~0 cycles on
    # CPUs that rename memory, and would rightly look empty).
    timer = CppTimer(stmt="sink = sink * 1.0000001 + 0.5;", setup="volatile double sink = 1;")
    timer.timeit(1_000_000)
    assert timer.suspect_elided is False


@needs_cxx
@pytest.mark.slow
def test_barrier_statements_are_trusted() -> None:
    timer = CppTimer(stmt="auto y = x + 1; opbench::do_not_optimize(y);", setup="int x = 1;")
    timer.timeit(1_000_000)
    assert timer.suspect_elided is None  # not second-guessed


@needs_cxx
@pytest.mark.slow
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
from opbench.engines.cpp.engine import CppEngine as CppTimer
t = CppTimer(stmt="sink = sink + 2;", setup="volatile int sink = 0;")
assert t.timeit(100) > 0
print("torch" in sys.modules)
"""


@needs_cxx
@pytest.mark.slow
def test_second_process_reuses_the_cache(tmp_path: Path) -> None:
    wrapper, log = _logging_compiler(tmp_path)
    env = dict(os.environ, CXX=str(wrapper), OPBENCH_CACHE_DIR=str(tmp_path / "cache"))

    def child() -> list[str]:
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                             text=True, check=False)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "False"  # torch-free statements never import torch
        return [line for line in log.read_text().splitlines() if "source.cpp" in line]

    assert len(child()) == 1  # compiled once
    assert len(child()) == 1  # second process: loaded from the cache, no compile
    assert len(list((tmp_path / "cache").rglob("*.so"))) == 1


@needs_cxx
@pytest.mark.slow
def test_concurrent_builds_of_one_source_both_succeed(tmp_path: Path) -> None:
    env = dict(os.environ, OPBENCH_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert len(list((tmp_path / "cache").rglob("*.so"))) == 1
    assert not list((tmp_path / "cache").rglob(".build-*"))  # temp dirs cleaned up


# -- through opbench.Timer ------------------------------------------------------

@needs_cxx
@pytest.mark.slow
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


@pytest.mark.slow
def test_measurement_text_matches_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    torch_timer_mod = pytest.importorskip("torch.utils.benchmark.utils.timer")
    import opbench.engines.cpp.engine as cpp_timer_mod
    from opbench.timer import Timer

    monkeypatch.setattr(torch_timer_mod, "CPPTimer", _MockCppEngine)
    monkeypatch.setattr(cpp_timer_mod, "CppEngine", _MockCppEngine)
    args = {"stmt": "\n    auto y = x + 1;\n", "setup": "\n    auto x = torch::ones({4});\n",
                "global_setup": "#include <vector>", "language": "c++"}
    for method, kwargs in (("timeit", {"number": 1000}), ("blocked_autorange", {}),
                           ("adaptive_autorange", {})):
        ours = getattr(Timer(**args), method)(**kwargs)
        theirs = getattr(torch_timer_mod.Timer(**args), method)(**kwargs)
        assert ours.stmt == theirs.stmt and ours.setup == theirs.setup
        assert repr(ours).split("\n", 1)[1] == repr(theirs).split("\n", 1)[1]


# -- the first call, slices, layouts ---------------------------------------------

@needs_cxx
@pytest.mark.slow
def test_first_call_is_the_first_call() -> None:
    # The first run of stmt busy-waits 5 ms; every later one is free. Any untimed
    # warm-up run before the first-call measurement would report ~0 s instead.
    from opbench.timer import Timer

    timer = Timer(
        "if (first) { first = false; auto t0 = opbench::now_ns(); "
        "while (opbench::now_ns() - t0 < 5000000) {} }",
        setup="bool first = true;", global_setup='#include "opbench/clock.h"',
        language="c++", record_first_call=True,
    )
    m = timer.timeit(100)
    assert m.info["first_call_s"] >= 0.005  # the busy-wait itself, at least


@needs_cxx
@pytest.mark.slow
def test_a_block_in_slices_runs_exactly_n_runs() -> None:
    # 1 ns slices: the loop hands control back at every stride; the runs still add
    # up to exactly n, and setup's state carries across the pauses.
    from opbench.engines.cpp.engine import _load

    lib = _load(stmt='if (++runs > limit) throw std::runtime_error("too many");',
                setup="std::int64_t runs = 0; const std::int64_t limit = 5000;",
                global_setup="#include <stdexcept>")
    session = lib.open()
    elapsed = ctypes.c_int64(0)
    try:
        steps = [lib.step(session, 5000, 1, ctypes.byref(elapsed))]
        while steps[-1] == 2:
            steps.append(lib.step(session, -1, 1, ctypes.byref(elapsed)))
        assert steps[-1] == 0 and len(steps) > 2 and elapsed.value > 0
        assert lib.step(session, -1, 1, ctypes.byref(elapsed)) == 1  # nothing to continue
        assert b"no block to continue" in lib.error(session)
    finally:
        lib.close(session)
    session = lib.open()
    try:
        assert lib.step(session, 5000, 0, ctypes.byref(elapsed)) == 0
        assert lib.step(session, 1, 0, ctypes.byref(elapsed)) == 1  # run 5001 throws
        assert lib.error(session) == b"too many"
    finally:
        lib.close(session)


def _symbol_offsets(path: Path, name: str) -> int:
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    (address,) = [ln.split()[0] for ln in out.splitlines() if ln.split()[-1] == name]
    return int(address, 16) % 64


@needs_cxx
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
@pytest.mark.slow
def test_layouts_place_the_code_at_different_offsets() -> None:
    engine = CppTimer(stmt="sink = sink * 1.0000001 + 0.5;", setup="volatile double sink = 1;",
                      layouts=4)
    engine.prepare()
    paths = [lib.path for lib in engine._libs]
    assert len(set(paths)) == 4
    # Every function starts on a 64-byte boundary in the default build (layout 0),
    # and 16, 32, 48 bytes past it in the others.
    assert [_symbol_offsets(p, "opbench_step") for p in paths] == [0, 16, 32, 48]
    assert [_symbol_offsets(p, "opbench_run") for p in paths] == [0, 16, 32, 48]
    assert layout_flags(0, 4) == [] and layout_flags(3, 4) == ["-fpatchable-function-entry=48,48"]


@needs_cxx
@pytest.mark.slow
def test_layout_study_reports_each_layout_and_the_spread() -> None:
    engine = CppTimer(stmt="sink = sink * 1.0000001 + 0.5;", setup="volatile double sink = 1;",
                      layouts=3)
    engine.timeit(10)
    engine.discard_samples()  # warm-up: not part of the study
    for _ in range(6):
        engine.timeit(1000)
    info = engine.info()
    assert info["layouts"] == 3 and len(info["layout_medians"]) == 3
    medians = info["layout_medians"]
    assert all(0 < lo <= med for lo, med in zip(info["layout_minima"], medians))
    assert info["layout_spread"] == pytest.approx(
        (max(medians) - min(medians)) / sorted(medians)[1])
    engine.discard_samples()
    engine.timeit(1000)
    assert engine.info()["layout_spread"] is None  # one layout ran: no spread yet


def test_layouts_must_be_a_small_positive_int() -> None:
    for bad in (0, 65, 2.0, True):
        with pytest.raises(ValueError, match="layouts must be an int"):
            CppTimer(stmt="", layouts=bad)


# -- the on-disk cache: headers ----------------------------------------------------

@needs_cxx
@pytest.mark.slow
def test_an_edited_header_rebuilds_instead_of_reusing_a_stale_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import opbench.engines.cpp.engine as engine_module

    # A copy of opbench's own headers (an upgrade edits them in place) and a header of
    # the user's: both are read through the statement, so both must key the cache.
    headers = tmp_path / "include"
    shutil.copytree(engine_module.include_dir(), headers)
    monkeypatch.setattr(engine_module, "include_dir", lambda: str(headers))
    mine = tmp_path / "mine.h"
    mine.write_text('inline const char* message() { return "v1"; }\n')

    def thrown() -> str:
        monkeypatch.setattr(engine_module, "_LOADED", {})  # as a new process would
        timer = CppTimer(stmt="throw std::runtime_error(message());",
                         global_setup=f'#include <stdexcept>\n#include "{mine}"')
        with pytest.raises(RuntimeError) as info:
            timer.timeit(1)
        return str(info.value)

    assert thrown().endswith("v1")
    mine.write_text('#ifndef MESSAGE\n#define MESSAGE "v2"\n#endif\n'
                    "inline const char* message() { return MESSAGE; }\n")
    assert thrown().endswith("v2")
    barrier = headers / "opbench" / "barrier.h"  # included before global_setup
    barrier.write_text(barrier.read_text() + '\n#define MESSAGE "v3"\n')
    assert thrown().endswith("v3")


# -- torch:: statements (real torch headers, precompiled once per run) ---------------

@pytest.fixture(scope="module")
def torch_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from cpp_cache import torch_cache_dir

    return torch_cache_dir(tmp_path_factory)


@needs_cxx
@pytest.mark.slow
def test_torch_statement_end_to_end(torch_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opbench.timer import Timer

    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(torch_cache))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecompiledHeaderWarning)  # the PCH must be used
        timer = Timer("auto y = x + 1; opbench::do_not_optimize(y);",
                      "auto x = torch::ones({4});", language="c++")
        m = timer.blocked_autorange(min_run_time=0.05)
        assert m.median > 0 and "auto y = x + 1;" in str(m)
        # A wrong statement is reported at the user's own line; the header is precompiled
        # by the second build that needs it at the latest, and the third goes through it.
        for wrong in ("auto y = x +;", "auto z = x *;"):
            with pytest.raises(build.CompileError) as info:
                CppTimer(stmt=wrong, setup="auto x = torch::ones({4});").timeit(1)
            assert str(info.value).startswith("C++ statement failed to compile: stmt:1:")
            assert len(list((torch_cache / "pch").glob("*/opbench_pch.h.gch"))) >= 1


# A guard that marks the thread it is in force on, as torch::NoGradGuard and
# c10::InferenceMode do (thread-local state, restored by the destructor).
_GUARD = textwrap.dedent("""
    thread_local int guard_depth = 0;
    struct DepthGuard {
      DepthGuard() { ++guard_depth; }
      ~DepthGuard() { --guard_depth; }
    };
    extern "C" __attribute__((visibility("default"))) int guard_depth_here() { return guard_depth; }
""")


def _guard_timer():
    import opbench

    t = opbench.Timer("opbench::do_not_optimize(guard_depth);", setup="DepthGuard guard;",
                      global_setup=_GUARD, language="c++")
    depth = ctypes.CDLL(str(t.engine.library_path())).guard_depth_here
    return t, depth


def test_setup_guards_end_with_the_measurement():
    t, depth = _guard_timer()
    for measure in (lambda: t.timeit(100), lambda: t.blocked_autorange(min_run_time=0.01),
                    lambda: t.repeat(2, 100)):
        measure()
        assert depth() == 0  # setup's guard is not in force in the Python thread any more


def test_an_open_session_is_never_resumed_on_another_thread():
    import gc
    import threading

    t, depth = _guard_timer()
    t.run(100)  # the sampling protocol mid-measurement: setup's frame is open
    assert depth() == 1
    seen = []

    def collect_elsewhere():
        nonlocal t
        del t
        gc.collect()
        seen.append(depth())

    thread = threading.Thread(target=collect_elsewhere)
    thread.start()
    thread.join()
    # Resumed there, the guard's destructor would have run against that thread's state.
    assert seen == [0]
