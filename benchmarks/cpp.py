"""C++ Timers and load_inline: opbench against torch (and google/benchmark), side by side.

Every "first" row runs each side in a fresh process with fresh caches
(``OPBENCH_CACHE_DIR``, ``TORCH_EXTENSIONS_DIR``) and times it from the
process's first line to its first result, imports included:

  1. torch-free statement, first measurement                 bar: opbench <= 0.2x torch
  2. the first ``torch::`` statement (tensors: <torch/types.h>
     with the operators it names), first measurement, least
     of two rounds per side (ABBA)                           bar: <= 0.25x torch
  3. the first ``torch::nn`` statement (the whole frontend,
     <torch/torch.h>)                                        (reported)
  4. a second, different ``torch::`` statement in a new
     process (<torch/types.h> is precompiled beside it: the
     cost moved off the first statement)                     (reported)
  5. a third, in a new process (through the precompiled
     header)                                                 bar: opbench <= 5 s
  6. torch-free statement again in a new process (cached)    bar: < 2 s
  7. the recipe's section 8 end to end (examples/recipe_section8.py
     --skip-callgrind: build the extension, check, time both
     implementations), opbench.engines.cpp.load_inline vs torch's    bar: <= 0.3x torch
  8. section 8 again after editing one function               (the edit-rebuild loop)
  9. empty statement, ns per run                              bar: < 2 ns, not 0
 10. layout study: a 64x64 float matmul built at 8 code offsets:
     the spread of their figures, and the default build's figure
     against google/benchmark built with -falign-loops=32
     (libbenchmark-dev)                                      bar: within 5%

The machine these figures come from is shared: compare ratios within one run.
Where preemption by other processes can inflate a median, the minimum block
time is printed beside it.

``--phases`` prints where a first ``torch::`` statement's time goes, for each
header set: its plain compile, the link, precompiling the header, and a compile
through the precompiled header (the same compiler commands opbench runs).

    python benchmarks/cpp.py          # ~15 min: torch's builds take most of it
    python benchmarks/cpp.py --quick  # ~10 s: torch-free rows and a small layout study
    python benchmarks/cpp.py --phases # ~5 min: compile, link and precompile, per header set
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "examples" / "recipe_section8.py"

TORCH_FREE = ("auto y = x + 1;", "int x = 1;")
WITH_TORCH = ("auto y = x + 1;", "auto x = torch::ones({1});")
WITH_TORCH_2 = ("auto y = torch::mm(x, x);", "auto x = torch::ones({4, 4});")
WITH_TORCH_3 = ("auto y = x.sum(0);", "auto x = torch::ones({4, 4});")
# PyTorch's own C++ microbenchmark of nn::Linear (benchmarks/instruction_counts).
WITH_NN = ("auto y = model->forward(x);",
           "auto x = torch::ones({4, 4, 4, 4});\nauto model = torch::nn::Linear(4, 2);")

_FIRST_MEASUREMENT = """
import time
t0 = time.perf_counter()
from {module} import Timer
Timer({stmt!r}, {setup!r}, language="c++").timeit(100)
print(time.perf_counter() - t0)
"""

_EDITED_RECIPE = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {examples!r})
import recipe_section8 as recipe
head, _, tail = recipe.CPP_SOURCE.rpartition("a.mul(b).sum(-1)")  # v1's body
recipe.CPP_SOURCE = head + "(a * b).sum(-1)" + tail
recipe.main(["--skip-callgrind", "--loader", {loader!r}])
print(time.perf_counter() - t0)
"""


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def child_seconds(code: str, env: dict[str, str]) -> float:
    """Seconds the child reports (its last line) for ``code``."""
    return float(_run([sys.executable, "-c", code], env).stdout.split()[-1])


