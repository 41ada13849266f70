"""Code placement: which alignment flags make C++ Timer figures independent of where code lands.

For each candidate set of alignment flags, six statements from 0.5 ns to 20 us
per run are built at eight code offsets (``Timer(..., layouts=8)``: every
function shifted 0, 8, ..., 56 bytes past its 64-byte boundary) and timed in
turn. A row prints each layout's minimum block time relative to layout 0 (the
build users get) and the spread, ``(max - min) / median``: the part of a
figure that an accident of placement can swing. Minima, not medians: on a
shared machine preemption inflates whole blocks, never shortens them.
google/benchmark (libbenchmark-dev) times the same loop bodies, built with its
default flags and with -falign-loops=32, as a reference for the figures.

This is the measurement behind ``opbench.engines.cpp.engine.CODE_PLACEMENT_FLAGS``.

    python benchmarks/cpp_placement.py          # ~10 min
    python benchmarks/cpp_placement.py --quick  # ~10 s: two statements, two flag sets
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import warnings
from pathlib import Path

# name: (global_setup, setup, stmt)
STATEMENTS = {
    "inc": ("", "std::uint64_t x = 1;", "x = x * 3 + 1; opbench::do_not_optimize(x);"),
    "hash16": ("", 'std::uint64_t h = 1469598103934665603ull; const char* p = "opbench-hash-in!";',
               ("for (int i = 0; i < 16; ++i) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;"
               " opbench::do_not_optimize(h);")),
    "memcpy4k": ("#include <cstring>", "static char s[4096], d[4096];",
                 "std::memcpy(d, s, 4096); opbench::do_not_optimize(d);"),
    "sort64": ("#include <algorithm>\n#include <random>\n#include <vector>",
               ("std::vector<int> src(64), v(64); std::mt19937 g(1); "
               "for (auto& x : src) x = (int)g();"),
               "v = src; std::sort(v.begin(), v.end()); opbench::do_not_optimize(v.data());"),
    "dot1k": ("", ("static float a[1024], b[1024]; "
                  "for (int i = 0; i < 1024; ++i) { a[i] = i % 3; b[i] = i % 5; }"),
              ("float s = 0; for (int i = 0; i < 1024; ++i) s += a[i] * b[i]; "
              "opbench::do_not_optimize(s);")),
    "matmul64": ("", ("static float A[64*64], B[64*64], C[64*64]; "
                     "for (int i = 0; i < 4096; ++i) { A[i] = i % 7; B[i] = i % 5; }"),
                 ("for (int i = 0; i < 64; ++i) for (int k = 0; k < 64; ++k) { "
                 "float a = A[i*64+k]; for (int j = 0; j < 64; ++j) C[i*64+j] += a * B[k*64+j]; }"
                 " opbench::do_not_optimize(C);")),
}

FLAG_SETS = {
    "g++ defaults": (),
    "-falign-functions=64": ("-falign-functions=64",),
    "-falign-loops=32": ("-falign-loops=32",),
    "functions=64 loops=32": ("-falign-functions=64", "-falign-loops=32"),
    "functions=64 loops=64": ("-falign-functions=64", "-falign-loops=64"),
}


def study(flags: tuple[str, ...], names: list[str], layouts: int,
          min_run_time: float) -> dict[str, list[float]]:
    """Per statement, each layout's minimum seconds per run."""
    import opbench.engines.cpp.engine as engine
    from opbench.timer import Timer

    engine.CODE_PLACEMENT_FLAGS = flags  # what every build reads (a benchmark's lever)
    result = {}
    for name in names:
        global_setup, setup, stmt = STATEMENTS[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a busy machine's governor warnings
            m = Timer(stmt, setup, global_setup, language="c++", layouts=layouts
                      ).blocked_autorange(min_run_time=min_run_time)
        result[name] = m.info["layout_minima"]
    return result


def google_benchmark(flags: list[str], names: list[str], work: Path,
                     ) -> dict[str, tuple[float, float]]:
    """(median, minimum) seconds per iteration of each statement over 25 repetitions under
    google/benchmark: the same loop body as opbench's (``clobber_memory`` after each run)."""
    from opbench.engines.cpp import include_dir

    parts = ["#include <benchmark/benchmark.h>", "#include <cstdint>",
             '#include "opbench/barrier.h"', *(STATEMENTS[n][0] for n in names)]
    for name in names:
        _, setup, stmt = STATEMENTS[name]
        parts.append(f"static void BM_{name}(benchmark::State& state) {{\n{setup}\n"
                     f"for (auto _ : state) {{\n{stmt}\nopbench::clobber_memory();\n}}\n}}\n"
                     f"BENCHMARK(BM_{name});")
    parts.append("BENCHMARK_MAIN();")
    (work / "gbench.cpp").write_text("\n".join(parts))
    subprocess.run(["c++", "-O2", "-std=c++17", *flags, f"-I{include_dir()}", "gbench.cpp",
                    "-o", "gbench", "-lbenchmark", "-lpthread"], cwd=work, check=True)
    out = subprocess.run([str(work / "gbench"), "--benchmark_repetitions=25",
                          "--benchmark_min_time=0.02", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True).stdout
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3}
    times: dict[str, list[float]] = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") == "iteration":
            times.setdefault(b["run_name"][len("BM_"):], []).append(
                b["real_time"] * scale[b["time_unit"]])
    return {name: (statistics.median(t), min(t)) for name, t in times.items()}


def has_google_benchmark() -> bool:
    return any(Path(d, "benchmark", "benchmark.h").is_file()
               for d in ("/usr/include", "/usr/local/include"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two statements, two flag sets")
    args = parser.parse_args()
    names = ["inc", "hash16"] if args.quick else list(STATEMENTS)
    sets = dict(list(FLAG_SETS.items())[-2:]) if args.quick else FLAG_SETS
    layouts = 2 if args.quick else 8
    with tempfile.TemporaryDirectory(prefix="opbench-placement-") as tmp:
        os.environ["OPBENCH_CACHE_DIR"] = tmp
        print(f"Per layout: minimum time per run relative to layout 0 ({layouts} layouts)")
        print(f"{'flags':<24}{'statement':<10}{'layout 0':>12}{'spread':>9}  layouts")
        widest = {}
        for label, flags in sets.items():
            for name, minima in study(flags, names, layouts, 0.05 if args.quick else 0.4).items():
                spread = (max(minima) - min(minima)) / statistics.median(minima)
                widest[label] = max(widest.get(label, 0.0), spread)
                print(f"{label:<24}{name:<10}{minima[0] * 1e9:10.2f}ns{spread * 100:8.1f}%  "
                      + " ".join(f"{t / minima[0]:.3f}" for t in minima), flush=True)
        print("\nwidest spread per flag set: "
              + ", ".join(f"{k}: {v * 100:.1f}%" for k, v in widest.items()))
        if args.quick or not has_google_benchmark():
            print("google/benchmark: skipped"
                  + (" (--quick)" if args.quick else " (apt-get install libbenchmark-dev)"))
            return
        print("\ngoogle/benchmark, minimum per iteration (ns):")
        for flags in ([], ["-falign-loops=32"]):
            best = google_benchmark(flags, names, Path(tmp))
            print(f"  {' '.join(flags) or 'default flags':<20}"
                  + "  ".join(f"{k}={low * 1e9:.2f}" for k, (_, low) in best.items()), flush=True)


if __name__ == "__main__":
    main()
