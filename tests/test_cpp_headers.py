"""The C++ header library: each header compiles on its own, the unit tests under
tests/cpp/ compile and pass (with and without GNU inline asm), the timed loop
adds no per-run copy of a result (callgrind instruction counts), and the
standalone example (examples/cpp_autorange.cpp) prints the statistics the Python
layer computes for the same samples. Needs a C++ compiler (skipped, with the
reason, where there is none)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import opbench
from opbench.callgrind._parse import parse_callgrind_out
from opbench.callgrind.collect import callgrind_unavailable_reason
from opbench.engines.cpp import include_dir

CXX = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH")

LIBRARY = Path(include_dir()) / "opbench"
HEADERS = sorted(str(p.relative_to(LIBRARY)) for p in LIBRARY.rglob("*.h"))
CPP_TESTS = Path(__file__).parent / "cpp"
UNIT_TESTS = sorted(CPP_TESTS.glob("test_*.cpp"))
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cpp_autorange.cpp"
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


def _run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _compile(source: Path, exe: Path, *flags: str) -> Path:
    build = _run([CXX, "-std=c++17", "-O2", *WARNINGS, f"-I{include_dir()}", *flags, str(source),
                  "-o", str(exe)])
    assert build.returncode == 0, build.stderr
    return exe


def test_include_dir_holds_the_library() -> None:
    for name in ("opbench.h", "clock.h", "barrier.h", "loop.h", "stats.h", "autorange.h",
                 "callgrind.h", "detail/fiber.h"):
        assert name in HEADERS
    assert "fiber.h" not in HEADERS  # private now: detail/


def test_umbrella_header_leaves_out_detail_headers(tmp_path: Path) -> None:
    # The fiber (ucontext, mmap, std::function) serves generated Timer code
    # only; a user's translation unit must not pay for it.
    tu = tmp_path / "tu.cpp"
    tu.write_text('#include "opbench/opbench.h"\n')
    deps = _run([CXX, "-std=c++17", "-M", f"-I{include_dir()}", str(tu)])
    assert deps.returncode == 0, deps.stderr
    assert "opbench/autorange.h" in deps.stdout and "opbench/callgrind.h" in deps.stdout
    assert "/detail/" not in deps.stdout and "ucontext.h" not in deps.stdout


@pytest.mark.parametrize("header", HEADERS)
def test_header_compiles_alone(header: str, tmp_path: Path) -> None:
    tu = tmp_path / "tu.cpp"
    tu.write_text(f'#include "opbench/{header}"\n')
    proc = _run([CXX, "-std=c++17", "-fsyntax-only", *WARNINGS, f"-I{include_dir()}", str(tu)])
    assert proc.returncode == 0, proc.stderr


def _run_unit_test(source: Path, tmp_path: Path, *flags: str) -> None:
    exe = _compile(source, tmp_path / source.stem, *flags)
    run = _run([str(exe)])
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "OK"


@pytest.mark.parametrize("source", UNIT_TESTS, ids=lambda p: p.stem)
def test_header_unit_tests(source: Path, tmp_path: Path) -> None:
    _run_unit_test(source, tmp_path)


def test_barrier_without_gnu_asm(tmp_path: Path) -> None:
    # The path for compilers without GNU inline asm (MSVC and others), forced
    # on g++: no asm statement is left, and the loop tests still pass (the
    # timed loops are not deleted, results are observed).
    tu = tmp_path / "tu.cpp"
    tu.write_text('#include "opbench/loop.h"\n')
    pre = _run([CXX, "-std=c++17", "-E", "-DOPBENCH_NO_INLINE_ASM", f"-I{include_dir()}",
                str(tu)])
    assert pre.returncode == 0, pre.stderr
    assert "do_not_optimize" in pre.stdout and not re.search(r"\basm\b", pre.stdout)
    _run_unit_test(CPP_TESTS / "test_loop.cpp", tmp_path, "-DOPBENCH_NO_INLINE_ASM")


def test_do_not_optimize_of_a_const_value_is_deprecated(tmp_path: Path) -> None:
    # Kept for old code, with a warning: a const value is only an input, so the
    # compiler may compute it once and reuse it across iterations.
    tu = tmp_path / "tu.cpp"
    tu.write_text('#include "opbench/barrier.h"\n'
                  "int main() { const int c = 3; opbench::do_not_optimize(c); "
                  "int m = 3; opbench::do_not_optimize(m); opbench::do_not_optimize(m + 1); }\n")
    proc = _run([CXX, "-std=c++17", "-fsyntax-only", "-Wall", f"-I{include_dir()}", str(tu)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("is deprecated") == 1, proc.stderr  # the const call alone
    assert "pass a non-const lvalue" in proc.stderr


CALLGRIND = callgrind_unavailable_reason()
RUNS = (1000, 3000)  # loop lengths per profile: their difference cancels the fixed costs


def _instructions_per_run(exe: Path, work: Path) -> dict[str, float]:
    """Runs `exe` under callgrind; its dumps are named "<kind> <runs>" (see
    tests/cpp/loop_result_copies.cpp). Returns instructions per loop run, per kind."""
    out = work / "callgrind.out"
    proc = _run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                 f"--callgrind-out-file={out}", str(exe)])
    assert proc.returncode == 0, proc.stderr
    totals: dict[tuple[str, int], int] = {}
    for dump in work.glob("callgrind.out.*"):
        lines = dump.read_text().splitlines()
        trigger = next(line for line in lines if line.startswith("desc: Trigger:"))
        name = re.fullmatch(r"desc: Trigger: Client Request: (\w+) (\d+)", trigger)
        if name:
            totals[(name[1], int(name[2]))] = parse_callgrind_out(lines).total
    kinds = {kind for kind, _ in totals}
    assert kinds == {"ref", "const_ref"}, totals
    short, long = RUNS
    return {k: (totals[(k, long)] - totals[(k, short)]) / (long - short) for k in kinds}


@pytest.mark.skipif(CALLGRIND is not None, reason=str(CALLGRIND))
def test_loop_does_not_copy_a_result_returned_by_reference(tmp_path: Path) -> None:
    # time_loop_ns over a lambda returning an N-byte object by reference: the
    # barrier must observe the object where it lives. With the old "+m,r"
    # constraint GCC copied it into a temporary on every run (`rep movsq`,
    # 3 instructions per run at 8 bytes, 71 at 512, 519 at 4096).
    per_run = {}
    for size in (8, 64, 512, 4096):
        work = tmp_path / str(size)
        work.mkdir()
        exe = _compile(CPP_TESTS / "loop_result_copies.cpp", work / "prog",
                       f"-DOPBENCH_BYTES={size}")
        per_run[size] = _instructions_per_run(exe, work)
    for kind in ("ref", "const_ref"):
        counts = {size: figures[kind] for size, figures in per_run.items()}
        assert len(set(counts.values())) == 1, (kind, counts)
        assert counts[8] <= 4, (kind, counts)  # the loop's increment, compare and branch


def test_example_benchmark_prints_the_python_layers_statistics(tmp_path: Path) -> None:
    # examples/cpp_autorange.cpp: autorange.h picks the block size and collects
    # blocks, stats.h summarises them. The same samples given to
    # opbench.Measurement must give the same median, IQR and significant figures.
    exe = _compile(EXAMPLE, tmp_path / "cpp_autorange")
    min_run_time = 0.02
    run = _run([str(exe), str(min_run_time)])
    assert run.returncode == 0, run.stderr
    blocks = re.findall(
        r"^(\w+): (blocked|adaptive)_autorange, (\d+) runs per block, (\d+) blocks\n"
        r"  median (\S+) us  IQR (\S+) us  \(mean \S+ us, min \S+ us, max \S+ us\)"
        r"  (\d) significant figures.*\n"
        r"samples: (.*)$", run.stdout, re.MULTILINE)
    assert [b[:2] for b in blocks] == [("sum_float", "blocked"), ("sum_double", "adaptive")], \
        run.stdout
    for _, how, number, count, median, iqr, figures, samples in blocks:
        per_run = [float(s) for s in samples.split()]
        assert len(per_run) == int(count) >= 1
        m = opbench.Measurement(int(number), [t * int(number) for t in per_run],
                                opbench.TaskSpec("sum", "pass"))
        assert (median, iqr) == (f"{m.median * 1e6:.3g}", f"{m.iqr * 1e6:.3g}")
        assert int(figures) == m.significant_figures
        assert sum(m.times) * int(number) >= min_run_time * (1 - 1e-9)
        if how == "adaptive":
            assert len(per_run) > 3
