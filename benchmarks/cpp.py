"""C++ Timers: opbench against torch.utils.benchmark, side by side in one run.

Prints, for ``Timer(..., language="c++")``:
  1. time to first measurement, torch-free statement  (bar: opbench <= 1/5 of torch)
  2. time to first measurement, ``torch::`` statement (bar: opbench not slower)
  3. time to first measurement in a second process that reuses opbench's
     on-disk cache                                     (bar: under 2 s)
  4. per-run loop overhead of an empty statement      (bar: under 2 ns, not 0)

Each "first measurement" starts from an empty cache (a fresh temporary
OPBENCH_CACHE_DIR; torch keeps its builds per process anyway).

    python benchmarks/cpp.py          # ~1-2 min: two torch builds of ~30 s each
    python benchmarks/cpp.py --quick  # seconds: skips the torch builds
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

TORCH_FREE = ("auto y = x + 1;", "int x = 1;")
WITH_TORCH = ("auto y = x + 1;", "auto x = torch::ones({1});")

_CHILD = """
import time
t0 = time.perf_counter()
from opbench.timer import Timer
Timer({stmt!r}, {setup!r}, language="c++").timeit(100)
print(time.perf_counter() - t0)
"""


def first_measurement(make_timer, stmt: str, setup: str) -> float:
    """Seconds from constructing the Timer to its first Measurement."""
    start = time.perf_counter()
    make_timer(stmt, setup).timeit(100)
    return time.perf_counter() - start


def opbench_timer(stmt: str, setup: str):
    from opbench.timer import Timer

    return Timer(stmt, setup, language="c++")


def torch_timer(stmt: str, setup: str):
    from torch.utils.benchmark import Timer

    return Timer(stmt, setup, language="c++")


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="skip torch's compiles (about 30 s each)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="opbench-cpp-bench-") as cache:
        os.environ["OPBENCH_CACHE_DIR"] = cache
        print("C++ Timer: time to first measurement (s), empty cache")
        print(f"{'case':<32}{'opbench':>10}{'torch':>10}{'ratio':>9}  bar")

        ours = first_measurement(opbench_timer, *TORCH_FREE)
        if args.quick:
            print(f"{'torch-free statement':<32}{ours:>10.2f}{'skipped':>10}{'':>9}  "
                  "(--quick: torch build skipped)")
        else:
            theirs = first_measurement(torch_timer, *TORCH_FREE)
            print(f"{'torch-free statement':<32}{ours:>10.2f}{theirs:>10.2f}{ours / theirs:>9.3f}  "
                  f"<= 0.2: {verdict(ours <= theirs / 5)}")

        if args.quick:
            print(f"{'torch:: statement':<32}{'skipped':>10}{'skipped':>10}{'':>9}  "
                  "(--quick: torch builds skipped)")
        else:
            ours_t = first_measurement(opbench_timer, *WITH_TORCH)
            theirs_t = first_measurement(torch_timer, *WITH_TORCH)
            print(f"{'torch:: statement':<32}{ours_t:>10.2f}{theirs_t:>10.2f}"
                  f"{ours_t / theirs_t:>9.3f}  <= 1: {verdict(ours_t <= theirs_t)}")

        child = _CHILD.format(stmt=TORCH_FREE[0], setup=TORCH_FREE[1])
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                             check=True, env=dict(os.environ))
        process_s = time.perf_counter() - start
        reuse = float(out.stdout.strip())
        print(f"{'second process, cached':<32}{reuse:>10.2f}{'-':>10}{'':>9}  "
              f"< 2 s: {verdict(reuse < 2)} (whole process incl. interpreter: {process_s:.2f} s)")

        from opbench.timer import Timer

        m = Timer("", language="c++").blocked_autorange(min_run_time=0.05)
        ns = m.median * 1e9
        line = f"{'empty statement, ns per run':<32}{ns:>10.3f}"
        if args.quick:
            line += f"{'skipped':>10}{'':>9}"
        else:
            from torch.utils.benchmark import Timer as TorchTimer

            theirs_ns = TorchTimer("", language="c++").blocked_autorange(min_run_time=0.05).median * 1e9
            line += f"{theirs_ns:>10.3f}{'':>9}"
        print(line + f"  < 2 ns and > 0: {verdict(0 < ns < 2)}")
        if not args.quick:
            print("(torch deletes the empty loop: its figure is the 1 ns floor divided by the block size)")


if __name__ == "__main__":
    main()