# CPU seconds of first measurements (the child and every compiler it waited for), least
# per (module, stmt, setup): on a shared machine wall time swings with the other work, CPU
# time far less.
CPU: dict[tuple[str, str, str], float] = {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def first_measurement(module: str, stmt: str, setup: str, env: dict[str, str]) -> float:
    before = _children_cpu()
    wall = child_seconds(_FIRST_MEASUREMENT.format(module=module, stmt=stmt, setup=setup), env)
    cpu = _children_cpu() - before
    CPU[module, stmt, setup] = min(cpu, CPU.get((module, stmt, setup), cpu))
    return wall


def cpu_row(code: tuple[str, str], bar: str, ok: Callable[[float, float], bool]) -> None:
    ours, theirs = CPU[("opbench", *code)], CPU[("torch.utils.benchmark", *code)]
    row("  the same, CPU seconds", ours, theirs, bar, ok(ours, theirs))


def recipe_seconds(loader: str, env: dict[str, str]) -> float:
    import time

    start = time.perf_counter()
    _run([sys.executable, str(RECIPE), "--skip-callgrind", "--loader", loader], env)
    return time.perf_counter() - start


def row(case: str, ours: float, theirs: float | None, bar: str, ok: bool, unit: str = "") -> None:
    ratio = f"{ours / theirs:9.3f}" if theirs else f"{'':>9}"
    theirs_text = f"{theirs:10.2f}" if theirs is not None else f"{'-':>10}"
    print(f"{case:<44}{ours:10.2f}{theirs_text}{ratio}  {bar}: {'ok' if ok else 'MISSED'}{unit}",
          flush=True)


def skipped(case: str, why: str) -> None:
    print(f"{case:<44}{'skipped':>10}{'':>10}{'':>9}  ({why})", flush=True)


def layout_study(layouts: int, min_run_time: float, quick: bool, work: Path) -> None:
    import warnings

    from cpp_placement import STATEMENTS, google_benchmark, has_google_benchmark

    from opbench.timer import Timer

    _, setup, stmt = STATEMENTS["matmul64"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a busy machine's governor warnings
        study = Timer(stmt, setup, language="c++", layouts=layouts)
        m = study.blocked_autorange(min_run_time=min_run_time)
    info = m.info
    minima = info["layout_minima"]
    min_spread = (max(minima) - min(minima)) / statistics.median(minima)
    print(f"layout study, 64x64 matmul, {layouts} layouts: median of layouts "
          f"{statistics.median(info['layout_medians']) * 1e6:.2f} us, spread "
          f"{info['layout_spread'] * 100:.1f}% of medians, {min_spread * 100:.1f}% of minima")
    print("  per layout (us, minimum block): " + " ".join(f"{t * 1e6:.2f}" for t in minima))
    if quick or not has_google_benchmark():
        skipped("default build vs google/benchmark", "--quick" if quick else
                "no google/benchmark headers: apt-get install libbenchmark-dev")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = Timer(stmt, setup, language="c++").blocked_autorange(min_run_time=min_run_time)
    for flags in ([], ["-falign-loops=32"]):
        ((median, low),) = google_benchmark(flags, ["matmul64"], work).values()
        name = " ".join(flags) or "default flags"
        row(f"matmul median (us), gbench {name}", ours.median * 1e6, median * 1e6,
            "within 5%", abs(ours.median / median - 1) <= 0.05)
        row(f"matmul minimum (us), gbench {name}", min(ours.times) * 1e6, low * 1e6,
            "within 5%", abs(min(ours.times) / low - 1) <= 0.05)


def _timed(work: Path, *cmd: str) -> float:
    import time

    start = time.perf_counter()
    subprocess.run(cmd, cwd=work, check=True, capture_output=True)
    return time.perf_counter() - start


def phases() -> None:
    """Times the compiler commands of a first ``torch::`` statement (WITH_TORCH), for the
    whole ``<torch/types.h>`` (what opbench compiled before it pruned the operators), the
    pruned one it compiles now, and the whole frontend."""
    import time

    start = time.perf_counter()
    import torch  # noqa: F401

    imported = time.perf_counter() - start
    from opbench.engines.cpp import build, include_dir, torch_headers
    from opbench.engines.cpp.engine import CFLAGS, CODE_PLACEMENT_FLAGS, generate_source

    pruned = torch_headers.choose(*WITH_TORCH)
    assert pruned is not None
    sets = {"<torch/types.h>, whole": torch_headers.HeaderSet("whole", pruned.shared),
            "<torch/types.h>, pruned": pruned, "<torch/torch.h>": torch_headers.FRONTEND}
    flags = build.torch_flags()
    cxx = build.find_compiler()
    print(f"where a first torch:: statement's time goes (seconds; import torch: {imported:.2f})")
    print(f"{'header set':<26}{'compile':>9}{'link':>7}{'precompile':>12}{'with PCH':>10}"
          f"{'PCH MB':>8}")
    for label, headers in sets.items():
        work = Path(tempfile.mkdtemp(prefix="opbench-phases-"))
        try:
            cflags = [*CFLAGS, *CODE_PLACEMENT_FLAGS, f"-I{include_dir()}"]
            if headers.pruned:
                cflags += ["-DAT_PER_OPERATOR_HEADERS", "-isystem",
                           str(torch_headers.overlay(work))]
            cflags += flags.cflags
            (work / "source.cpp").write_text(generate_source(*WITH_TORCH, "", headers))
            (work / "pch.h").write_text(headers.shared_text())
            for name in ("stmt", "setup", "global_setup"):
                (work / name).write_text("")

            compile_s = _timed(work, cxx, *cflags, "-c", "source.cpp", "-o", "plain.o")
            link_s = _timed(work, cxx, "-shared", "plain.o", "-o", "timer.so", *flags.ldflags)
            pch_s = _timed(work, cxx, *cflags, "-x", "c++-header", "pch.h", "-o", "pch.h.gch")
            with_s = _timed(work, cxx, *cflags, "-Winvalid-pch", "-include", "pch.h", "-c",
                            "source.cpp", "-o", "pch.o")
            size = (work / "pch.h.gch").stat().st_size / 1e6
            print(f"{label:<26}{compile_s:9.1f}{link_s:7.1f}{pch_s:12.1f}{with_s:10.1f}"
                  f"{size:8.0f}", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="skip torch's builds and google/benchmark")
    parser.add_argument("--phases", action="store_true",
                        help="only: where a first torch:: statement's time goes, per header set")
    args = parser.parse_args()
    if args.phases:
        phases()
        return

    work = Path(tempfile.mkdtemp(prefix="opbench-cpp-bench-"))
    try:
        def fresh(name: str) -> dict[str, str]:
            (work / name).mkdir()
            return dict(os.environ, OPBENCH_CACHE_DIR=str(work / name),
                        TORCH_EXTENSIONS_DIR=str(work / name))

        print("C++ Timers and load_inline: seconds to first result, fresh processes and caches")
        print(f"{'case':<44}{'opbench':>10}{'torch':>10}{'ratio':>9}  bar")
        cache = fresh("opbench")
        ours = first_measurement("opbench", *TORCH_FREE, cache)
        if args.quick:
            skipped("torch-free statement", "--quick: torch's build skipped")
        else:
            theirs = first_measurement("torch.utils.benchmark", *TORCH_FREE, fresh("torch1"))
            row("torch-free statement", ours, theirs, "<= 0.2", ours <= theirs / 5)

        if args.quick:
            for case in ("first torch:: statement", "first torch::nn statement (frontend)",
                         "second torch:: statement, new process",
                         "third torch:: statement, new process"):
                skipped(case, "--quick")
        else:
            # Sides alternate; every run gets an empty cache of its own (the last opbench
            # one is kept for the rows below).
            ours_t = first_measurement("opbench", *WITH_TORCH, fresh("opbench-round1"))
            theirs_t = first_measurement("torch.utils.benchmark", *WITH_TORCH, fresh("torch2"))
            theirs_t = min(theirs_t, first_measurement("torch.utils.benchmark", *WITH_TORCH,
                                                       fresh("torch2-round2")))
            ours_t = min(ours_t, first_measurement("opbench", *WITH_TORCH, cache))
            row("first torch:: statement", ours_t, theirs_t, "<= 0.25", ours_t <= theirs_t / 4)
            cpu_row(WITH_TORCH, "<= 0.25", lambda a, b: a <= b / 4)
            theirs_nn = first_measurement("torch.utils.benchmark", *WITH_NN, fresh("torch3"))
            ours_nn = first_measurement("opbench", *WITH_NN, cache)
            row("first torch::nn statement (frontend)", ours_nn, theirs_nn, "reported", True)
            cpu_row(WITH_NN, "reported", lambda a, b: True)
            ours_2 = first_measurement("opbench", *WITH_TORCH_2, cache)
            theirs_2 = first_measurement("torch.utils.benchmark", *WITH_TORCH_2, fresh("torch4"))
            row("second torch:: statement, new process", ours_2, theirs_2, "reported", True)
            cpu_row(WITH_TORCH_2, "reported", lambda a, b: True)
            theirs_3 = first_measurement("torch.utils.benchmark", *WITH_TORCH_3, fresh("torch5"))
            ours_3 = first_measurement("opbench", *WITH_TORCH_3, cache)
            row("third torch:: statement, new process", ours_3, theirs_3, "<= 5 s", ours_3 <= 5)

        again = first_measurement("opbench", *TORCH_FREE, cache)
        row("torch-free statement again, new process", again, None, "< 2 s", again < 2)

        if args.quick:
            skipped("section 8 end to end", "--quick")
            skipped("section 8, one function edited", "--quick")
        else:
            recipe_cache, torch_cache = fresh("recipe"), fresh("recipe-torch")
            ours_r = recipe_seconds("opbench", recipe_cache)
            theirs_r = recipe_seconds("torch", torch_cache)
            row("section 8 end to end", ours_r, theirs_r, "<= 0.3", ours_r <= 0.3 * theirs_r)
            ours_e, theirs_e = (
                child_seconds(_EDITED_RECIPE.format(examples=str(RECIPE.parent), loader=loader),
                              env)
                for loader, env in (("opbench", recipe_cache), ("torch", torch_cache)))
            row("section 8, one function edited", ours_e, theirs_e, "<= 0.3",
                ours_e <= 0.3 * theirs_e)

        import warnings

        from opbench.timer import Timer

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = Timer("", language="c++").blocked_autorange(min_run_time=0.05)
        ns = m.median * 1e9
        theirs_ns = None
        if not args.quick:
            from torch.utils.benchmark import Timer as TorchTimer

            theirs_ns = TorchTimer("", language="c++").blocked_autorange(
                min_run_time=0.05).median * 1e9
        row("empty statement, ns per run", ns, theirs_ns, "< 2 ns and > 0", 0 < ns < 2)
        if not args.quick:
            print("(torch deletes the empty loop: its figure is the 1 ns floor divided by "
                  "the block size)")
        print()
        layout_study(2 if args.quick else 8, 0.05 if args.quick else 1.0, args.quick, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
