"""C++ Timers and load_inline: opbench against torch (and google/benchmark), side by side.

Every "first" row runs each side in a fresh process with fresh caches
(``OPBENCH_CACHE_DIR``, ``TORCH_EXTENSIONS_DIR``) and times it from the
process's first line to its first result, imports included:

  1. torch-free statement, first measurement                 bar: opbench <= 0.2x torch
  2. ``torch::`` statement, first measurement (builds the
     precompiled header, a one-time cost per torch version,
     compiler and flags)                                     bar: <= 0.25x torch
  3. a second, different ``torch::`` statement in a new
     process (the header is precompiled by then)            bar: opbench <= 5 s
  4. torch-free statement again in a new process (cached)    bar: < 2 s
  5. the recipe's section 8 end to end (examples/recipe_section8.py
     --skip-callgrind: build the extension, check, time both
     implementations), opbench.cpp.load_inline vs torch's    bar: <= 0.3x torch
  6. section 8 again after editing one function               (the edit-rebuild loop)
  7. empty statement, ns per run                              bar: < 2 ns, not 0
  8. layout study: a 64x64 float matmul built at 8 code offsets:
     the spread of their figures, and the default build's figure
     against google/benchmark built with -falign-loops=32
     (libbenchmark-dev)                                      bar: within 5%

The machine these figures come from is shared: compare ratios within one run.
Where preemption by other processes can inflate a median, the minimum block
time is printed beside it.

    python benchmarks/cpp.py          # ~10 min: torch's builds take most of it
    python benchmarks/cpp.py --quick  # ~10 s: torch-free rows and a small layout study
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "examples" / "recipe_section8.py"

TORCH_FREE = ("auto y = x + 1;", "int x = 1;")
WITH_TORCH = ("auto y = x + 1;", "auto x = torch::ones({1});")
WITH_TORCH_2 = ("auto y = torch::mm(x, x);", "auto x = torch::ones({4, 4});")

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


def first_measurement(module: str, stmt: str, setup: str, env: dict[str, str]) -> float:
    return child_seconds(_FIRST_MEASUREMENT.format(module=module, stmt=stmt, setup=setup), env)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="skip torch's builds and google/benchmark")
    args = parser.parse_args()

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
            skipped("torch:: statement (precompiles the header)", "--quick")
            skipped("second torch:: statement, new process", "--quick")
        else:
            ours_t = first_measurement("opbench", *WITH_TORCH, cache)
            theirs_t = first_measurement("torch.utils.benchmark", *WITH_TORCH, fresh("torch2"))
            row("torch:: statement (precompiles the header)", ours_t, theirs_t, "<= 0.25",
                ours_t <= theirs_t / 4)
            ours_2 = first_measurement("opbench", *WITH_TORCH_2, cache)
            theirs_2 = first_measurement("torch.utils.benchmark", *WITH_TORCH_2, fresh("torch3"))
            row("second torch:: statement, new process", ours_2, theirs_2, "<= 5 s", ours_2 <= 5)

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
